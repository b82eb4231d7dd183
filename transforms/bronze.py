"""From captured bytes to bronze `raw_records` rows: the decoder's log records, landed raw records, or
the rows of Spark's Kafka source in a live capture (with the offsets each micro-batch accounts for).

The log layer's `LogRecord`s (one partition's segments, read by a task of `jobs.steps.ingest`) become
Arrow batches of raw_records rows, with record_at as epoch ms (`raw_rows_schema`) until
`with_record_at` makes it a timestamp. Landed records are expected in the shape Spark's Kafka source
produces (partition, offset, timestamp, key, value); in JSON lines the key and value are base64 text.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from operator import attrgetter

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from schemas.bronze import raw_records_schema
from schemas.coordinator_records import CONSUMER_OFFSETS_TOPIC
from schemas.share_state_records import SHARE_GROUP_STATE_TOPIC
from transforms.decoder.record_batches import LogRecord, topic_from_path

SOURCE_KIND_SEGMENT = "segment"
SOURCE_KIND_RAW_TABLE = "raw_table"

# raw_records as a task sends it: record_at as epoch ms, which Arrow carries without a time zone.
raw_rows_schema = StructType(
    [
        StructField("record_at_ms", LongType()) if field.name == "record_at" else field
        for field in raw_records_schema.fields
    ]
)


def record_id(
    cluster: str,
    partition: int | None,
    offset: int | None,
    source_file: str | None,
    position: int | None,
    topic: str | None = None,
) -> str:
    """The natural key of a raw record; bytes that never framed as a record are keyed by file position.
    A `__consumer_offsets` record's id names no topic (the ids of earlier versions, which read no other);
    another topic's names it, as its partitions and offsets repeat those of `__consumer_offsets`."""
    if partition is not None and offset is not None:
        return f"{_id_prefix(cluster, topic)}/{partition}/{offset}"
    return f"{cluster}/{source_file}@{position}"


def _id_prefix(cluster: str, topic: str | None) -> str:
    return cluster if topic in (None, CONSUMER_OFFSETS_TOPIC) else f"{cluster}/{topic}"


def record_id_column(cluster: str, topic: Column, partition: Column, offset: Column) -> Column:
    """`record_id` of a Kafka record as a Spark column (see `record_id`)."""
    is_consumer_offsets = topic.isNull() | (topic == F.lit(CONSUMER_OFFSETS_TOPIC))
    prefix = F.when(is_consumer_offsets, F.lit(cluster)).otherwise(F.concat_ws("/", F.lit(cluster), topic))
    return F.concat_ws("/", prefix, partition.cast("string"), offset.cast("string"))


_RAW_ROWS_ARROW_SCHEMA = to_arrow_schema(raw_rows_schema)
# LogRecord fields in the order raw_batch reads them: one C-level getter per record, not a Python loop.
_LOG_RECORD_FIELDS = (
    "partition", "offset", "timestamp_ms", "timestamp_type", "key", "value", "producer_id", "producer_epoch",
    "is_transactional", "txn_state", "batch_base_offset", "batch_position", "source_file", "error", "raw",
)  # fmt: skip
_read_fields = attrgetter(*_LOG_RECORD_FIELDS)
# raw_records column -> the LogRecord field it is read from, where the names differ.
_RAW_FROM_LOG_RECORD = {
    "source_partition": "partition", "source_offset": "offset", "record_at_ms": "timestamp_ms", "read_error": "error",
}  # fmt: skip


def raw_batch(records: list[LogRecord], cluster: str, capture_run_id: str) -> pa.RecordBatch:
    """The records as one Arrow batch of raw_records rows (record_at as epoch ms).

    This runs once per record of every segment, so it is built column by column and the record ids
    by Arrow kernels: a dict or an f-string per record costs more than reading the record.
    """
    count = len(records)
    columns = zip(*map(_read_fields, records), strict=True) if records else ([] for _ in _LOG_RECORD_FIELDS)
    fields = {name: list(column) for name, column in zip(_LOG_RECORD_FIELDS, columns, strict=True)}
    # Bytes that never framed as a record are keyed by their place in the file, and kept as the value.
    unreadable = [
        index
        for index, (error, raw) in enumerate(zip(fields["error"], fields["raw"], strict=True))
        if error is not None and raw is not None
    ]
    for index in unreadable:
        fields["value"][index] = fields["raw"][index]
    unreadable = set(unreadable)
    arrow_schema = _RAW_ROWS_ARROW_SCHEMA
    arrays = {
        name: pa.array(fields[_RAW_FROM_LOG_RECORD.get(name, name)], arrow_schema.field(name).type)
        for name in arrow_schema.names
        if _RAW_FROM_LOG_RECORD.get(name, name) in fields
    }
    # One task reads one partition directory, so a batch's records nearly always share one topic.
    topic_of = {
        path: topic_from_path(path) if path is not None else CONSUMER_OFFSETS_TOPIC
        for path in set(fields["source_file"])
    }
    topics = [topic_of[path] for path in fields["source_file"]]
    arrays["source_topic"] = pa.array(topics, pa.string())
    arrays["record_id"] = _record_ids(
        arrays["source_partition"], arrays["source_offset"], cluster, unreadable, fields, topics
    )
    for name, constant in (
        ("cluster", cluster),
        ("source_kind", SOURCE_KIND_SEGMENT),
        ("capture_run_id", capture_run_id),
    ):
        arrays[name] = pa.repeat(pa.scalar(constant, pa.string()), count)
    return pa.RecordBatch.from_arrays([arrays[name] for name in arrow_schema.names], schema=arrow_schema)


