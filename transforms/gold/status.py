"""Burrow's consumer status, evaluated in batch at every end-offset snapshot, and its group roll-up.

Grain of `consumer_status`: one (group, partition) at one snapshot where the group held a committed
offset (the rows of `lag`). Burrow keeps, per partition, a window of the last `intervals` commits
(`Order` = log position) and judges it at evaluation time "now":

    if current_lag > allowed_lag:
        STOP    if now - last.ts > last.ts - first.ts, and no recent end offset <= last.offset
        REWIND  if the first offset lower than its predecessor is never caught up later in the window
        if no commit in the window had lag <= allowed_lag (rule 1 gates only these two):
            STALL   if every offset in the window is the same
            WARN    if the lag never decreases
    OK otherwise (and when the window is less than `minimum_complete` full)

with the fixes Burrow's users needed:
- current_lag is the lag at evaluation time (end offset at the snapshot - committed offset), not the
  lag frozen when the last commit arrived (#287); a caught-up idle partition is never STOP (#38, #123,
  #128, #140): current_lag must exceed allowed_lag and the recent end offsets must not have reached the
  last committed offset;
- rule 1 ("some lag was zero -> OK") gates only STALL and WARN, never STOP or REWIND (#290, PR #292);
- min-distance: commits less than `min_distance_ms` apart share a slot (fixed buckets of that width);
  a slot keeps the latest commit's offset *and time*, so merging never makes the last commit look
  older than it is (#171, false STOP);
- STALL and WARN need at least two slots (two commits, two lags): one point shows no trend.
A commit's own lag (for rule 1 and WARN) is the latest end offset at or before it minus its offset;
null when no end offset was known yet (Burrow drops such commits; here they count as unknown).
A tombstone empties the window: commits after it start a new one. A snapshot taken inside a slot's
bucket (min_distance wide) sees the window as of the slot before.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.offsets import OFFSET_KEY, PARTITION, filter_invisible_offset_records
from transforms.gold.timeline import latest_at_or_before

OK, WARN, STOP, STALL, REWIND, ERR = "OK", "WARN", "STOP", "STALL", "REWIND", "ERR"
SEVERITY = {OK: 0, WARN: 1, ERR: 2}


def _slots(offset_commits: DataFrame, end_offsets: DataFrame, min_distance_ms: int) -> DataFrame:
    """One row per window slot: (partition, life, slot) with offset, ts, order and the lag at commit time."""
    records = _with_life(filter_invisible_offset_records(offset_commits))
    latest = F.struct(
        F.col("source_partition"),
        F.col("source_offset").alias("order"),
        F.col("committed_offset").alias("offset"),
        F.col("record_at").alias("ts"),
    )
    slots = (
        records.where(~F.col("is_tombstone"))
        .groupBy(*OFFSET_KEY, "life", F.floor(F.unix_millis("record_at") / F.lit(min_distance_ms)).alias("slot"))
        .agg(F.max_by(latest, F.struct("source_partition", "source_offset")).alias("s"))
        .select(*OFFSET_KEY, "life", "s.order", "s.offset", "s.ts")
    )
    known = latest_at_or_before(slots, end_offsets, PARTITION, "ts", "observed_at", "leo")
    # Slots between the same two snapshots of the partition share a span; one exactly at a snapshot has its own.
    snapshot_span = F.struct(
        F.col("leo.observed_at").alias("after"), (F.col("leo.observed_at") == F.col("ts")).alias("is_at")
    )
    return known.select(
        *OFFSET_KEY,
        "life",
        "order",
        "offset",
        "ts",
        F.greatest(F.col("leo.end_offset") - F.col("offset"), F.lit(0)).alias("lag"),
        snapshot_span.alias("snapshot_span"),
    )


def _with_life(records: DataFrame) -> DataFrame:
    """records + `life`: how many tombstones of its partition came before (or at) each record.

    Counted by a running window only for the partitions that have a tombstone: over all commits that
    window holds each partition's whole history at once, which ran a 1 GiB heap out at 50M records.
    """
    tombstoned = records.where(F.col("is_tombstone")).select(*OFFSET_KEY).distinct()
    life = F.sum(F.col("is_tombstone").cast("int")).over(
        Window.partitionBy(*OFFSET_KEY)
        .orderBy("source_partition", "source_offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    counted = records.join(tombstoned, on=list(OFFSET_KEY), how="left_semi").withColumn("life", life)
    untouched = records.join(tombstoned, on=list(OFFSET_KEY), how="left_anti").withColumn("life", F.lit(0).cast("long"))
    return counted.unionByName(untouched)


def _windows_before_snapshots(slots: DataFrame, intervals: int) -> DataFrame:
    """The slots a snapshot can see last (the last slot of each snapshot span), each + `ring`: the
    window of the last `intervals` slots ending at it, oldest first.

    A snapshot's as-of lookup lands on the latest slot at or before it, which is always the last of its
    span; the other slots only fill rings. Rings come from offset window functions and are built after
    the filter: a sliding collect_list over every slot cost most of this table's time.
    """
    order = Window.partitionBy(*OFFSET_KEY, "life").orderBy("ts", "order")
    element = F.struct("offset", "ts", "lag")
    earlier = {f"_slot_{back}": F.lag(element, back).over(order) for back in range(intervals - 1, 0, -1)}
    is_last_of_span = ~F.lead("snapshot_span").over(order).eqNullSafe(F.col("snapshot_span"))
    ring = F.filter(F.array(*[F.col(name) for name in earlier], element), lambda slot: slot.isNotNull())
    return (
        slots.withColumns({**earlier, "_is_last_of_span": is_last_of_span})
        .where(F.col("_is_last_of_span"))
        .select(*OFFSET_KEY, "ts", "order", ring.alias("ring"))
    )


def _recent_end_offsets(end_offsets: DataFrame, intervals: int) -> DataFrame:
    order = Window.partitionBy(*PARTITION).orderBy("observed_at")
    return end_offsets.select(
        *PARTITION,
        "observed_at",
        F.collect_list("end_offset").over(order.rowsBetween(-(intervals - 1), Window.currentRow)).alias("leo_ring"),
    )


def _pairs(values: Column) -> Column:
    """[a, b, c] -> [(a, b), (b, c)]: consecutive pairs (empty for fewer than two values)."""
    n = F.size(values)
    return F.arrays_zip(F.slice(values, 1, n - 1).alias("a"), F.slice(values, 2, n - 1).alias("b"))


def _is_rewind(offsets: Column) -> Column:
    """The first offset below its predecessor is never followed by one reaching that predecessor."""
    drops = F.transform(offsets, lambda x, i: (i >= 1) & (x < F.element_at(offsets, F.greatest(i, F.lit(1)))))
    first = F.array_position(drops, True)  # 1-based position of offsets[r]; offsets[r - 1] is at first - 1
    before_drop = F.try_element_at(offsets, F.greatest(first - 1, F.lit(1)).cast("int"))
    recovered = F.exists(
        F.transform(offsets, lambda x, i: (i >= first - 1) & (x >= before_drop)),
        lambda reached: reached,
    )
    return (first > 0) & ~recovered


def evaluate(
    ring: Column,
    leo_ring: Column,
    current_lag: Column,
    now: Column,
    intervals: int,
    allowed_lag: int,
    minimum_complete: float,
) -> Column:
    """Burrow's partition status (see the module docstring) from the window and the recent end offsets."""
    n = F.size(ring)
    first, last = F.try_element_at(ring, F.lit(1)), F.try_element_at(ring, F.lit(-1))
    offsets = F.transform(ring, lambda s: s["offset"])
    lags = F.filter(F.transform(ring, lambda s: s["lag"]), lambda x: x.isNotNull())
    silent_s = F.unix_micros(now) - F.unix_micros(last["ts"])
    span_s = F.unix_micros(last["ts"]) - F.unix_micros(first["ts"])
    caught_up_recently = F.exists(leo_ring, lambda leo: leo <= last["offset"])
    never_ok = F.forall(ring, lambda s: s["lag"].isNull() | (s["lag"] > F.lit(allowed_lag)))
    is_stalled = (n >= 2) & F.forall(_pairs(offsets), lambda p: p["b"] == p["a"])
    never_decreasing = (F.size(lags) >= 2) & F.forall(_pairs(lags), lambda p: p["b"] >= p["a"])
    return (
        F.when((n == 0) | (n / F.lit(intervals) < F.lit(minimum_complete)), F.lit(OK))
        .when(current_lag <= F.lit(allowed_lag), F.lit(OK))
        .when((silent_s > span_s) & ~F.coalesce(caught_up_recently, F.lit(False)), F.lit(STOP))
        .when(_is_rewind(offsets), F.lit(REWIND))
        .when(never_ok & is_stalled, F.lit(STALL))
        .when(never_ok & never_decreasing, F.lit(WARN))
        .otherwise(F.lit(OK))
    )


