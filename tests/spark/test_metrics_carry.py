"""What the metrics carry holds and how a night evaluates each group partition from it
(transforms/gold/metrics_carry.py), rule by rule on tiny tables; the end-to-end proof that nights equal a
run from scratch is tests/spark/test_incremental_metrics.py."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from jobs.metrics_writes import CARRY_VERSION, CURRENT_CARRY_VERSION, INPUTS, LAST_DAY, can_continue_from
from schemas.metrics_carry import metrics_carry_schema
from transforms.gold.carry_cuts import with_nth_set_bit
from transforms.gold.metrics_carry import (
    CONTINUE,
    EARLIEST,
    WHOLE,
    carry_tails,
    earliest_changes,
    first_record_time,
    group_partition_facts,
    group_partition_starts,
    group_partition_words,
    record_time,
)
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


def test_a_carry_holds_the_last_buckets_and_after_a_tombstone_every_later_life_whole(spark):
    minutes = [float(minute) for minute in range(10)]
    plain = tails(spark, records(spark, "plain", minutes))
    tombstoned = tails(spark, records(spark, "tombstoned", minutes, tombstone_at=3.0))
    deleted_late = tails(spark, records(spark, "deleted late", minutes, tombstone_at=8.0))
    assert sorted(row.source_offset for row in plain.collect()) == [7, 8, 9]  # intervals + 1 buckets
    assert sorted(row.source_offset for row in tombstoned.collect()) == list(range(10))
    assert {(row.has_tombstone, row.holds_every_record) for row in tombstoned.collect()} == {(True, True)}
    # The first life's last INTERVALS + 1 buckets before its tombstone, the tombstone and what follows.
    assert sorted(row.source_offset for row in deleted_late.collect()) == [5, 6, 7, 8, 9]
    assert {(row.has_tombstone, row.holds_every_record) for row in deleted_late.collect()} == {(True, False)}


def _tails_by_ranking_every_record(rows, intervals: int = INTERVALS):
    """The carry's definition, written as it reads (all of each group partition's records given): the
    records after its first tombstone in the log, and of the first life those in its last INTERVALS + 1
    buckets before the earliest tombstone's bucket, and any later."""
    by_key = Window.partitionBy(*OFFSET_KEY)
    everything = by_key.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    bucket = F.floor(F.unix_millis(F.coalesce("record_at", F.lit(datetime(1900, 1, 1, tzinfo=UTC)))) / MINUTE_MS)
    position = F.struct("source_partition", "source_offset")
    first_tombstone = F.min(F.when(F.col("is_tombstone"), F.struct(bucket.alias("b"), position.alias("p"))))
    records = (
        filter_invisible_offset_records(rows)
        .withColumns(
            {
                "bucket": bucket,
                "first_tombstone_position": F.min(F.when(F.col("is_tombstone"), position)).over(everything),
                "earliest_tombstone_bucket": first_tombstone.over(everything)["b"],
                "last_position": F.max(position).over(everything),
            }
        )
        .withColumn("is_first_life", F.coalesce(position < F.col("first_tombstone_position"), F.lit(True)))
        .withColumn(
            "is_counted",
            F.col("is_first_life") & F.coalesce(F.col("bucket") < F.col("earliest_tombstone_bucket"), F.lit(True)),
        )
    )
    counted = records.where("is_counted").withColumn("back", F.dense_rank().over(by_key.orderBy(F.desc("bucket"))))
    cuts = counted.groupBy(*OFFSET_KEY).agg(
        F.min(F.when(F.col("back") <= intervals + 1, F.col("bucket"))).alias("cut"),
        (F.max("back") <= intervals + 1).alias("holds_every_record"),
    )
    same_key = [records[name].eqNullSafe(cuts[name]) for name in OFFSET_KEY]  # a record's topic may be null
    return (
        records.join(cuts, on=same_key, how="left")
        .select(records["*"], "cut", "holds_every_record")
        .withColumns(
            {
                "has_tombstone": F.col("first_tombstone_position").isNotNull(),
                "holds_every_record": F.coalesce("holds_every_record", F.lit(True)),
            }
        )
        .where(~F.col("is_first_life") | F.col("cut").isNull() | (F.col("bucket") >= F.col("cut")))
        .select(*metrics_carry_schema.fieldNames())
    )


