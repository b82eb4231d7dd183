"""The cut of metrics_carry.carry_tails, found without sorting a night's records: per group partition
(OFFSET_KEY) facts by hash aggregation, and the last buckets ranked only near the end of each.

A night's records are hardly fewer than their min-distance buckets (a commit a second), so any sort of
them, or a struct's minimum or maximum of them (which Spark aggregates by sorting), costs as much as the
night. Each pass here is a hash aggregation or a filter beside a broadcast row per group partition.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from schemas.metrics_carry import LOG_POSITION
from transforms.gold.offsets import OFFSET_KEY

# How far back from a group partition's last counted bucket its cut is looked for first: a group that
# commits every few minutes has its last `intervals` + 1 buckets well within it, so only the rest (a
# group that commits rarely) needs all its buckets ranked.
CUT_SEARCH_MS = 3_600_000


def group_partition_lives(visible: DataFrame) -> DataFrame:
    """Visible records with _bucket -> per group partition: last_position, _first_tombstone_position,
    _first_tombstone_bucket, _earliest_bucket, and _last_counted_bucket: the latest bucket a counted
    record can be in (before the earliest tombstone's). Also what the other passes over a night's
    records would each aggregate again (a pass over tens of millions of records costs as much as its
    aggregation): first_record_at (the earliest record time, untimed records aside), has_untimed_record
    and is_kept_whole (a tombstone among them: snapshot_horizon keeps such group partitions whole).

    Aggregated by source partition first (first_tombstone_offsets).
    """
    by_source_partition = visible.groupBy(*OFFSET_KEY, "source_partition").agg(
        F.max("source_offset").alias("_last_offset"),
        *first_tombstone_offsets(),
        F.min(F.when(F.col("is_tombstone"), F.col("_bucket"))).alias("_first_tombstone_bucket"),
        F.max("_bucket").alias("_last_bucket"),
        F.min("_bucket").alias("_earliest_bucket"),
        F.min("record_at").alias("first_record_at"),
        F.max(F.col("record_at").isNull()).alias("has_untimed_record"),
    )
    lives = by_source_partition.groupBy(*OFFSET_KEY).agg(
        F.max(F.struct("source_partition", F.col("_last_offset").alias("source_offset")))
        .cast(LOG_POSITION)
        .alias("last_position"),
        first_tombstone_position().alias("_first_tombstone_position"),
        F.min("_first_tombstone_bucket").alias("_first_tombstone_bucket"),
        F.max("_last_bucket").alias("_last_bucket"),
        F.min("_earliest_bucket").alias("_earliest_bucket"),
        F.min("first_record_at").alias("first_record_at"),
        F.max("has_untimed_record").alias("has_untimed_record"),
    )
    last_counted = F.coalesce(F.col("_first_tombstone_bucket") - F.lit(1), F.col("_last_bucket"))
    return lives.withColumns(
        {
            "_last_counted_bucket": last_counted,
            "is_kept_whole": F.col("_first_tombstone_position").isNotNull(),
        }
    ).drop("_last_bucket")


def first_tombstone_offsets() -> list[Column]:
    """Aggregations by group partition and source partition (nearly always one per group partition) that
    first_tombstone_position takes the minimum of: a minimum or maximum of a struct makes Spark
    aggregate by sorting, so it is taken of these few rows, not of the records."""
    tombstone = F.col("is_tombstone")
    return [
        F.max(tombstone).alias("_has_tombstone"),
        # In the log's order a null offset comes first: such a tombstone is its partition's first.
        F.max(tombstone & F.col("source_offset").isNull()).alias("_has_tombstone_without_offset"),
        F.min(F.when(tombstone, F.col("source_offset"))).alias("_first_tombstone_offset"),
    ]


def first_tombstone_position() -> Column:
    offset = F.when(~F.col("_has_tombstone_without_offset"), F.col("_first_tombstone_offset"))
    first = F.when(F.col("_has_tombstone"), F.struct("source_partition", offset.alias("source_offset")))
    return F.min(first).cast(LOG_POSITION)


def beside(rows: DataFrame, per_key: DataFrame, how: str = "inner") -> DataFrame:
    """`rows` joined with one row per group partition (a topic may be null: null-safe), broadcast but to
    a left join: the group partitions of a night, never its records."""
    renamed = per_key.withColumnsRenamed({name: f"_key_{name}" for name in OFFSET_KEY})
    same_key = functools.reduce(operator.and_, [F.col(name).eqNullSafe(F.col(f"_key_{name}")) for name in OFFSET_KEY])
    other = renamed if how == "left" else F.broadcast(renamed)
    return rows.join(other, on=same_key, how=how).drop(*[f"_key_{name}" for name in OFFSET_KEY])


def cuts(
    counted: DataFrame, lives: DataFrame, kept: int, search_buckets: int, hold: Callable[[DataFrame], DataFrame]
) -> DataFrame:
    """(OFFSET_KEY, _bucket, _last_counted_bucket) of each counted record + group_partition_lives -> (OFFSET_KEY,
    _first_bucket: the earliest of the last `kept` distinct counted buckets, _holds_every_bucket: there
    are no more than `kept`).

    First among the buckets within `search_buckets` before the last a counted record can be in: exact
    when `kept` counted ones lie there (every counted bucket there is later than any before), or when
    the group partition's every bucket does; the others are ranked again from all their counted buckets."""
    near = counted.where(F.col("_bucket") > F.col("_last_counted_bucket") - F.lit(search_buckets))
    found = _last_buckets(near, kept)
    within_reach = F.col("_earliest_bucket") > F.col("_last_counted_bucket") - F.lit(search_buckets)
    count = F.coalesce(F.col("_bucket_count"), F.lit(0))
    searched = hold(
        beside(lives, found, how="left").select(
            *OFFSET_KEY,
            "_first_bucket",
            (within_reach | (count >= F.lit(kept))).alias("_is_found"),
            (within_reach & (count <= F.lit(kept))).alias("_holds_every_bucket"),
        )
    )
    again = _last_buckets(beside(counted, searched.where(~F.col("_is_found")).select(*OFFSET_KEY)), kept)
    return (
        searched.where("_is_found")
        .drop("_is_found")
        .unionByName(
            again.select(
                *OFFSET_KEY, "_first_bucket", (F.col("_bucket_count") <= F.lit(kept)).alias("_holds_every_bucket")
            )
        )
    )


def _last_buckets(counted: DataFrame, kept: int) -> DataFrame:
    """Records' (OFFSET_KEY, _bucket) -> (OFFSET_KEY, _first_bucket: the earliest of the last `kept`
    distinct buckets, _bucket_count: how many distinct buckets)."""
    buckets = counted.select(*OFFSET_KEY, "_bucket").distinct()
    back = F.row_number().over(Window.partitionBy(*OFFSET_KEY).orderBy(F.col("_bucket").desc()))
    return (
        buckets.withColumn("_back", back)
        .groupBy(*OFFSET_KEY)
        .agg(
            F.min(F.when(F.col("_back") <= F.lit(kept), F.col("_bucket"))).alias("_first_bucket"),
            F.count(F.lit(1)).alias("_bucket_count"),
        )
    )