def _record_ids(
    partition: pa.Array, offset: pa.Array, cluster: str, unreadable: set[int], fields: dict, topics: list[str]
) -> pa.Array:
    """`record_id` of each record: its prefix (see `record_id`)/partition/offset, joined by Arrow; the few
    without both (or unreadable) by `record_id` itself."""
    as_text = [pc.cast(column, pa.string()) for column in (partition, offset)]
    prefixes = {topic: _id_prefix(cluster, topic) for topic in set(topics)}
    prefix = (
        pa.scalar(prefixes.popitem()[1])
        if len(prefixes) == 1
        else pa.array([prefixes[topic] for topic in topics], pa.string())
    )
    ids = pc.binary_join_element_wise(prefix, *as_text, "/")
    if not unreadable and ids.null_count == 0:
        return ids
    patched = ids.to_pylist()
    for index in {*unreadable, *(i for i, text in enumerate(patched) if text is None)}:
        is_readable = index not in unreadable
        patched[index] = record_id(
            cluster,
            fields["partition"][index] if is_readable else None,
            fields["offset"][index] if is_readable else None,
            fields["source_file"][index],
            fields["batch_position"][index],
            topics[index],
        )
    return pa.array(patched, pa.string())


def with_record_at(rows: DataFrame) -> DataFrame:
    """Rows of `raw_rows_schema` -> raw_records: record_at_ms becomes the TIMESTAMP record_at."""
    return rows.select(
        *[
            F.timestamp_millis("record_at_ms").alias("record_at") if field.name == "record_at" else F.col(field.name)
            for field in raw_records_schema.fields
        ]
    )


# Records leave a task in Arrow batches of at most this many: with one segment file (up to
# `offsets.topic.segment.bytes`, 100 MiB by default) it bounds a task's memory, whatever the log's size.
RECORDS_PER_BATCH = 10_000


def arrow_batches(
    records: Iterator[LogRecord], cluster: str, capture_run_id: str, records_per_batch: int
) -> Iterator[pa.RecordBatch]:
    while chunk := list(islice(records, records_per_batch)):
        yield raw_batch(chunk, cluster, capture_run_id)


def _binary(column: str, is_base64: bool) -> Column:
    return F.unbase64(F.col(column)) if is_base64 else F.col(column).cast("binary")


def raw_records_from_landed(
    landed: DataFrame, cluster: str, capture_run_id: str, source: str, is_base64: bool
) -> DataFrame:
    """Landed records (Kafka-source shape) -> raw_records rows.

    Spark's Kafka source with read_committed never returns aborted records or markers, so landed
    records are already resolved: their txn_state is unknown (null) unless the input carries one.
    """
    names = set(landed.columns)

    def optional(name: str, data_type: str) -> Column:
        return F.col(name).cast(data_type) if name in names else F.lit(None).cast(data_type)

    timestamp = F.col("timestamp")
    record_at = (
        timestamp if dict(landed.dtypes)["timestamp"] == "timestamp" else F.timestamp_millis(timestamp.cast("long"))
    )
    # Kafka-source rows name their topic: `__share_group_state`'s are share-state records; any other name
    # is the group coordinator's log, under its own name or a copy's (a mirror, a configured capture topic).
    is_share_state = F.col("topic") == F.lit(SHARE_GROUP_STATE_TOPIC) if "topic" in names else F.lit(False)
    topic = F.when(is_share_state, F.lit(SHARE_GROUP_STATE_TOPIC)).otherwise(F.lit(CONSUMER_OFFSETS_TOPIC))
    return landed.select(
        F.lit(cluster).alias("cluster"),
        record_id_column(cluster, topic, F.col("partition"), F.col("offset")).alias("record_id"),
        F.col("partition").cast("int").alias("source_partition"),
        F.col("offset").cast("long").alias("source_offset"),
        record_at.alias("record_at"),
        optional("timestampType", "string").alias("timestamp_type"),
        _binary("key", is_base64).alias("key"),
        _binary("value", is_base64).alias("value"),
        optional("producer_id", "long").alias("producer_id"),
        optional("producer_epoch", "int").alias("producer_epoch"),
        optional("is_transactional", "boolean").alias("is_transactional"),
        optional("txn_state", "string").alias("txn_state"),
        F.lit(None).cast("long").alias("batch_base_offset"),
        F.lit(None).cast("long").alias("batch_position"),
        F.lit(SOURCE_KIND_RAW_TABLE).alias("source_kind"),
        F.lit(source).alias("source_file"),
        F.lit(None).cast("string").alias("read_error"),
        F.lit(capture_run_id).alias("capture_run_id"),
        topic.alias("source_topic"),
    )


