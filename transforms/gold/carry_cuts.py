"""The cut of metrics_carry.carry_tails, found without sorting a night's records: per group partition
(OFFSET_KEY) facts by hash aggregation, then its counted buckets as bitmaps, 64 buckets a row, by another
(snapshot_horizon walks the same bitmaps).

A night's records are hardly fewer than their min-distance buckets (a commit a second), so any sort of
them, or a struct's minimum or maximum of them (which Spark aggregates by sorting), costs as much as the
night; so does every pass over them (reading the held records back). Each of the two passes here is a
hash aggregation beside a broadcast row per group partition; only their few output rows are ranked.
"""

from __future__ import annotations

import functools
import operator

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from schemas.metrics_carry import LOG_POSITION
from transforms.gold.offsets import OFFSET_KEY

# Buckets per word of the bitmaps (a long's bits): a bucket's word is bucket >> WORD_SHIFT.
WORD_BUCKETS = 64
WORD_SHIFT = WORD_BUCKETS.bit_length() - 1


def group_partition_lives(visible: DataFrame) -> DataFrame:
    """Visible records with _bucket -> per group partition: last_position, _first_tombstone_position and
    _first_tombstone_bucket (which records count towards the cut). Also what the other passes over a night's
    records would each aggregate again (a pass over tens of millions of records costs as much as its
    aggregation): first_record_at (the earliest record time, untimed records aside), has_untimed_record
    and is_kept_whole (a tombstone among them: snapshot_horizon keeps such group partitions whole).
    Each group partition is numbered (`walk`), the key of its bucket_words: hold the result.

    Aggregated by source partition first (first_tombstone_offsets).
    """
    by_source_partition = visible.groupBy(*OFFSET_KEY, "source_partition").agg(
        F.max("source_offset").alias("_last_offset"),
        *first_tombstone_offsets(),
        F.min(F.when(F.col("is_tombstone"), F.col("_bucket"))).alias("_first_tombstone_bucket"),
        F.min("record_at").alias("first_record_at"),
        F.max(F.col("record_at").isNull()).alias("has_untimed_record"),
    )
    lives = by_source_partition.groupBy(*OFFSET_KEY).agg(
        F.max(F.struct("source_partition", F.col("_last_offset").alias("source_offset")))
        .cast(LOG_POSITION)
        .alias("last_position"),
        first_tombstone_position().alias("_first_tombstone_position"),
        F.min("_first_tombstone_bucket").alias("_first_tombstone_bucket"),
        F.min("first_record_at").alias("first_record_at"),
        F.max("has_untimed_record").alias("has_untimed_record"),
    )
    return lives.withColumns(
        {"is_kept_whole": F.col("_first_tombstone_position").isNotNull(), "walk": F.monotonically_increasing_id()}
    )


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


def bucket_words(rows: DataFrame) -> DataFrame:
    """Rows with walk (a group partition's number) and _bucket -> (walk, _word, _bits): per word of
    WORD_BUCKETS buckets, a bitmap of the buckets the rows are in. One hash aggregation: a night's
    records become a few rows per minute."""
    place = F.col("_bucket").bitwiseAND(WORD_BUCKETS - 1).cast("int")
    return rows.groupBy("walk", F.shiftright("_bucket", WORD_SHIFT).alias("_word")).agg(
        F.bit_or(F.call_function("shiftleft", F.lit(1).cast("long"), place)).alias("_bits")
    )


def cuts(words: DataFrame, kept: int) -> DataFrame:
    """bucket_words of each group partition's counted records -> (walk, _first_bucket: the earliest of the
    last `kept` distinct counted buckets, or of all when there are fewer; _holds_every_bucket: there
    are no more than `kept`): the words ranked from the latest back and the cut's bucket read from the
    bits of the word it falls in."""
    later_first = Window.partitionBy("walk").orderBy(F.col("_word").desc())
    counted_words = words.withColumn("_count", F.bit_count("_bits")).withColumns(
        {
            "_after": F.coalesce(
                F.sum("_count").over(later_first.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)
            ),
            "_total": F.sum("_count").over(Window.partitionBy("walk")),
        }
    )
    target = F.least(F.lit(kept), F.col("_total"))
    in_word = counted_words.where((F.col("_after") < target) & (target <= F.col("_after") + F.col("_count")))
    # The word's buckets from its latest down: the cut is the (target - _after)-th of them.
    from_lowest = F.col("_count") - (target - F.col("_after")) + 1
    return with_nth_set_bit(in_word, "_bits", from_lowest, "_place").select(
        "walk",
        (F.col("_word") * F.lit(WORD_BUCKETS) + F.col("_place")).cast("long").alias("_first_bucket"),
        (F.col("_total") <= F.lit(kept)).alias("_holds_every_bucket"),
    )


def with_nth_set_bit(rows: DataFrame, bits: str, nth: Column, name: str) -> DataFrame:
    """`rows` with `name`: the place (0 to 63) of the `nth` lowest set bit (from 1) of the long `bits`,
    found by halving the word six times. (A lambda over the 64 places, Spark's way to pick from a list,
    took 13 task-s over 731 thousand rows: it is evaluated row by row, outside generated code.)"""
    rows = rows.withColumns({name: F.lit(0), "_nth": nth})
    for width in (32, 16, 8, 4, 2, 1):
        lower = F.bit_count(
            F.call_function("shiftrightunsigned", F.col(bits), F.col(name)).bitwiseAND((1 << width) - 1)
        )
        rows = rows.withColumn("_lower", lower).withColumns(
            {
                name: F.when(F.col("_nth") > F.col("_lower"), F.col(name) + width).otherwise(F.col(name)),
                "_nth": F.when(F.col("_nth") > F.col("_lower"), F.col("_nth") - F.col("_lower")).otherwise(
                    F.col("_nth")
                ),
            }
        )
    return rows.drop("_nth", "_lower")
