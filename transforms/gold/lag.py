"""Offset lag and time lag of every group partition at every end-offset snapshot, and daily summaries.

Grain of `lag`: one (group, topic, partition) at one snapshot (observed_at) at which the group held a
committed offset. The committed offset is the latest visible offset record appended at or before the
snapshot (aborted and pending transactional commits never count); after a tombstone, or once a v1
commit's expire time has passed, the partition has no committed offset until the next commit.

offset_lag = max(0, end_offset - committed_offset): never negative; a commit beyond the end offset
(topic recreated, clocks apart) is flagged `is_committed_ahead`.

Time lag, as kafka-lag-exporter computes it, with its known failures fixed. The end-offset history
of the partition is a table of points (end_offset, observed_at). The oldest message the group has not
consumed is at offset c (the committed offset); it was written when the end offset passed c, i.e.
between the last point l with l.offset <= c and the first point r with r.offset > c. Interpolating
linearly, the end offset reached c + 1 at
    written_at = l.time + (c + 1 - l.offset) * (r.time - l.time) / (r.offset - l.offset)
and time_lag = snapshot time - written_at. (kafka-lag-exporter interpolates to c, one message early.)
- No 0/0: r.offset > c >= l.offset, so the divisor is at least 1; a flat stretch (l.offset = r.offset)
  can never be chosen, and of a flat stretch at offset c the latest point is l.
- No wild extrapolation: when no point is at or below c (the history starts after that message was
  written) the time lag is only known to be at least snapshot time - r.time: that lower bound is
  reported, `time_lag_method` = 'lower_bound'. With r the snapshot itself it is 'too_few_points' (null).
- Caught up (c = end offset): time lag 0, however long the partition has been idle.
- A topic recreated (end offset going down) starts a new history: points before it are not used.
`time_lag_uncertainty_seconds` = r.time - l.time, the width of the interval interpolated in.

How far from the truth. The true time lag at a snapshot is observed_at - T, T the timestamp of the
record at offset c (the next one the group consumes; the first record after c if c holds none, e.g. a
transaction marker). A snapshot is stamped when its request is sent and the broker reads the end offset
a moment later, so: at l the record was not yet appended, at r it was; its append time A lies in
(l.time, r.time + d_r], d_r the delay from r's stamp to the broker's read (one request: a few ms, a
few hundred on a loaded host). A record's timestamp comes at most d_p before its append (CreateTime
is set by the producer before it batches and sends; 0 with LogAppendTime), plus any clock difference
between producer and snapshot hosts. written_at lies in (l.time, r.time]. Hence, with d = max(d_r, d_p):
  interpolated: |time_lag_seconds - true time lag| <= time_lag_uncertainty_seconds + d
  lower_bound:   time_lag_seconds <= true time lag + d_r   (the truth can be any amount larger)
  caught_up:     exact (0: nothing to consume at the snapshot)
Interpolation assumes nothing about how records spread over (l.time, r.time]: a burst anywhere in it
can be at either end, so the bound is the interval's width however steady production is. Snapshot
more often to narrow it (tests/spark/test_time_lag_truth.py checks it on every lab capture).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.offsets import OFFSET_KEY, PARTITION, filter_invisible_offset_records
from transforms.gold.timeline import latest_at_or_before

METHOD_CAUGHT_UP, METHOD_INTERPOLATED = "caught_up", "interpolated"
METHOD_LOWER_BOUND, METHOD_TOO_FEW_POINTS, METHOD_COMMITTED_AHEAD = "lower_bound", "too_few_points", "committed_ahead"
P95 = 0.95


def offset_lag(end_offset: Column, committed_offset: Column) -> Column:
    return F.greatest(end_offset - committed_offset, F.lit(0)).cast("long")


def _seconds(later: Column, earlier: Column) -> Column:
    return (F.unix_micros(later) - F.unix_micros(earlier)) / F.lit(1_000_000.0)


def with_history_segment(end_offsets: DataFrame) -> DataFrame:
    """Numbers each partition's end-offset histories: a new one starts where the end offset goes down."""
    order = Window.partitionBy(*PARTITION).orderBy("observed_at")
    went_down = F.coalesce(F.col("end_offset") < F.lag("end_offset").over(order), F.lit(False))
    return end_offsets.withColumn(
        "segment",
        F.sum(went_down.cast("int")).over(order.rowsBetween(Window.unboundedPreceding, Window.currentRow)),
    )


def committed_at_snapshots(offset_commits: DataFrame, end_offsets: DataFrame) -> DataFrame:
    """(group, partition, snapshot) rows where the group held a committed offset, with both offsets."""
    visible = filter_invisible_offset_records(offset_commits)
    first_seen = visible.groupBy(*OFFSET_KEY).agg(F.min("record_at").alias("first_record_at"))
    probes = (
        first_seen.join(with_history_segment(end_offsets), on=list(PARTITION), how="inner")
        .where(F.col("observed_at") >= F.col("first_record_at"))
        .drop("first_record_at")
    )
    as_of = latest_at_or_before(
        probes, visible, OFFSET_KEY, "observed_at", "record_at", "offset", event_order=("source_offset",)
    )
    is_live = (
        F.col("offset").isNotNull()
        & ~F.col("offset.is_tombstone")
        & (F.col("offset.expires_at").isNull() | (F.col("offset.expires_at") > F.col("observed_at")))
    )
    return as_of.where(is_live).select(
        *OFFSET_KEY,
        "observed_at",
        "segment",
        F.col("offset.committed_offset").alias("committed_offset"),
        F.col("offset.record_at").alias("committed_at"),
        "end_offset",
    )