# Capture: Spark's Kafka source rows -> raw_records rows, and the offsets each micro-batch must account
# for, so that what compaction removed is counted rather than unseen.
SOURCE_KIND_KAFKA = "kafka"
TIMESTAMP_TYPE_CREATE_TIME, TIMESTAMP_TYPE_LOG_APPEND_TIME = 0, 1  # the Kafka source's timestampType


def kafka_raw_rows(records: DataFrame, cluster: str, capture_run_id: str, source: str) -> DataFrame:
    """Rows of Spark's Kafka source -> raw_records rows (source_kind 'kafka'). Under read_committed every
    record is committed or not transactional, so txn_state stays null as for other landed records."""
    timestamp_type = (
        F.when(F.col("timestampType") == TIMESTAMP_TYPE_CREATE_TIME, F.lit("create_time"))
        .when(F.col("timestampType") == TIMESTAMP_TYPE_LOG_APPEND_TIME, F.lit("log_append_time"))
        .alias("timestampType")
    )
    topic = [name for name in ("topic",) if name in records.columns]  # Spark's Kafka source always has it
    landed = records.select(*topic, "partition", "offset", "timestamp", timestamp_type, "key", "value")
    rows = raw_records_from_landed(landed, cluster, capture_run_id, source, is_base64=False)
    return rows.select(
        *[F.lit(SOURCE_KIND_KAFKA).alias(name) if name == "source_kind" else F.col(name) for name in rows.columns]
    )


def partition_spans(batch_offsets: DataFrame, held_offsets: DataFrame) -> DataFrame:
    """The offsets each partition of a micro-batch must account for: from just after the last record held
    before the batch (0 when none) to the batch's last record, and how many of them are held.

    batch_offsets, held_offsets: source_partition, source_offset (held = every record of the cluster,
    the batch included). Spans of consecutive batches meet, so every offset is accounted for once, and
    a replayed batch gives the same span again.
    """
    bounds = batch_offsets.groupBy("source_partition").agg(
        F.min("source_offset").alias("batch_first_offset"), F.max("source_offset").alias("last_offset")
    )
    offset, batch_first = F.col("source_offset"), F.col("batch_first_offset")
    return (
        held_offsets.join(F.broadcast(bounds), on="source_partition", how="inner")
        .where(offset <= F.col("last_offset"))
        .groupBy("source_partition", "batch_first_offset", "last_offset")
        .agg(
            F.max(F.when(offset < batch_first, offset)).alias("last_held_offset"),
            F.countDistinct(F.when(offset >= batch_first, offset)).alias("held_count"),
        )
        .select(
            "source_partition",
            F.coalesce(F.col("last_held_offset") + 1, F.lit(0).cast("long")).alias("first_offset"),
            "last_offset",
            "held_count",
        )
    )


def missing_offset_ranges(spans: DataFrame, held_offsets: DataFrame) -> DataFrame:
    """Runs of offsets inside each span (source_partition, first_offset, last_offset) that no held record
    has: source_partition, start_offset, end_offset (exclusive)."""
    in_span = (
        held_offsets.join(spans, on="source_partition", how="inner")
        .where(F.col("source_offset").between(F.col("first_offset"), F.col("last_offset")))
        .select("source_partition", "source_offset")
        .distinct()
    )
    span_starts = spans.select("source_partition", (F.col("first_offset") - 1).alias("source_offset"))
    in_order = Window.partitionBy("source_partition").orderBy("source_offset")
    return (
        in_span.unionByName(span_starts)
        .withColumn("previous_offset", F.lag("source_offset").over(in_order))
        .where(F.col("source_offset") - F.col("previous_offset") > 1)
        .select(
            "source_partition",
            (F.col("previous_offset") + 1).alias("start_offset"),
            F.col("source_offset").alias("end_offset"),
        )
    )