def _records_of_many_kinds(spark, most_per_group: int = 40, tombstone_rate: float = 0.03):
    draw = random.Random(16)
    rows = []
    for group in range(12):
        # several records a bucket, gaps, untimed records, a few tombstones, invisible transactional ones
        minute = 0.0
        for offset in range(draw.randint(1, most_per_group)):
            minute += draw.choice([0.1, 0.2, 0.5, 1.0, 3.0, 7.0])
            is_tombstone = draw.random() < tombstone_rate
            record_at = None if draw.random() < 0.05 else at(minute)
            # log positions of every kind a struct orders: nulls first, the extremes of int and long
            source_partition = draw.choice([1, 1, 1, None, -(2**31), 2**31 - 1])
            source_offset = draw.choice([offset, offset, offset, None, 2**63 - 1, -(2**63)])
            rows.append(("c", f"g{group % 5}", None if group == 11 else f"t{group % 2}", group % 3, source_partition,
                         source_offset, record_at, is_tombstone, None if is_tombstone else offset, record_at, None,
                         draw.choice([None, None, None, "committed", "aborted", "pending"])))  # fmt: skip
    schema = records(spark, "unused", []).schema
    return spark.createDataFrame(rows, schema)


@pytest.mark.parametrize(
    ("intervals", "most_per_group", "tombstone_rate"),
    [(INTERVALS, 40, 0.03), (70, 400, 0.002)],
    ids=["within a word", "across words"],
)
def test_the_carry_equals_its_definition_on_records_of_many_kinds(spark, intervals, most_per_group, tombstone_rate):
    # Up to 400 records, rarely a tombstone: many first lives of more than 71 buckets, so the cut falls
    # in an earlier word of 64 buckets than the last, some way into it.
    frame = _records_of_many_kinds(spark, most_per_group, tombstone_rate)

    carried = Counter(map(tuple, carry_tails(frame, intervals=intervals, min_distance_ms=MINUTE_MS).collect()))

    assert carried == Counter(map(tuple, _tails_by_ranking_every_record(frame, intervals).collect()))
    assert 0 < carried.total() < frame.count()


def test_one_aggregation_of_the_records_serves_the_carry_the_walk_and_the_snapshots_read(spark):
    frame = _records_of_many_kinds(spark)
    facts = group_partition_facts(frame, min_distance_ms=MINUTE_MS).localCheckpoint()

    carried = carry_tails(frame, intervals=INTERVALS, min_distance_ms=MINUTE_MS, lives=facts)
    expected = Counter(map(tuple, _tails_by_ranking_every_record(frame).collect()))
    assert Counter(map(tuple, carried.collect())) == expected
    # The bitmaps the walk shares, made before the carry: it cuts by them alone.
    words = group_partition_words(frame, facts, min_distance_ms=MINUTE_MS).localCheckpoint()
    from_words = carry_tails(frame, intervals=INTERVALS, min_distance_ms=MINUTE_MS, lives=facts, words=words)
    assert Counter(map(tuple, from_words.collect())) == expected
    # What snapshot_horizon's walk and metrics_reach read, as each would aggregate it from the records.
    first_seen = (
        filter_invisible_offset_records(frame)
        .groupBy(*OFFSET_KEY)
        .agg(F.min("record_at"), F.bool_or("is_tombstone"), F.min(record_time(F.col("record_at"))))
    )
    found = facts.select(*OFFSET_KEY, "first_record_at", "is_kept_whole", first_record_time().alias("first_time"))
    assert sorted(map(tuple, found.collect()), key=repr) == sorted(map(tuple, first_seen.collect()), key=repr)
    # Both kinds of earliest time: a group partition with an untimed record and one without.
    assert 0 < found.where(F.col("first_time") == F.lit(EARLIEST)).count() < found.count()


