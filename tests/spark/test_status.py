"""Burrow's status rules with the fixes its users needed, the group roll-up, and the daily group view."""

from __future__ import annotations

from datetime import timedelta

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from schemas import ops
from tests.gold_rows import CLUSTER, T0, at, commit, commits
from transforms.gold import group_daily, lag, status

INTERVALS = 3
RING = "array<struct<offset:bigint,ts:timestamp,lag:bigint>>"


def ring(*slots):
    return [(offset, at(seconds), slot_lag) for offset, seconds, slot_lag in slots]


CASES = [  # case, window (offset, seconds, lag at commit), recent end offsets, lag now, now (s), expected
    ("progressing", ring((10, 0, 5), (20, 10, 3), (30, 20, 2)), [32, 35], 2, 25, "OK"),
    ("lag_growing", ring((10, 0, 5), (20, 10, 6), (30, 20, 8)), [40], 9, 25, "WARN"),
    ("offsets_stuck", ring((10, 0, 5), (10, 10, 8), (10, 20, 12)), [25], 15, 25, "STALL"),
    ("silent", ring((10, 0, 5), (20, 10, 5)), [40, 50], 30, 100, "STOP"),
    ("silent_after_zero_lag", ring((10, 0, 0), (20, 10, 0)), [40, 50], 30, 100, "STOP"),  # #290: rule 1 gates less
    ("idle_caught_up", ring((50, 0, 0)), [50, 50], 0, 1000, "OK"),  # #38: never STOP with no lag now
    ("caught_up_then_new_data", ring((50, 0, 0), (50, 10, 0)), [50, 55], 5, 1000, "OK"),
    ("rewound", ring((30, 0, 5), (10, 10, 25), (20, 20, 15)), [35], 15, 25, "REWIND"),
    ("rewind_caught_up", ring((30, 0, 5), (10, 10, 25), (35, 20, 1)), [36], 1, 25, "OK"),
    ("stuck_but_was_at_zero", ring((10, 0, 0), (10, 10, 3), (10, 20, 8)), [18], 8, 25, "OK"),  # rule 1
    ("one_commit_no_trend", ring((10, 0, 5)), [15], 5, 0, "OK"),
    ("lags_unknown", ring((10, 0, None), (20, 10, None), (30, 20, 7)), [37], 9, 25, "OK"),
    ("no_window", [], [15], 5, 10, "OK"),
]


def test_burrow_rules_and_their_fixes(spark):
    cases = spark.createDataFrame(
        [(name, slots, leos, current, at(now), expected) for name, slots, leos, current, now, expected in CASES],
        f"case string, ring {RING}, leo_ring array<bigint>, current_lag bigint, now timestamp, status string",
    )
    verdict = status.evaluate(
        F.col("ring"), F.col("leo_ring"), F.col("current_lag"), F.col("now"), 10, allowed_lag=0, minimum_complete=0.0
    )
    actual = cases.select("case", verdict.alias("status"))
    assert_df_equality(actual, cases.select("case", "status"), ignore_row_order=True, ignore_nullable=True)


END_OFFSETS = {("t", 0): [(0, 10), (10, 30), (20, 50), (60, 50)], ("t", 1): [(20, 100), (60, 100)]}
COMMITS = [
    commit(0, 0, "a", "t", 0, 10),
    commit(1, 9.6, "a", "t", 0, 18),  # 0.3 s apart: one slot, which keeps the later commit's offset and time
    commit(2, 9.9, "a", "t", 0, 20),
    commit(3, 20, "a", "t", 0, 28),
    commit(4, 15, "a", "t", 1, 100),  # idle and caught up
    commit(5, 0, "b", "t", 0, 30),
    commit(6, 5, "b", "t", 0, 50),
    commit(7, 6, "b", "t", 0, None),  # offsets deleted: the window starts again
    commit(8, 8, "b", "t", 0, 20),  # lower than before, yet no REWIND
]


@pytest.fixture(scope="module")
def evaluated(spark):
    end_offsets = spark.createDataFrame(
        [(CLUSTER, topic, p, offset, at(s)) for (topic, p), points in END_OFFSETS.items() for s, offset in points],
        ops.end_offsets_schema,
    )
    offset_commits = commits(spark, COMMITS)
    lag_rows = lag.lag(offset_commits, end_offsets).localCheckpoint()
    return status.consumer_status(
        lag_rows, offset_commits, end_offsets, intervals=INTERVALS, min_distance_ms=1000, allowed_lag=0,
        minimum_complete=0.0,
    ).localCheckpoint()  # fmt: skip


