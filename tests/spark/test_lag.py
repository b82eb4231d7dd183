"""Offset lag and time lag at end-offset snapshots, against the failure cases peers are known for."""

from __future__ import annotations

import pytest
from chispa import assert_approx_df_equality
from pyspark.sql import functions as F

from schemas import ops
from tests.gold_rows import CLUSTER, T0, at, commit, commits
from transforms.gold import lag

END_OFFSETS = {  # (topic, partition) -> [(seconds, end offset)]
    ("t", 0): [(0, 0), (10, 100), (20, 200)],  # steady production
    ("t", 1): [(0, 100), (10, 100), (20, 100), (30, 150)],  # a flat stretch, then a burst
    ("t", 2): [(0, 100), (10, 120)],  # history starts after the group's committed offset was written
    ("r", 0): [(0, 500), (10, 600), (20, 5), (30, 15)],  # topic recreated at 20
}
COMMITS = [
    commit(0, 5, "g1", "t", 0, 0),
    commit(1, 19, "g1", "t", 0, 149),
    commit(2, 1, "g1", "t", 1, 100),  # idle and caught up until the burst at 30
    commit(3, 0, "g1", "t", 2, 50),  # committed at the very time of the first snapshot
    commit(4, 5, "g2", "r", 0, 550),
    commit(5, 25, "g2", "r", 0, 10),
    commit(6, 1, "g3", "t", 2, 110),
    commit(7, 2, "g3", "t", 2, 115, txn_state="aborted"),
    commit(8, 3, "g3", "t", 2, 118, txn_state="pending"),
    commit(9, 1, "g4", "t", 2, 105, expires_at=at(5)),  # a v1 commit that expired before the snapshot
    commit(10, 1, "g5", "t", 2, 105),
    commit(11, 2, "g5", "t", 2, None),  # deleted: no committed offset afterwards
]


@pytest.fixture(scope="module")
def lag_rows(spark):
    end_offsets = spark.createDataFrame(
        [(CLUSTER, topic, p, offset, at(s)) for (topic, p), points in END_OFFSETS.items() for s, offset in points],
        ops.end_offsets_schema,
    )
    return lag.lag(commits(spark, COMMITS), end_offsets).localCheckpoint()


def test_offset_and_time_lag_at_every_snapshot(spark, lag_rows):
    expected = spark.createDataFrame(
        [
            ("g1", "t", 0, 10, 0, 100, 100, False, 9.9, "interpolated", 10.0),
            ("g1", "t", 0, 20, 149, 200, 51, False, 5.0, "interpolated", 10.0),
            ("g1", "t", 1, 10, 100, 100, 0, False, 0.0, "caught_up", 0.0),
            ("g1", "t", 1, 20, 100, 100, 0, False, 0.0, "caught_up", 0.0),  # idle: zero, not growing
            ("g1", "t", 1, 30, 100, 150, 50, False, 9.8, "interpolated", 10.0),  # no 0/0 on the flat stretch
            ("g1", "t", 2, 0, 50, 100, 50, False, None, "too_few_points", None),
            ("g1", "t", 2, 10, 50, 120, 70, False, 10.0, "lower_bound", None),  # not extrapolated
            ("g2", "r", 0, 10, 550, 600, 50, False, 4.9, "interpolated", 10.0),
            ("g2", "r", 0, 20, 550, 5, 0, True, None, "committed_ahead", None),  # never negative
            ("g2", "r", 0, 30, 10, 15, 5, False, 4.0, "interpolated", 10.0),  # only the new topic's history
            ("g3", "t", 2, 10, 110, 120, 10, False, 4.5, "interpolated", 10.0),  # aborted and pending ignored
        ],
        "group_id string, topic string, partition int, observed_s long, committed_offset long, end_offset long,"
        " offset_lag long, is_committed_ahead boolean, time_lag_seconds double, time_lag_method string,"
        " time_lag_uncertainty_seconds double",
    )
    actual = lag_rows.select(
        "group_id",
        "topic",
        "partition",
        (F.unix_seconds("observed_at") - F.lit(int(T0.timestamp()))).alias("observed_s"),
        *expected.columns[4:],
    )
    assert_approx_df_equality(actual, expected, 1e-6, ignore_row_order=True, ignore_nullable=True)


def test_daily_summary_takes_max_and_p95_over_snapshots(spark, lag_rows):
    expected = spark.createDataFrame(
        [
            ("g1", "t", 4, 170, 152.15, 10.0, 9.98, True),
            ("g2", "r", 3, 50, 45.5, 4.9, 4.855, False),
            ("g3", "t", 1, 10, 10.0, 4.5, 4.5, False),
        ],
        "group_id string, topic string, snapshot_count int, max_offset_lag long, p95_offset_lag double,"
        " max_time_lag_seconds double, p95_time_lag_seconds double, has_time_lag_lower_bound boolean",
    )
    daily = lag.lag_daily(lag_rows)
    assert [row.day for row in daily.select("day").distinct().collect()] == [T0.date()]
    assert_approx_df_equality(
        daily.select(*expected.columns), expected, 1e-6, ignore_row_order=True, ignore_nullable=True
    )
