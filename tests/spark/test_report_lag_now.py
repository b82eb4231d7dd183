"""The report index's "offset lag now": the group's lag at the cluster's latest end-offset snapshot, as
group_health and current_lag count it, beside the largest lag of its last day."""

from __future__ import annotations

from chispa import assert_df_equality
from pyspark.sql import functions as F

from schemas.gold import lag_schema
from tests.gold_rows import CLUSTER, at
from transforms.report import current_lag_totals

OTHER_CLUSTER = "c2"


def _lag(spark, rows):
    """rows: (cluster, group, partition, seconds, offset lag, time lag)."""
    return spark.createDataFrame(
        [
            (
                cluster,
                group,
                "t",
                partition,
                at(s),
                0,
                None,
                offset_lag,
                offset_lag,
                False,
                time_lag,
                "interpolated",
                None,
            )
            for cluster, group, partition, s, offset_lag, time_lag in rows
        ],
        lag_schema,
    )


LAG_ROWS = [
    (CLUSTER, "busy", 0, 0, 29, 4.0),  # the day's worst, at the first snapshot
    (CLUSTER, "busy", 0, 60, 0, 0.0),
    (CLUSTER, "busy", 1, 60, 3, None),  # time lag unknown on one partition: the other's counts
    (CLUSTER, "gone", 0, 0, 7, 1.5),  # offsets deleted before the latest snapshot: no lag now
    (OTHER_CLUSTER, "busy", 0, 120, 11, 2.0),  # another cluster's later snapshot is not this one's now
]


def test_lag_now_is_the_groups_total_at_the_clusters_latest_snapshot(spark):
    lag = _lag(spark, LAG_ROWS)
    expected = spark.createDataFrame(
        [(CLUSTER, "busy", 3, 0.0), (OTHER_CLUSTER, "busy", 11, 2.0)],
        "cluster string, group_id string, current_offset_lag long, current_time_lag_seconds double",
    )
    assert_df_equality(current_lag_totals(lag, lag), expected, ignore_row_order=True, ignore_nullable=True)


def test_a_one_group_report_finds_the_clusters_snapshot_not_the_groups_last(spark):
    lag = _lag(spark, LAG_ROWS)
    gone = lag.where(F.col("group_id") == "gone")
    assert current_lag_totals(gone, lag).collect() == []
