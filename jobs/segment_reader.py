"""Which reader reads each partition's segment files: the JVM's (groupscope.SegmentSource) where the log is
clean, the Python reader (transforms.decoder) for everything else.

A clean log is what a broker writes to `__consumer_offsets` and `__share_group_state` by default:
uncompressed RecordBatch v2 whose framing, CRC-32C and records all hold. The JVM reads it tens of times
faster than Python, and its rows are the Python reader's, column by column (tests/spark/test_segment_reader.py
compares them on real captures). Whatever else a log holds (legacy message sets, compressed batches, a torn
tail, damage of any kind) the Python reader reads, keeping each unreadable fragment as a quarantine row with
its reason. A partition is read by one of them whole, since its transactions span its files.

Which partitions are clean is known before any record is read: a first job walks each file (no row out) and
says where its clean batches end. The read then stops there, so a live segment that grows meanwhile is read
as it stood when checked (the rest is the next run's, which reads the file on from there).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from jobs.ingest_plan import FileRead
from jobs.segment_files import is_uri, segment_order
from transforms.bronze import raw_rows_schema
from transforms.decoder.record_batches import topic_partition_from_path

SOURCE = "groupscope.SegmentSource"
# "python" reads every partition with the Python reader (to compare the two, or to rule the JVM's out).
READER_CONF = "spark.groupscope.ingest.reader"
_NOT_CLEAN, _NOT_CHECKED = -1, -2


def jvm_reads(spark: SparkSession, partitions: Sequence[Sequence[FileRead]]) -> dict[int, list[tuple[FileRead, int]]]:
    """The partitions (by index) the JVM reader takes: each file's read, and where its clean batches end."""
    if spark.conf.get(READER_CONF, "jvm") == "python":
        return {}
    candidates = {
        index: [(read, _NOT_CHECKED) for read in sorted(reads, key=lambda read: segment_order(read.path))]
        for index, reads in enumerate(partitions)
        if reads and all(_is_local_coordinator_file(read.path) for read in reads)
    }
    if not candidates:
        return {}
    checked = spark.read.format(SOURCE).option("mode", "check").option("reads", _lines(candidates)).load()
    ends = {(row.task, row.path): row.clean_end for row in checked.collect()}
    clean = {}
    for index, reads in candidates.items():
        read_ends = [ends.get((index, read.path), _NOT_CLEAN) for read, _ in reads]
        if _NOT_CLEAN not in read_ends:
            clean[index] = [(read, end) for (read, _), end in zip(reads, read_ends, strict=True)]
    return clean


def jvm_rows(
    spark: SparkSession, reads: dict[int, list[tuple[FileRead, int]]], cluster: str, capture_run_id: str
) -> DataFrame:
    """raw_records rows (record_at as epoch ms, `raw_rows_schema`) of the partitions `jvm_reads` gave."""
    return (
        spark.read.schema(raw_rows_schema)
        .format(SOURCE)
        .option("reads", _lines(reads))
        .option("cluster", cluster)
        .option("capture_run_id", capture_run_id)
        .load()
    )


def _is_local_coordinator_file(path: str) -> bool:
    is_one_field = "\t" not in path and "\n" not in path
    return is_one_field and not is_uri(path) and topic_partition_from_path(path) is not None


def _lines(reads: dict[int, list[tuple[FileRead, int]]]) -> str:
    """The source's `reads` option: task, topic, partition, path, start, known through, pending from, end."""
    lines = []
    for task, files in reads.items():
        for read, end in files:
            topic, partition = topic_partition_from_path(read.path)
            pending_from = "-" if read.pending_from is None else read.pending_from
            ending = "-" if end == _NOT_CHECKED else end
            fields = (task, topic, partition, read.path, read.start, read.known_through, pending_from, ending)
            lines.append("\t".join(map(str, fields)))
    return "\n".join(lines)
