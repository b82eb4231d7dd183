"""Delta table I/O shared by the jobs: the tables' names, create, read one cluster's rows, merge new
rows, replace one cluster's rows."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.config import Config
from jobs.connect_files import committed_location
from jobs.delta_tables import DeltaTable, is_connect, table_location
from schemas import gold
from transforms.schema_check import check_declared_types

if TYPE_CHECKING:
    from jobs.runs import JobRun

RAW_RECORDS = "raw_records"
TOPIC_IDS = "topic_ids"
END_OFFSETS = "end_offsets"
BROADCAST_THRESHOLD = "spark.sql.autoBroadcastJoinThreshold"
SILVER_INPUTS = ("offset_commits", "group_metadata", "group_members", "consumer_group_records")
HISTORY_TABLES = (
    "generations",
    "generation_assignments",
    "rebalances",
    "partition_movements",
    "rebalance_frequency",
    "rebalance_whatif",
    "generation_capacity",
    "streams_members",
)
METRICS_TABLES = ("lag", "lag_daily", "consumer_status", "group_status", "group_daily")

# A committed Delta version: a commit file or a checkpoint (temporary files start with a dot).
_DELTA_VERSION_FILE = re.compile(r"\d{20}\.(json|checkpoint(\.\d+\.\d+)?(\.[\w-]+)?\.parquet)|_last_checkpoint")


CHANGE_FEED_PROPERTY = "delta.enableChangeDataFeed"
DELETION_VECTORS_PROPERTY = "delta.enableDeletionVectors"
STATS_COLUMNS_PROPERTY = "delta.dataSkippingStatsColumns"
# The tables holding nearly every record keep file statistics only of the columns their readers filter
# on (a partition's offsets and times; whether raw holds other sources, or a capture's rows), not of the
# first 8 columns (conf/defaults.toml), whose unique record_id strings took 6% of a large night's decode.
STATS_COLUMNS = {
    RAW_RECORDS: ("source_partition", "source_offset", "record_at", "source_kind", "capture_run_id"),
    "offset_commits": ("source_partition", "source_offset", "record_at"),
}


def ensure_table(
    spark: SparkSession,
    name: str,
    schema: StructType,
    partition_by: Sequence[str] = (),
    change_feed: bool = False,
    deletion_vectors: bool = False,
) -> None:
    """Creates the table if it does not exist. `change_feed`: the table is a later step's input, which
    reads only what changed since its last run through Delta's Change Data Feed (turned on for a table
    an earlier version created without it; its readers then start from scratch once). `deletion_vectors`:
    rows a run deletes are marked, not their files rewritten (turned on for an earlier version's table too).
    A table of STATS_COLUMNS gets its statistics columns (an earlier version's keeps its files' full
    statistics)."""
    properties = {CHANGE_FEED_PROPERTY: "true"} if change_feed else {}
    if deletion_vectors:
        properties[DELETION_VECTORS_PROPERTY] = "true"
    if stats_columns := STATS_COLUMNS.get(name.rsplit(".", 1)[-1]):
        properties[STATS_COLUMNS_PROPERTY] = ",".join(stats_columns)
    if not spark.catalog.tableExists(name):
        # Not the builder for a table that exists: it would do nothing, after half a second of planning.
        builder = DeltaTable.createIfNotExists(spark).tableName(name).addColumns(schema)
        if committed := _committed_location(spark, name):
            builder = builder.location(committed)
        if partition_by:
            builder = builder.partitionedBy(*partition_by)
        for key, value in properties.items():
            builder = builder.property(key, value)
        builder.execute()
        return
    _add_declared_columns(spark, name, schema)
    if properties:
        held = {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
        if changed := {key: value for key, value in properties.items() if held.get(key) != value}:
            listed = ", ".join(f"'{key}' = '{value}'" for key, value in changed.items())
            spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({listed})")


def _add_declared_columns(spark: SparkSession, name: str, schema: StructType) -> None:
    """A table an earlier groupscope created gains the columns declared since (e.g. raw_records'
    source_topic), null in the rows it holds. New columns are declared last, where Delta adds them."""
    held = set(spark.table(name).columns)
    missing = [field for field in schema.fields if field.name not in held]
    if missing:
        columns = ", ".join(f"{field.name} {field.dataType.simpleString()}" for field in missing)
        spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({columns})")


def _committed_location(spark: SparkSession, name: str) -> str | None:
    """What a run killed while creating the table left at its location, made usable.

    Killed before Delta's first commit: files and an empty `_delta_log`, which Delta refuses to create
    a table over; they hold nothing committed and are removed. Killed after it but before the
    metastore entry (or a metastore lost while the warehouse survived): a committed table, whose
    location is returned so that it is registered as it is; committed data is never removed.
    """
    if is_connect(spark):  # no JVM in this process: the same, through its own filesystem
        return committed_location(spark, name, _DELTA_VERSION_FILE.fullmatch)
    database, table = name.split(".", 1)
    jvm = spark.sparkContext._jvm
    location = jvm.org.apache.hadoop.fs.Path(f"{spark.catalog.getDatabase(database).locationUri}/{table}")
    fs = location.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(location):
        return None
    log = jvm.org.apache.hadoop.fs.Path(location, "_delta_log")
    if fs.exists(log) and any(
        _DELTA_VERSION_FILE.fullmatch(status.getPath().getName()) for status in fs.listStatus(log)
    ):
        print(f"{name}: registering the committed table found at {location}", file=sys.stderr, flush=True)
        return location.toString()
    print(f"{name}: removing the uncommitted files a killed run left at {location}", file=sys.stderr, flush=True)
    fs.delete(location, True)
    return None


def merge_new_rows(spark: SparkSession, name: str, rows: DataFrame, key_columns: Sequence[str]) -> None:
    """Inserts rows whose key is not in the table yet: re-running a capture adds nothing twice."""
    condition = " AND ".join(f"target.`{column}` = source.`{column}`" for column in key_columns)
    (
        DeltaTable.forName(spark, name)
        .alias("target")
        .merge(rows.alias("source"), condition)
        .whenNotMatchedInsertAll()
        .execute()
    )


def sql_string_literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def database_tables(spark: SparkSession, database: str) -> list[str]:
    """The names of the database's tables, views left out. By SQL rather than `catalog.listTables`, whose
    rows Spark cannot decode with interpreted expressions (the suite's setting: EXPRESSION_DECODING_FAILED)."""
    quoted = f"`{database.replace('`', '``')}`"
    tables = {row.tableName for row in spark.sql(f"SHOW TABLES IN {quoted}").collect() if not row.isTemporary}
    views = {row.viewName for row in spark.sql(f"SHOW VIEWS IN {quoted}").collect()}
    return sorted(tables - views)


def replace_cluster_rows(spark: SparkSession, name: str, rows: DataFrame, cluster: str) -> None:
    """Atomically replaces one cluster's rows: a re-run or a run after a crash gives the same table.

    Written by location: the schema is fixed by `ensure_table`, and writing through the Hive catalog
    would make it try (and fail, noisily) to alter the placeholder schema it keeps for Delta tables.
    """
    (
        rows.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", f"cluster = {sql_string_literal(cluster)}")
        .save(table_location(spark, name))
    )


def cluster_rows(spark: SparkSession, config: Config, name: str, schema: StructType | None = None) -> DataFrame:
    """One cluster's rows of a table; an empty frame of `schema` when the (optional) table does not exist."""
    table = config.table(name)
    if schema is not None and not spark.catalog.tableExists(table):
        return spark.createDataFrame([], schema)
    return spark.table(table).where(F.col("cluster") == F.lit(config.cluster))


def gold_rows(name: str, rows: DataFrame) -> DataFrame:
    """Rows in the gold table's column order, refused (SchemaMismatch) unless their types are the declared ones."""
    declared = gold.GOLD_SCHEMAS[name]
    return check_declared_types(rows.select(*declared.names), declared, name)


def write_gold(spark: SparkSession, config: Config, run: JobRun, name: str, rows: DataFrame) -> DataFrame:
    """Replaces the cluster's rows of a gold table and returns them as read back (short lineage)."""
    table = config.table(name)
    ensure_table(spark, table, gold.GOLD_SCHEMAS[name], partition_by=("cluster",))
    replace_cluster_rows(spark, table, gold_rows(name, rows), config.cluster)
    run.count_rows(name)
    return cluster_rows(spark, config, name)


# Stores one gold table's rows and gives them back cut from their lineage: the job writes Delta tables,
# tests may keep them in memory.
Materialize = Callable[[str, DataFrame], DataFrame]


@contextmanager
def broadcast_joins_off(spark: SparkSession) -> Iterator[None]:
    """No join planned inside is a broadcast one, whatever Spark estimates its sides at."""
    previous = spark.conf.get(BROADCAST_THRESHOLD)
    spark.conf.set(BROADCAST_THRESHOLD, "-1")
    try:
        yield
    finally:
        spark.conf.set(BROADCAST_THRESHOLD, previous)


def materialized(rows: DataFrame) -> DataFrame:
    """An intermediate result computed once and cut from its lineage (it feeds several outputs)."""
    return rows.localCheckpoint(eager=True)


def held_on_disk(rows: DataFrame) -> DataFrame:
    """`materialized` for a night's worth of rows: kept on the executors' local disk rather than in their
    heap, where millions of rows crowd out the sorts and windows that read them."""
    return rows.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)


def held_frames(spark: SparkSession) -> dict[int, object]:
    """The frames the session holds (materialized, held_on_disk) by RDD id; Delta's own cached table
    states are not among them (Delta drops those itself). None seen through Spark Connect."""
    if is_connect(spark):
        return {}
    persistent = spark.sparkContext._jsc.getPersistentRDDs()
    held = {int(rdd_id): persistent.get(rdd_id) for rdd_id in persistent.keySet().toArray()}
    return {rdd_id: rdd for rdd_id, rdd in held.items() if rdd.rdd().isCheckpointed()}


@contextmanager
def releasing_held(spark: SparkSession) -> Iterator[None]:
    """Frees the frames a step held once it ends: no later step reads them, and in memory they left the
    next step's sorts too little of the heap (a 108M-record `--full` ran out of it in metrics after
    history). What was held before the step stays held."""
    before = set(held_frames(spark))
    try:
        yield
    finally:
        for rdd_id, rdd in held_frames(spark).items():
            if rdd_id not in before:
                rdd.unpersist(False)
