"""Capture's DataFrame logic: Spark Kafka source rows -> raw_records rows, and the offsets each
micro-batch must account for, so that what compaction removed is counted rather than unseen.

Grain: one row per captured record (`kafka_raw_rows`), one row per partition of a micro-batch
(`partition_spans`), one row per run of missing offsets (`missing_offset_ranges`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from transforms.bronze import raw_records_from_landed

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
    landed = records.select("partition", "offset", "timestamp", timestamp_type, "key", "value")
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