def test_partition_status_at_every_snapshot(spark, evaluated):
    expected = spark.createDataFrame(
        [
            ("a", 0, 0, "OK", 0, 1, False, 10),
            ("a", 0, 10, "OK", 10, 2, False, 20),
            ("a", 0, 20, "OK", 22, 3, True, 28),  # lag was zero in the window (rule 1)
            ("a", 0, 60, "STOP", 22, 3, True, 28),  # silent for longer than the window, end offsets moved on
            ("a", 1, 20, "OK", 0, 1, False, 100),
            ("a", 1, 60, "OK", 0, 1, False, 100),
            ("b", 0, 0, "OK", 0, 1, False, 30),
            ("b", 0, 10, "OK", 10, 1, False, 20),
            ("b", 0, 20, "OK", 30, 1, False, 20),
            ("b", 0, 60, "STOP", 30, 1, False, 20),
        ],
        "group_id string, partition int, evaluated_s long, status string, current_lag long,"
        " window_slot_count int, is_window_complete boolean, last_committed_offset long",
    )
    actual = evaluated.select(
        "group_id",
        "partition",
        (F.unix_seconds("evaluated_at") - F.lit(int(T0.timestamp()))).alias("evaluated_s"),
        *expected.columns[3:],
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_each_snapshot_sees_the_last_slots_before_it_across_snapshots(spark):
    """Many commits between snapshots: a snapshot's window is the last INTERVALS slots at or before it,
    wherever they sit (one exactly at the snapshot, the rest before the previous snapshot)."""
    end_offsets = spark.createDataFrame(
        [(CLUSTER, "t", 0, offset, at(s)) for s, offset in [(0, 0), (3, 10), (4.5, 10), (10, 20), (30, 20)]],
        ops.end_offsets_schema,
    )
    offset_commits = commits(
        spark,
        [
            commit(0, 1, "c", "t", 0, 1),
            commit(1, 2, "c", "t", 0, 2),
            commit(2, 3, "c", "t", 0, 3),  # exactly at a snapshot: the last slot that snapshot sees
            commit(3, 4, "c", "t", 0, 4),
            commit(4, 5, "c", "t", 0, 5),
            commit(5, 6, "c", "t", 0, None),  # tombstone: the window starts again
            commit(6, 7, "c", "t", 0, 7),
            commit(7, 8, "c", "t", 0, 8),
        ],
    )
    evaluated = status.consumer_status(
        lag.lag(offset_commits, end_offsets), offset_commits, end_offsets, intervals=INTERVALS, min_distance_ms=1000,
        allowed_lag=0, minimum_complete=0.0,
    )  # fmt: skip
    expected = spark.createDataFrame(
        [(3.0, 3, 3), (4.5, 3, 4), (10.0, 2, 8), (30.0, 2, 8)],
        "evaluated_s double, window_slot_count int, last_committed_offset long",
    )
    actual = evaluated.select(
        (F.unix_micros("evaluated_at") / 1e6 - F.lit(T0.timestamp())).alias("evaluated_s"),
        "window_slot_count",
        "last_committed_offset",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_group_rolls_up_to_its_worst_partition_per_window(spark, evaluated):
    expected = spark.createDataFrame(
        [
            ("a", at(60), "OK", 2, 0, 0.5, 22, 22, "t", 0),
            ("a", at(120), "ERR", 2, 1, 0.5, 22, 22, "t", 0),
            ("b", at(60), "OK", 1, 0, 0.0, 30, 30, "t", 0),
            ("b", at(120), "ERR", 1, 1, 0.0, 30, 30, "t", 0),
        ],
        "group_id string, evaluated_at timestamp, status string, partition_count int, error_partition_count int,"
        " complete double, total_lag long, max_lag long, max_lag_topic string, max_lag_partition int",
    )
    actual = status.group_status(evaluated, window_minutes=1).select(*expected.columns)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_daily_view_marks_stale_expiring_and_deleted_groups(spark):
    def day(n, hours=0):
        return T0 + timedelta(days=n, hours=hours)

    gens = spark.createDataFrame(
        [
            (CLUSTER, "active", day(0), "stable", day(0), 1),
            (CLUSTER, "emptied", day(0), "stable", day(0), 2),
            (CLUSTER, "emptied", day(1), "empty", day(0, hours=22), 3),
            (CLUSTER, "gone", day(0), "stable", day(0), 4),
            (CLUSTER, "gone", day(3), "deleted", None, 5),
        ],
        "cluster string, group_id string, recorded_at timestamp, state string, join_completed_at timestamp,"
        " source_offset long",
    )
    offset_commits = commits(
        spark,
        [
            commit(10, 0, "active", "t", 0, 5),
            commit(11, 60, "active", "t", 0, 7),
            commit(12, 2 * 86_400, "standalone", "t", 0, 1),
        ],
    )
    rebalances = spark.createDataFrame(
        [(CLUSTER, "active", day(0), 3)],
        "cluster string, group_id string, completed_at timestamp, moved_partition_count int",
    )
    lag_rows = spark.createDataFrame(
        [
            (CLUSTER, "active", day(0), 4, 2.0),
            (CLUSTER, "active", day(0), 6, None),
            (CLUSTER, "active", day(0, 1), 1, 0.5),
        ],
        "cluster string, group_id string, observed_at timestamp, offset_lag long, time_lag_seconds double",
    )
    statuses = spark.createDataFrame(
        [(CLUSTER, "active", day(0), "WARN"), (CLUSTER, "active", day(0, 1), "OK")],
        "cluster string, group_id string, evaluated_at timestamp, status string",
    )
    daily = group_daily.group_daily(
        gens, group_daily.commits_per_day(offset_commits), rebalances, lag_rows, statuses,
        as_of=(T0 + timedelta(days=9)).date(),
        stale_after_days=7, offsets_retention_minutes=3 * 24 * 60, expiry_warning_hours=24,
    ).localCheckpoint()  # fmt: skip
    expected = spark.createDataFrame(
        [
            ("active", 0, 2, 1, 3, 10, 9.55, 2.0, "WARN", "stable", False, None, False, False),
            ("active", 6, 0, 0, 0, None, None, None, None, "stable", False, None, False, False),
            ("active", 7, 0, 0, 0, None, None, None, None, "stable", True, None, False, False),
            ("emptied", 2, 0, 0, 0, None, None, None, None, "empty", False, day(3, 22), False, False),
            ("emptied", 3, 0, 0, 0, None, None, None, None, "empty", False, day(3, 22), True, False),
            ("gone", 3, 0, 0, 0, None, None, None, None, "deleted", False, None, False, True),
            ("standalone", 2, 1, 0, 0, None, None, None, None, None, False, day(5), False, False),
        ],
        "group_id string, n int, commit_count long, rebalance_count int, moved_partition_count int,"
        " max_offset_lag long, p95_offset_lag double, max_time_lag_seconds double, worst_status string,"
        " group_state string, is_stale boolean, offsets_expire_at timestamp, is_expiring_soon boolean,"
        " is_deleted boolean",
    )
    n = F.datediff("day", F.lit(T0.date())).alias("n")
    wanted = F.struct("group_id", n).isin(*[F.struct(F.lit(g), F.lit(d)) for g, d, *_ in expected.collect()])
    actual = daily.select("group_id", n, *expected.columns[2:]).where(wanted)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    spans = {row.group_id: row.days for row in daily.groupBy("group_id").agg(F.count("*").alias("days")).collect()}
    assert spans == {"active": 10, "emptied": 10, "gone": 10, "standalone": 8}


def test_the_last_commit_of_a_day_counts_a_commit_at_the_midnight_that_ends_it(spark):
    midnight = T0.replace(hour=0) + timedelta(days=1)  # the end of day 0

    def hours_after_midnight(hours):
        return (midnight - T0).total_seconds() + hours * 3600

    offset_commits = commits(
        spark,
        [
            commit(1, hours_after_midnight(-14), "g", "t", 0, 1),
            commit(2, hours_after_midnight(-13), "g", "t", 0, 2),
            commit(3, hours_after_midnight(0), "g", "t", 0, 3),  # exactly the midnight ending day 0
            commit(4, hours_after_midnight(5), "g", "t", 0, 4),
            commit(5, hours_after_midnight(48), "g", "t", 0, 5),  # the only commit of day 3, at its first instant
        ],
    )
    no_rows = "cluster string, group_id string"
    daily = group_daily.group_daily(
        spark.createDataFrame([], f"{no_rows}, recorded_at timestamp, state string, join_completed_at timestamp,"
                                  " source_offset long"),
        group_daily.commits_per_day(offset_commits),
        spark.createDataFrame([], f"{no_rows}, completed_at timestamp, moved_partition_count int"),
        spark.createDataFrame([], f"{no_rows}, observed_at timestamp, offset_lag long, time_lag_seconds double"),
        spark.createDataFrame([], f"{no_rows}, evaluated_at timestamp, status string"),
        as_of=(midnight + timedelta(days=2)).date(), stale_after_days=7, offsets_retention_minutes=60,
        expiry_warning_hours=24,
    )  # fmt: skip
    expected = spark.createDataFrame(
        [
            (0, 2, midnight),
            (1, 2, midnight + timedelta(hours=5)),
            (2, 0, midnight + timedelta(days=2)),
            (3, 1, midnight + timedelta(days=2)),
        ],
        "n int, commit_count long, last_commit_at timestamp",
    )
    n = F.datediff("day", F.lit(T0.date())).alias("n")
    actual = daily.select(n, "commit_count", "last_commit_at")
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
