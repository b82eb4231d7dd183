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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.offsets import OFFSET_KEY, PARTITION, filter_invisible_offset_records, is_visible

_SNAPSHOT, _RECORD = 0, 1  # a snapshot sorts before the records of its bucket when walking back in time


def records_seen_by_snapshots(
    offset_commits: DataFrame, end_offsets: DataFrame, *, intervals: int, min_distance_ms: int
) -> DataFrame:
    """offset_commits (silver) -> the visible records `lag` and `consumer_status` can see, with the
    columns those two read (every column more would be carried through the sort)."""
    read_columns = [*filter_invisible_offset_records(offset_commits).columns, "txn_state"]
    visible = offset_commits.where(is_visible(F.col("txn_state"))).select(*read_columns)
    tombstoned = F.broadcast(visible.where(F.col("is_tombstone")).select(*OFFSET_KEY).distinct())
    whole = visible.join(tombstoned, on=list(OFFSET_KEY), how="left_semi")
    plain = visible.join(tombstoned, on=list(OFFSET_KEY), how="left_anti")
    return _near_snapshots(plain, end_offsets, intervals, min_distance_ms).unionByName(whole)


def _bucket(at: str, min_distance_ms: int) -> Column:
    return F.floor(F.unix_millis(at) / F.lit(min_distance_ms))


def _near_snapshots(
    records: DataFrame, end_offsets: DataFrame, buckets_before_snapshot: int, min_distance_ms: int
) -> DataFrame:
    """The records in each snapshot's bucket and in the `buckets_before_snapshot` non-empty buckets before
    it, of their group partition, found in one walk back in time over records and snapshots together."""
    first_seen = records.groupBy(*OFFSET_KEY).agg(F.min("record_at").alias("first_record_at"))
    snapshots = (
        first_seen.join(end_offsets.select(*PARTITION, "observed_at"), on=list(PARTITION), how="inner")
        .where(F.col("observed_at") >= F.col("first_record_at"))
        .select(*OFFSET_KEY, F.col("observed_at").alias("at"), F.lit(_SNAPSHOT).alias("kind"))
    )
    record = F.struct(*[name for name in records.columns if name not in OFFSET_KEY])
    stream_record_type = records.select(record.alias("record")).schema["record"].dataType
    stream = records.select(
        *OFFSET_KEY, F.col("record_at").alias("at"), F.lit(_RECORD).alias("kind"), record.alias("record")
    ).unionByName(snapshots.withColumn("record", F.lit(None).cast(stream_record_type)))
    walk_order = [
        F.col("bucket").desc(),
        F.col("kind"),
        F.col("at").desc(),
        F.col("record.source_partition").desc(),
        F.col("record.source_offset").desc(),
    ]
    # Buckets walked back so far, counted once per bucket: snapshots count too, but a snapshot is always
    # the first row of its bucket, so between a snapshot and the records below it only record buckets add.
    buckets_walked = F.dense_rank().over(Window.partitionBy(*OFFSET_KEY).orderBy(F.col("bucket").desc()))
    is_record = F.col("kind") == F.lit(_RECORD)
    walked_at_snapshot = F.last(F.when(~is_record, F.col("buckets_walked")), ignorenulls=True).over(
        Window.partitionBy(*OFFSET_KEY).orderBy(*walk_order).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        stream.withColumn("bucket", _bucket("at", min_distance_ms))
        # One sort serves both windows: the second one's order extends the first one's.
        .repartition(*OFFSET_KEY)
        .sortWithinPartitions(*OFFSET_KEY, *walk_order)
        .withColumn("buckets_walked", buckets_walked)
        .withColumn("walked_at_snapshot", walked_at_snapshot)
        .where(is_record & (F.col("buckets_walked") - F.col("walked_at_snapshot") <= F.lit(buckets_before_snapshot)))
        .select(*OFFSET_KEY, "record.*")
    )
