"""What the metrics carry holds and how a night evaluates each group partition from it
(transforms/gold/metrics_carry.py), rule by rule on tiny tables; the end-to-end proof that nights equal a
run from scratch is tests/spark/test_incremental_metrics.py."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

from pyspark.sql import Window
from pyspark.sql import functions as F

from jobs.metrics_writes import CARRY_VERSION, CURRENT_CARRY_VERSION, INPUTS, LAST_DAY, can_continue_from
from schemas.metrics_carry import metrics_carry_schema
from transforms.gold.metrics_carry import CONTINUE, WHOLE, carry_tails, group_partition_starts
from transforms.gold.offsets import OFFSET_KEY, filter_invisible_offset_records

START = datetime(2026, 11, 2, tzinfo=UTC)
MINUTE_MS = 60_000
INTERVALS = 2


def at(minutes: float) -> datetime:
    return START + timedelta(minutes=minutes)


def records(spark, group: str, minutes: list[float], tombstone_at: float | None = None):
    """One group partition's visible offset records, one per minute given (a tombstone at `tombstone_at`)."""
    rows = [
        ("c", group, "orders", 0, 1, index, at(minute), minute == tombstone_at,
         None if minute == tombstone_at else index, at(minute), None, None)
        for index, minute in enumerate(minutes)
    ]  # fmt: skip
    schema = (
        "cluster string, group_id string, topic string, partition int, source_partition int, source_offset long,"
        " record_at timestamp, is_tombstone boolean, committed_offset long, committed_at timestamp,"
        " expires_at timestamp, txn_state string"
    )
    return spark.createDataFrame(rows, schema)


def tails(spark, rows):
    return carry_tails(rows, intervals=INTERVALS, min_distance_ms=MINUTE_MS)


def test_a_group_partition_that_had_a_tombstone_carries_all_its_records_another_its_last_buckets(spark):
    minutes = [float(minute) for minute in range(10)]
    plain = tails(spark, records(spark, "plain", minutes))
    tombstoned = tails(spark, records(spark, "tombstoned", minutes, tombstone_at=3.0))
    assert sorted(row.source_offset for row in plain.collect()) == [7, 8, 9]  # intervals + 1 buckets
    assert sorted(row.source_offset for row in tombstoned.collect()) == list(range(10))
    assert {row.has_tombstone for row in tombstoned.collect()} == {True}


def _tails_by_ranking_every_record(rows):
    """The carry's definition, written as it reads: each visible record's rank among its group partition's
    distinct buckets, newest first."""
    by_key = Window.partitionBy(*OFFSET_KEY)
    bucket = F.floor(F.unix_millis(F.coalesce("record_at", F.lit(datetime(1900, 1, 1, tzinfo=UTC)))) / MINUTE_MS)
    return (
        filter_invisible_offset_records(rows)
        .withColumns(
            {
                "back": F.dense_rank().over(by_key.orderBy(bucket.desc())),
                "has_tombstone": F.max("is_tombstone").over(
                    by_key.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
                ),
            }
        )
        .where((F.col("back") <= INTERVALS + 1) | F.col("has_tombstone"))
        .select(*metrics_carry_schema.fieldNames())
    )


def test_the_carry_equals_its_definition_on_records_of_many_kinds(spark):
    draw = random.Random(16)
    rows = []
    for group in range(12):
        # several records a bucket, gaps, untimed records, a few tombstones, invisible transactional ones
        minute = 0.0
        for offset in range(draw.randint(1, 40)):
            minute += draw.choice([0.1, 0.2, 0.5, 1.0, 3.0, 7.0])
            is_tombstone = draw.random() < 0.03
            record_at = None if draw.random() < 0.05 else at(minute)
            rows.append(("c", f"g{group % 5}", None if group == 11 else f"t{group % 2}", group % 3, 1, offset,
                         record_at, is_tombstone, None if is_tombstone else offset, record_at, None,
                         draw.choice([None, None, None, "committed", "aborted", "pending"])))  # fmt: skip
    schema = records(spark, "unused", []).schema
    frame = spark.createDataFrame(rows, schema)

    carried = Counter(map(tuple, tails(spark, frame).collect()))

    assert carried == Counter(map(tuple, _tails_by_ranking_every_record(frame).collect()))
    assert 0 < carried.total() < len(rows)


def test_a_carry_holding_every_record_continues_from_late_data_and_a_first_tombstone_else_is_read_whole(spark):
    minutes = [float(minute) for minute in range(10)]
    carry = (
        tails(spark, records(spark, "tombstoned", minutes, tombstone_at=3.0))
        .unionByName(tails(spark, records(spark, "plain", minutes)))
        .unionByName(tails(spark, records(spark, "few", [4.0, 8.5, 8.7])))  # INTERVALS buckets: all carried
        .unionByName(tails(spark, records(spark, "just enough", [1.0, 4.0, 8.5])))  # one more: maybe not all
    )

    def how(group: str, changed_minute: float, is_tombstone: bool = False) -> str:
        changes = spark.createDataFrame(
            [("c", group, "orders", 0, at(changed_minute), is_tombstone)],
            "cluster string, group_id string, topic string, partition int, record_at timestamp,"
            " has_tombstone_changed boolean",
        )
        no_snapshots = spark.createDataFrame([], "cluster string, topic string, partition int, observed_at timestamp")
        starts = group_partition_starts(changes, no_snapshots, carry.select(*metrics_carry_schema.names),
                                        intervals=INTERVALS, min_distance_ms=MINUTE_MS)  # fmt: skip
        return starts.where(F.col("group_id") == group).first().how

    assert how("plain", 9.5) == CONTINUE  # in the last carried bucket
    assert how("plain", 2.0) == WHOLE  # late: before what the carry holds
    assert how("plain", 10.0, is_tombstone=True) == WHOLE  # its first tombstone: the carry is not whole yet
    assert how("tombstoned", 10.0) == CONTINUE
    assert how("tombstoned", 2.0) == CONTINUE  # late, but every record before it is carried
    # Fewer buckets than the carry keeps: it holds every record, so late data and tombstones continue too.
    assert how("few", 2.0) == CONTINUE
    assert how("few", 9.0, is_tombstone=True) == CONTINUE
    assert how("just enough", 2.0) == WHOLE
    assert how("just enough", 9.0, is_tombstone=True) == WHOLE


def test_tables_noted_without_this_carry_are_evaluated_from_scratch_once():
    versions = {**dict.fromkeys(INPUTS, 4), LAST_DAY: 20_000}
    assert not can_continue_from(versions)  # noted before the carry held tombstoned partitions whole
    assert not can_continue_from({**versions, CARRY_VERSION: CURRENT_CARRY_VERSION - 1})
    assert can_continue_from({**versions, CARRY_VERSION: CURRENT_CARRY_VERSION})
    assert not can_continue_from(None)