def consumer_status(
    lag_rows: DataFrame,
    offset_commits: DataFrame,
    end_offsets: DataFrame,
    *,
    intervals: int,
    min_distance_ms: int,
    allowed_lag: int,
    minimum_complete: float,
) -> DataFrame:
    """gold `lag` + offset_commits + end_offsets -> gold `consumer_status`."""
    windows = _windows_before_snapshots(_slots(offset_commits, end_offsets, min_distance_ms), intervals)
    evaluated = latest_at_or_before(
        lag_rows.select(*OFFSET_KEY, "observed_at", "committed_offset", "committed_at", "offset_lag"),
        windows,
        OFFSET_KEY,
        "observed_at",
        "ts",
        "window",
        event_order=("order",),
    ).join(_recent_end_offsets(end_offsets, intervals), on=[*PARTITION, "observed_at"], how="left")
    ring = F.coalesce(F.col("window.ring"), F.array())
    status = evaluate(
        ring, F.col("leo_ring"), F.col("offset_lag"), F.col("observed_at"), intervals, allowed_lag, minimum_complete
    )
    return evaluated.select(
        *OFFSET_KEY,
        F.col("observed_at").alias("evaluated_at"),
        status.alias("status"),
        F.col("offset_lag").alias("current_lag"),
        F.size(ring).alias("window_slot_count"),
        (F.size(ring) >= F.lit(intervals)).alias("is_window_complete"),
        F.col("committed_offset").alias("last_committed_offset"),
        F.col("committed_at").alias("last_commit_at"),
    )


