"""A table's blind appends read as the Parquet files they added, where Delta's change feed is slow.

Delta's change feed is a relation that hands Spark its rows as external Row objects: each row is
converted out of Spark's internal format and back, about twice the CPU of reading the same files
(docs/bench-log.md, nineteenth and twentieth sessions). A version that only added files of new data (a
blind append: ingest's and decode's writes, nearly every version the nightly reads) has exactly those
files' rows as its changes, every one an insert. `range_files` names those versions and their files,
from Delta's own log (DeltaLog.getChanges, the list the change feed itself reads), so that a reader
can take them as Parquet and the change feed only for the other versions (a MERGE, a delete); and
every file the range's reading needs, so that a reader can tell that VACUUM deleted some before it
starts (Delta itself fails only as it reads them, halfway through a step).

Taken only where plain Parquet reads what Delta would: the table needs no reader feature but deletion
vectors (no column mapping), no protocol or schema change falls in the range, and no added file carries
a deletion vector. A deletion vector a later version gives an appended file is that version's change:
the append's own are still every row the file was written with. On Spark Connect (no JVM in this process) nothing is
taken: every version goes through the change feed.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.delta_tables import is_connect, table_location

# Actions that change no row: a version holding only these and data files is a blind append.
_NEUTRAL_ACTIONS = frozenset({"CommitInfo", "SetTransaction", "DomainMetadata"})
# Actions that change how files are read: a range holding one is read through the change feed.
_SCHEMA_ACTIONS = frozenset({"Protocol", "Metadata"})
_FILE_ACTIONS = frozenset({"AddFile", "RemoveFile", "AddCDCFile"})
_EXISTENCE_CHECKS_AT_ONCE = 16
# Reader features under which an appended file, read as plain Parquet, holds the rows its version added.
_PARQUET_READ_FEATURES = frozenset({"deletionVectors"})


@dataclass(frozen=True)
class AppendedFiles:
    """Files one version added with the same partition values (absolute paths)."""

    version: int
    partition_values: tuple[tuple[str, str | None], ...]
    paths: tuple[str, ...]


@dataclass(frozen=True)
class RangeFiles:
    """What reading a range of versions needs: the blind appends Parquet can read (empty when it cannot
    read the table as Delta would), and every file the change feed reads for the range."""

    appended: dict[int, list[AppendedFiles]]
    read: tuple[str, ...]


def range_files(spark: SparkSession, table: str, first: int, last: int) -> RangeFiles | None:
    """The files of versions [first, last], from Delta's log; None on Spark Connect (no JVM to ask)."""
    if is_connect(spark):
        return None
    jvm = spark.sparkContext._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table_location(spark, table))
    defaults = (getattr(log, f"update$default${index}")() for index in (1, 2, 3))
    as_java = jvm.scala.jdk.javaapi.CollectionConverters.asJava
    protocol = log.update(*defaults).protocol()
    reader_features = set(as_java(protocol.readerFeatureNames()))  # named from reader version 3 on
    parquet_reads_it = protocol.minReaderVersion() == 1 or (
        protocol.minReaderVersion() == 3 and reader_features <= _PARQUET_READ_FEATURES
    )
    data_path = log.dataPath()
    absolute_path = jvm.org.apache.spark.sql.delta.util.DeltaFileOperations.absolutePath
    found: dict[int, list[AppendedFiles]] = {}
    read: list[str] = []
    changes = log.getChanges(first, last, getattr(log, "getChanges$default$2")(), True)
    while changes.hasNext():
        version_and_actions = changes.next()
        version, actions = version_and_actions._1(), version_and_actions._2().iterator()
        by_partition: dict[tuple, list[str]] = {}
        change_files, data_files = [], []
        blind = True
        while actions.hasNext():
            action = actions.next()
            kind = action.getClass().getSimpleName()
            parquet_reads_it = parquet_reads_it and kind not in _SCHEMA_ACTIONS
            path = absolute_path(data_path.toString(), action.path()).toString() if kind in _FILE_ACTIONS else None
            if kind == "AddCDCFile":
                change_files.append(path)
            elif kind in _FILE_ACTIONS and action.dataChange():
                data_files.append(path)
                if action.deletionVector() is not None and action.deletionVector().isOnDisk():
                    data_files.append(action.deletionVector().absolutePath(data_path).toString())
            if kind == "AddFile" and action.dataChange() and action.deletionVector() is None:
                values = tuple(sorted(dict(as_java(action.partitionValues())).items()))
                by_partition.setdefault(values, []).append(path)
            elif kind not in _NEUTRAL_ACTIONS:
                blind = False
        # The feed reads a version's change files when it wrote any, else its added and removed files.
        read += change_files or data_files
        if blind:
            found[version] = [AppendedFiles(version, values, tuple(paths)) for values, paths in by_partition.items()]
    return RangeFiles(found if parquet_reads_it else {}, tuple(read))


def missing_files(spark: SparkSession, paths: Sequence[str]) -> list[str]:
    """Those of `paths` that do not exist (VACUUM deletes the files of versions older than its retention),
    asked a few at a time: on object storage each is a request."""
    jvm = spark.sparkContext._jvm
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()

    def exists(path: str) -> bool:
        located = jvm.org.apache.hadoop.fs.Path(path)
        return located.getFileSystem(hadoop_conf).exists(located)

    with ThreadPoolExecutor(max_workers=_EXISTENCE_CHECKS_AT_ONCE) as pool:
        return [path for path, present in zip(paths, pool.map(exists, paths), strict=True) if not present]


def read_appended(spark: SparkSession, files: list[AppendedFiles], schema: StructType) -> DataFrame | None:
    """The rows of `files` as the change feed gives them: the table's columns (`schema`), then
    `_change_type` 'insert' and `_commit_version`. None when there are no files."""
    reads = []
    for appended in files:
        partition_values = dict(appended.partition_values)
        data_schema = StructType([field for field in schema.fields if field.name not in partition_values])
        constants = {
            field.name: F.lit(partition_values[field.name]).cast(field.dataType)
            for field in schema.fields
            if field.name in partition_values
        }
        rows = spark.read.schema(data_schema).parquet(*appended.paths).withColumns(constants)
        reads.append(
            rows.select(*schema.fieldNames()).withColumns(
                {"_change_type": F.lit("insert"), "_commit_version": F.lit(appended.version).cast("long")}
            )
        )
    return functools.reduce(DataFrame.unionByName, reads) if reads else None
