"""Capture's DataFrame logic on tiny frames: Kafka source rows into raw_records rows, and the spans and
missing offsets each micro-batch accounts for."""

from __future__ import annotations

from datetime import UTC, datetime

from chispa import assert_df_equality

from transforms.bronze import kafka_raw_rows, missing_offset_ranges, partition_spans

AT = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
OFFSETS = "source_partition int, source_offset long"


def test_kafka_source_rows_become_raw_records_keyed_by_cluster_partition_offset(spark):
    records = spark.createDataFrame(
        [(b"k", b"v", 3, 7, AT, 0), (b"k", None, 3, 8, AT, 1), (None, None, 0, 0, AT, 0)],
        "key binary, value binary, partition int, offset long, timestamp timestamp, timestampType int",
    )
    rows = kafka_raw_rows(records, "prod", "capture-1", "kafka://broker/__consumer_offsets")
    expected = spark.createDataFrame(
        [
            ("prod/3/7", 3, 7, "create_time", b"k", b"v", "kafka", "capture-1", None),
            ("prod/3/8", 3, 8, "log_append_time", b"k", None, "kafka", "capture-1", None),
            ("prod/0/0", 0, 0, "create_time", None, None, "kafka", "capture-1", None),
        ],
        "record_id string, source_partition int, source_offset long, timestamp_type string, key binary, "
        "value binary, source_kind string, capture_run_id string, txn_state string",
    )
    chosen = rows.select(*expected.columns)
    assert_df_equality(chosen, expected, ignore_row_order=True, ignore_nullable=True)
    assert rows.where("cluster = 'prod' AND record_at = timestamp'2026-11-24 12:00:00'").count() == 3


def test_kafka_source_rows_of_share_group_state_are_keyed_by_their_topic(spark):
    """Both logs share partition numbers and offsets; a copy of __consumer_offsets under another name (a
    mirror, a configured capture topic) holds __consumer_offsets records."""
    records = spark.createDataFrame(
        [(t, b"k", None, 3, 7, AT, 0) for t in ("__consumer_offsets", "__share_group_state", "mirror.offsets")],
        "topic string, key binary, value binary, partition int, offset long, timestamp timestamp, timestampType int",
    )
    rows = kafka_raw_rows(records, "prod", "capture-1", "kafka://broker")
    expected = spark.createDataFrame(
        [
            ("prod/3/7", "__consumer_offsets"),
            ("prod/__share_group_state/3/7", "__share_group_state"),
            ("prod/3/7", "__consumer_offsets"),
        ],
        "record_id string, source_topic string",
    )
    assert_df_equality(rows.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)


def test_a_span_starts_after_the_last_record_held_before_the_batch(spark):
    batch = spark.createDataFrame([(0, 5), (0, 6), (0, 8), (1, 0), (1, 1)], OFFSETS)
    # held: every record of the cluster, the batch included; offset 10 came later and is not this span's.
    held = spark.createDataFrame([(0, 0), (0, 1), (0, 2), (0, 5), (0, 6), (0, 8), (0, 10), (1, 0), (1, 1)], OFFSETS)
    expected = spark.createDataFrame(
        [(0, 3, 8, 3), (1, 0, 1, 2)], "source_partition int, first_offset long, last_offset long, held_count long"
    )
    assert_df_equality(partition_spans(batch, held), expected, ignore_row_order=True, ignore_nullable=True)


def test_missing_offsets_are_runs_inside_the_span_with_an_exclusive_end(spark):
    spans = spark.createDataFrame(
        [(0, 3, 8), (1, 0, 1), (2, 4, 4)], "source_partition int, first_offset long, last_offset long"
    )
    held = spark.createDataFrame([(0, 2), (0, 5), (0, 6), (0, 8), (0, 10), (1, 0), (1, 1), (2, 4)], OFFSETS)
    expected = spark.createDataFrame([(0, 3, 5), (0, 7, 8)], "source_partition int, start_offset long, end_offset long")
    assert_df_equality(missing_offset_ranges(spans, held), expected, ignore_row_order=True, ignore_nullable=True)