def _interpolation_points(committed: DataFrame, end_offsets: DataFrame) -> DataFrame:
    """Lagging rows + l and r: the end-offset points around their committed offset (same history)."""
    point = F.struct(F.col("end_offset").alias("offset"), F.col("observed_at").alias("at"))
    points = with_history_segment(end_offsets).select(
        *PARTITION, "segment", F.col("end_offset").alias("key"), F.lit(0).alias("kind"), point.alias("point")
    )
    lagging = committed.where(F.col("committed_offset") < F.col("end_offset"))
    rows = lagging.select(
        *PARTITION,
        "segment",
        F.col("committed_offset").alias("key"),
        F.lit(1).alias("kind"),
        F.lit(None).cast(points.schema["point"].dataType).alias("point"),
        F.struct(*lagging.columns).alias("row"),
    )
    stream = points.withColumn("row", F.lit(None).cast(rows.schema["row"].dataType)).unionByName(rows)
    by_offset = Window.partitionBy(*PARTITION, "segment").orderBy("key", "kind", F.col("point.at"))
    return (
        stream.withColumns(
            {
                "l": F.last("point", ignorenulls=True).over(
                    by_offset.rowsBetween(Window.unboundedPreceding, Window.currentRow)
                ),
                "r": F.first("point", ignorenulls=True).over(
                    by_offset.rowsBetween(Window.currentRow, Window.unboundedFollowing)
                ),
            }
        )
        .where(F.col("row").isNotNull())
        .select("row.*", "l", "r")
    )


def lag(offset_commits: DataFrame, end_offsets: DataFrame) -> DataFrame:
    """offset_commits (silver) + end_offsets (ops) -> gold `lag`."""
    committed = committed_at_snapshots(offset_commits, end_offsets)
    around = _interpolation_points(committed, end_offsets)
    c = F.col("committed_offset")
    share = (c + 1 - F.col("l.offset")) / (F.col("r.offset") - F.col("l.offset"))
    interpolated = _seconds(F.col("observed_at"), F.col("l.at")) - share * _seconds(F.col("r.at"), F.col("l.at"))
    has_l = F.col("l").isNotNull()
    is_snapshot_only = ~has_l & (F.col("r.at") >= F.col("observed_at"))
    lagging = around.select(
        *committed.columns,
        F.when(has_l, interpolated)
        .when(~is_snapshot_only, _seconds(F.col("observed_at"), F.col("r.at")))
        .alias("time_lag_seconds"),
        F.when(has_l, F.lit(METHOD_INTERPOLATED))
        .when(~is_snapshot_only, F.lit(METHOD_LOWER_BOUND))
        .otherwise(F.lit(METHOD_TOO_FEW_POINTS))
        .alias("time_lag_method"),
        F.when(has_l, _seconds(F.col("r.at"), F.col("l.at"))).alias("time_lag_uncertainty_seconds"),
    )
    is_ahead = c > F.col("end_offset")
    settled = committed.where(c >= F.col("end_offset")).select(
        *committed.columns,
        F.when(~is_ahead, F.lit(0.0)).alias("time_lag_seconds"),
        F.when(is_ahead, F.lit(METHOD_COMMITTED_AHEAD)).otherwise(F.lit(METHOD_CAUGHT_UP)).alias("time_lag_method"),
        F.when(~is_ahead, F.lit(0.0)).alias("time_lag_uncertainty_seconds"),
    )
    return lagging.unionByName(settled).select(
        *OFFSET_KEY,
        "observed_at",
        "committed_offset",
        "committed_at",
        "end_offset",
        offset_lag(F.col("end_offset"), c).alias("offset_lag"),
        is_ahead.alias("is_committed_ahead"),
        "time_lag_seconds",
        "time_lag_method",
        "time_lag_uncertainty_seconds",
    )


def lag_daily(lag_rows: DataFrame) -> DataFrame:
    """gold `lag` -> gold `lag_daily`: per group, topic and UTC day, over the day's snapshots."""
    per_snapshot = lag_rows.groupBy("cluster", "group_id", "topic", "observed_at").agg(
        F.sum("offset_lag").alias("offset_lag"),
        F.max("time_lag_seconds").alias("time_lag_seconds"),
        F.max(F.col("time_lag_method") == F.lit(METHOD_LOWER_BOUND)).alias("is_lower_bound"),
    )
    return per_snapshot.groupBy("cluster", "group_id", "topic", F.to_date("observed_at").alias("day")).agg(
        F.count(F.lit(1)).cast("int").alias("snapshot_count"),
        F.max("offset_lag").cast("long").alias("max_offset_lag"),
        F.percentile("offset_lag", F.lit(P95)).alias("p95_offset_lag"),
        F.max("time_lag_seconds").alias("max_time_lag_seconds"),
        F.percentile("time_lag_seconds", F.lit(P95)).alias("p95_time_lag_seconds"),
        F.max("is_lower_bound").alias("has_time_lag_lower_bound"),
    )