def group_status(partition_status: DataFrame, window_minutes: int) -> DataFrame:
    """gold `consumer_status` -> gold `group_status`: at the end of each window, from each partition's
    latest evaluation in it. OK < WARN < ERR (STOP, STALL and REWIND are ERR)."""
    seconds = window_minutes * 60
    window_end = F.timestamp_seconds((F.floor(F.unix_seconds("evaluated_at") / seconds) + 1) * seconds)
    latest = Window.partitionBy(*OFFSET_KEY, "window_end").orderBy(F.col("evaluated_at").desc())
    is_error = F.col("status").isin(STOP, STALL, REWIND)
    severity = F.when(is_error, F.lit(SEVERITY[ERR])).when(F.col("status") == F.lit(WARN), 1).otherwise(0)
    level = F.max(severity)
    return (
        partition_status.withColumn("window_end", window_end)
        .withColumn("rank", F.row_number().over(latest))
        .where(F.col("rank") == 1)
        .groupBy("cluster", "group_id", "window_end")
        .agg(
            F.when(level == SEVERITY[ERR], F.lit(ERR))
            .when(level == SEVERITY[WARN], F.lit(WARN))
            .otherwise(F.lit(OK))
            .alias("status"),
            F.count(F.lit(1)).cast("int").alias("partition_count"),
            F.sum(is_error.cast("int")).cast("int").alias("error_partition_count"),
            F.avg(F.col("is_window_complete").cast("double")).alias("complete"),
            F.sum("current_lag").cast("long").alias("total_lag"),
            F.max("current_lag").cast("long").alias("max_lag"),
            F.max_by(F.struct("topic", "partition"), F.col("current_lag")).alias("worst"),
        )
        .select(
            "cluster",
            "group_id",
            F.col("window_end").alias("evaluated_at"),
            "status",
            "partition_count",
            "error_partition_count",
            "complete",
            "total_lag",
            "max_lag",
            F.col("worst.topic").alias("max_lag_topic"),
            F.col("worst.partition").alias("max_lag_partition"),
        )
    )
