"""The offset records that `lag` and `consumer_status` can see: those near an end-offset snapshot.

Both tables are evaluated only at snapshots, and each looks back a bounded way from one: `lag` at the
latest record at or before it, `consumer_status` at the last `intervals` slots (min-distance buckets of
commits) before it. A large estate commits far more often than it snapshots (every few seconds
against every few minutes), so most commits are never seen by either. `records_seen_by_snapshots`
keeps, per group partition, the records in each snapshot's own bucket (it may hold commits on both
sides of the snapshot) and in the `intervals` non-empty buckets before it, and drops the rest before
either table sorts them. It is a filter in front of their unchanged code: their rows are the
same with or without it (tests/spark/test_snapshot_horizon.py).

Why this keeps everything they can see, for a group partition without tombstones:
- `lag`: the latest record at or before a snapshot is in the snapshot's bucket or in the non-empty
  bucket before it; the group partition's first snapshot is the first after its earliest kept record.
- `consumer_status`: a slot is one bucket's commits (kept or dropped whole, so the slot's latest
  commit is unchanged); the slot a snapshot's lookup lands on and the `intervals` - 1 before it lie in
  the snapshot's bucket and the `intervals` non-empty buckets before it. Dropping later slots never
  changes which slot a lookup lands on.
A group partition with a tombstone is kept whole: its lives (commits between tombstones) follow log
order, and a ring must not reach across a dropped stretch of another life.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.offsets import OFFSET_KEY, PARTITION, filter_invisible_offset_records, is_visible

_SNAPSHOT, _RECORD = 0, 1  # a snapshot sorts before the records of its bucket when walking back in time


def records_seen_by_snapshots(
    offset_commits: DataFrame,
    end_offsets: DataFrame,
    *,
    intervals: int,
    min_distance_ms: int,
    hold: Callable[[DataFrame], DataFrame],
    facts: DataFrame | None = None,
) -> DataFrame:
    """offset_commits (silver) -> the visible records `lag` and `consumer_status` can see, with the
    columns those two read (every column more would be carried through the sort). `hold` computes a
    frame once (one row per group partition, numbered: read twice, the numbers must not change).
    `facts`: metrics_carry.group_partition_facts of offset_commits, when the caller holds them already."""
    read_columns = [*filter_invisible_offset_records(offset_commits).columns, "txn_state"]
    visible = offset_commits.where(is_visible(F.col("txn_state"))).select(*read_columns)
    if facts is None:
        first_seen = visible.groupBy(*OFFSET_KEY).agg(
            F.min("record_at").alias("first_record_at"), F.bool_or("is_tombstone").alias("is_kept_whole")
        )
    else:
        first_seen = facts.select(*OFFSET_KEY, "first_record_at", "is_kept_whole")
    return _near_snapshots(visible, first_seen, end_offsets, intervals, min_distance_ms, hold)


def _bucket(at: str, min_distance_ms: int) -> Column:
    return F.floor(F.unix_millis(at) / F.lit(min_distance_ms))


def _near_snapshots(
    records: DataFrame,
    first_seen: DataFrame,
    end_offsets: DataFrame,
    buckets_before_snapshot: int,
    min_distance_ms: int,
    hold: Callable[[DataFrame], DataFrame],
) -> DataFrame:
    """The records in each snapshot's bucket and in the `buckets_before_snapshot` non-empty buckets before
    it, of their group partition, found in one walk back in time over records and snapshots together;
    every record of a group partition with a tombstone (they pass through the walk: they are few).

    The walk sorts every record, so it is keyed by a number per group partition (not its four columns,
    two of them strings compared on every step of the sort) and ordered by (bucket, kind) alone: the
    records of one bucket all stand at the same place in it, whatever their order there.
    `first_seen`: (OFFSET_KEY, first_record_at, is_kept_whole: a tombstone among its records).
    """
    numbered = F.broadcast(hold(first_seen.withColumn("walk", F.monotonically_increasing_id())))
    snapshots = (
        numbered.join(end_offsets.select(*PARTITION, "observed_at"), on=list(PARTITION), how="inner")
        .where((F.col("observed_at") >= F.col("first_record_at")) & ~F.col("is_kept_whole"))
        .select("walk", _bucket("observed_at", min_distance_ms).alias("bucket"), F.lit(_SNAPSHOT).alias("kind"))
    )
    record = F.struct(*[name for name in records.columns if name not in OFFSET_KEY])
    stream_record_type = records.select(record.alias("record")).schema["record"].dataType
    stream = (
        records.join(numbered.select(*OFFSET_KEY, "walk", "is_kept_whole"), on=list(OFFSET_KEY), how="inner")
        .select("walk", _bucket("record_at", min_distance_ms).alias("bucket"), F.lit(_RECORD).alias("kind"),
            record.alias("record"), "is_kept_whole")
        .unionByName(
            snapshots.withColumns({"record": F.lit(None).cast(stream_record_type), "is_kept_whole": F.lit(False)})
        )
    )  # fmt: skip
    walk_order = [F.col("bucket").desc(), F.col("kind")]
    # Buckets walked back so far, counted once per bucket: snapshots count too, but a snapshot is always
    # the first row of its bucket, so between a snapshot and the records below it only record buckets add.
    buckets_walked = F.dense_rank().over(Window.partitionBy("walk").orderBy(F.col("bucket").desc()))
    is_record = F.col("kind") == F.lit(_RECORD)
    walked_at_snapshot = F.last(F.when(~is_record, F.col("buckets_walked")), ignorenulls=True).over(
        Window.partitionBy("walk").orderBy(*walk_order).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        stream
        # One sort serves both windows: the second one's order extends the first one's.
        .repartition("walk")
        .sortWithinPartitions("walk", *walk_order)
        .withColumn("buckets_walked", buckets_walked)
        .withColumn("walked_at_snapshot", walked_at_snapshot)
        .where(
            is_record
            & (
                F.col("is_kept_whole")
                | (F.col("buckets_walked") - F.col("walked_at_snapshot") <= F.lit(buckets_before_snapshot))
            )
        )
        .select("walk", "record.*")
        .join(numbered.select("walk", *OFFSET_KEY), on="walk", how="inner")
        .select(*records.columns)
    )