def test_how_each_group_partition_continues_from_its_carry_or_is_read_whole(spark):
    minutes = [float(minute) for minute in range(10)]
    relaxed = records(spark, "relaxed", [*minutes, 10.0], tombstone_at=10.0).where(F.col("record_at") >= at(7.0))
    key = "cluster string, group_id string, topic string, partition int"
    position = "struct<source_partition:int,source_offset:bigint>"
    carry = (
        tails(spark, records(spark, "tombstoned", minutes, tombstone_at=3.0))
        .unionByName(tails(spark, records(spark, "plain", minutes)))
        .unionByName(tails(spark, records(spark, "few", [4.0, 8.5, 8.7, 9.0])))  # INTERVALS + 1 buckets
        # "plain" after its first tombstone (log position 10) continued from its tail: not every record
        .unionByName(
            carry_tails(relaxed, intervals=INTERVALS, min_distance_ms=MINUTE_MS,
                        partial=spark.createDataFrame([("c", "relaxed", "orders", 0, (1, 9))],
                                                      f"{key}, last_position {position}"))
        )
    )  # fmt: skip

    def how(group: str, changed_minute: float, tombstone_offset: int | None = None) -> str:
        tombstone = None if tombstone_offset is None else (1, tombstone_offset)
        changes = spark.createDataFrame(
            [("c", group, "orders", 0, at(changed_minute), tombstone)],
            f"{key}, record_at timestamp, first_tombstone_position {position}",
        )
        no_snapshots = spark.createDataFrame([], "cluster string, topic string, partition int, observed_at timestamp")
        starts = group_partition_starts(changes, no_snapshots, carry.select(*metrics_carry_schema.names),
                                        min_distance_ms=MINUTE_MS)  # fmt: skip
        return starts.where(F.col("group_id") == group).first().how

    held = {row.group_id: row.holds_every_record for row in carry.select("group_id", "holds_every_record").collect()}
    assert held == {"tombstoned": True, "plain": False, "few": True, "relaxed": False}
    assert how("plain", 9.5) == CONTINUE  # in the last carried bucket
    assert how("plain", 2.0) == WHOLE  # late: before what the carry holds
    # Its first tombstone: after every record in the log and in time, it continues from the tail.
    assert how("plain", 10.0, tombstone_offset=10) == CONTINUE
    assert how("plain", 10.0, tombstone_offset=5) == WHOLE  # earlier in the log than a record: lives move
    assert how("plain", 2.0, tombstone_offset=10) == WHOLE
    assert how("tombstoned", 10.0) == CONTINUE
    assert how("tombstoned", 2.0, tombstone_offset=20) == CONTINUE  # late, but it holds every record
    assert how("few", 2.0) == CONTINUE
    assert how("few", 9.0, tombstone_offset=20) == CONTINUE
    assert how("relaxed", 11.0) == CONTINUE  # after its first tombstone
    assert how("relaxed", 11.0, tombstone_offset=12) == CONTINUE
    assert how("relaxed", 11.0, tombstone_offset=8) == WHOLE
    assert how("relaxed", 9.5) == WHOLE  # before its first tombstone: the records left out may matter


def test_tables_noted_without_this_carry_are_evaluated_from_scratch_once():
    versions = {**dict.fromkeys(INPUTS, 4), LAST_DAY: 20_000}
    assert not can_continue_from(versions)  # noted before the carry held tombstoned partitions whole
    assert not can_continue_from({**versions, CARRY_VERSION: CURRENT_CARRY_VERSION - 1})
    assert can_continue_from({**versions, CARRY_VERSION: CURRENT_CARRY_VERSION})
    assert not can_continue_from(None)


def test_a_night_s_earliest_changes_are_the_earliest_time_and_first_tombstone_in_the_log(spark):
    draw = random.Random(18)
    rows = [
        ("c", f"g{draw.randint(0, 3)}", draw.choice(["t0", None]), draw.randint(0, 1),
         draw.choice([0, 7, None, -(2**31), 2**31 - 1]), draw.choice([5, 6, None, 2**63 - 1, -(2**63)]),
         None if draw.random() < 0.1 else at(draw.randint(0, 600)), draw.random() < 0.3, None, None, None, None)
        for _ in range(300)
    ]  # fmt: skip
    frame = spark.createDataFrame(rows, records(spark, "unused", []).schema)

    def in_log_order(position):  # a struct's order: a null field first
        return tuple((value is not None, value or 0) for value in position)

    expected = {}
    for cluster, group, topic, partition, source_partition, source_offset, record_at, is_tombstone, *_ in rows:
        key = (cluster, group, topic, partition)
        earliest, first = expected.get(key, (None, None))
        at_ms = int((record_at or EARLIEST).timestamp() * 1000)
        earliest = at_ms if earliest is None else min(earliest, at_ms)
        if is_tombstone and (first is None or in_log_order((source_partition, source_offset)) < in_log_order(first)):
            first = (source_partition, source_offset)
        expected[key] = (earliest, first)

    found = {
        (row.cluster, row.group_id, row.topic, row.partition): (
            row.at_ms,
            None if row.first_tombstone_position is None else tuple(row.first_tombstone_position),
        )
        for row in earliest_changes(frame).withColumn("at_ms", F.unix_millis("record_at")).collect()
    }
    assert found == expected
    assert sum(first is not None for _, first in expected.values()) > 1


def test_the_nth_set_bit_of_a_word_is_found_by_halving(spark):
    draw = random.Random(26)
    words = [-1, 1, -(1 << 63), *[draw.getrandbits(64) - (1 << 63) for _ in range(200)]]
    asked = []
    for word in words:
        places = [place for place in range(64) if (word >> place) & 1]
        asked += [
            (word, nth, place)
            for nth, place in enumerate(places, start=1)
            if nth in (1, len(places)) or draw.random() < 0.2
        ]
    rows = spark.createDataFrame([(word, nth) for word, nth, _ in asked], "bits long, nth int")
    found = with_nth_set_bit(rows, "bits", F.col("nth"), "place").collect()
    assert sorted((row.bits, row.nth, row.place) for row in found) == sorted(asked)
