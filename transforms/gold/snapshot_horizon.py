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

A night's records are hardly fewer than their buckets, so the kept buckets are found without sorting
the records (which at 50M records spilled 5 GB): see `_near_snapshots`.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.carry_cuts import WORD_BUCKETS, with_nth_set_bit
from transforms.gold.offsets import OFFSET_KEY, PARTITION, filter_invisible_offset_records, is_visible

_WORD, _SNAPSHOT = 0, 1  # at one place in time a word comes first: its buckets rank before what follows
_WORD_SHIFT = WORD_BUCKETS.bit_length() - 1
_UNTIMED_BUCKET = -(1 << 60)
# Kept words broadcast to the pass over the records up to this many (rows of three longs); beyond, shuffled.
_BROADCAST_MASKS = 4_000_000


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
    columns those two read (every column more would be carried to them). `hold` computes a frame once
    (the group partitions numbered, read more than once: the numbers must not change; the few rows found
    from them).
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
    # An untimed record stands below every timed one, as it sorted last walking back in time.
    return F.coalesce(F.floor(F.unix_millis(at) / F.lit(min_distance_ms)), F.lit(_UNTIMED_BUCKET))


def _near_snapshots(
    records: DataFrame,
    first_seen: DataFrame,
    end_offsets: DataFrame,
    buckets_before_snapshot: int,
    min_distance_ms: int,
    hold: Callable[[DataFrame], DataFrame],
) -> DataFrame:
    """The records in each snapshot's bucket and in the `buckets_before_snapshot` non-empty buckets before
    it, of their group partition; every record of a group partition with a tombstone.

    No pass sorts the records: one hash aggregation makes each group partition's non-empty buckets
    bitmaps of 64 (a few rows per minute of commits), the kept buckets are found among those rows and the
    snapshots, and a second pass keeps the records whose bucket's bit is set. Group partitions are keyed by
    a number (`walk`), not their four columns. `first_seen`: (OFFSET_KEY, first_record_at, is_kept_whole).
    """
    numbered = F.broadcast(hold(first_seen.withColumn("walk", F.monotonically_increasing_id())))
    walked = (
        records.join(numbered.select(*OFFSET_KEY, "walk", "is_kept_whole"), on=list(OFFSET_KEY), how="inner")
        .withColumn("_bucket", _bucket("record_at", min_distance_ms))
        .withColumns({"word": F.shiftright("_bucket", _WORD_SHIFT), "bit": _bit("_bucket")})
    )
    words = (
        walked.where(~F.col("is_kept_whole"))
        .groupBy("walk", "word")
        .agg(F.expr("bit_or(shiftleft(CAST(1 AS BIGINT), bit))").alias("bits"))
    )
    snapshots = (
        numbered.join(end_offsets.select(*PARTITION, "observed_at"), on=list(PARTITION), how="inner")
        .where((F.col("observed_at") >= F.col("first_record_at")) & ~F.col("is_kept_whole"))
        .select("walk", _bucket("observed_at", min_distance_ms).alias("_bucket"))
        .select("walk", F.shiftright("_bucket", _WORD_SHIFT).alias("word"), _bit("_bucket").alias("bit"))
    )
    ranked = hold(_ranked(words, snapshots))
    masks = hold(_kept_masks(ranked, buckets_before_snapshot))
    if masks.count() <= _BROADCAST_MASKS:
        masks = F.broadcast(masks)
    return (
        walked.join(masks, on=["walk", "word"], how="left")
        .where(F.col("is_kept_whole") | (F.expr("shiftrightunsigned(kept_bits, bit) & 1") == F.lit(1)))
        .select(*records.columns)
    )


def _bit(bucket: str) -> Column:
    return (F.col(bucket).bitwiseAND(F.lit(WORD_BUCKETS - 1))).cast("int")


def _ranked(words: DataFrame, snapshots: DataFrame) -> DataFrame:
    """Words and snapshots of each group partition in time order, with the rank (from 1, earliest first)
    of the non-empty buckets: a word's first (first_rank), and for a snapshot the last before its bucket
    (below) and whether its own bucket holds records (has_own)."""
    stream = words.select("walk", "word", F.lit(_WORD).alias("kind"), "bits", F.lit(None).cast("int").alias("bit"))
    stream = stream.unionByName(snapshots.select("walk", "word", F.lit(_SNAPSHOT).alias("kind"),
        F.lit(None).cast("long").alias("bits"), "bit"))  # fmt: skip
    so_far = Window.partitionBy("walk").orderBy("word", "kind").rowsBetween(Window.unboundedPreceding, 0)
    stream = stream.withColumns(
        {
            "_through": F.coalesce(F.sum(F.bit_count("bits")).over(so_far), F.lit(0)),
            "_word_bits": F.last(F.when(F.col("kind") == F.lit(_WORD), F.col("bits")), ignorenulls=True).over(so_far),
            "_last_word": F.last(F.when(F.col("kind") == F.lit(_WORD), F.col("word")), ignorenulls=True).over(so_far),
        }
    )
    in_own_word = F.coalesce(F.col("_last_word") == F.col("word"), F.lit(False))
    own_and_later = F.when(in_own_word, F.bit_count(F.expr("shiftrightunsigned(_word_bits, bit)"))).otherwise(0)
    return stream.select(
        "walk", "word", "kind", "bits",
        (F.col("_through") - F.bit_count("bits") + 1).alias("first_rank"),
        (F.col("_through") - own_and_later).alias("below"),
        (in_own_word & (F.expr("shiftrightunsigned(_word_bits, bit) & 1") == F.lit(1))).alias("has_own"),
    )  # fmt: skip


def _kept_masks(ranked: DataFrame, buckets_before_snapshot: int) -> DataFrame:
    """(walk, word, kept_bits): the buckets each word keeps. A snapshot keeps its own bucket's rank and the
    `buckets_before_snapshot` ranks below it; each rank is placed in the word it falls in (the last word
    starting at or before it) and at its bit there."""
    top = F.col("below") + F.col("has_own").cast("long")
    lowest = F.greatest(F.lit(1).cast("long"), F.col("below") - F.lit(buckets_before_snapshot - 1))
    kept_ranks = ranked.where((F.col("kind") == F.lit(_SNAPSHOT)) & (top >= 1)).select(
        "walk", F.explode(F.sequence(lowest, top)).alias("rank"), F.lit(_SNAPSHOT).alias("kind"),
        F.lit(None).cast("long").alias("word"), F.lit(None).cast("long").alias("bits"),
    )  # fmt: skip
    word_starts = ranked.where(F.col("kind") == F.lit(_WORD)).select(
        "walk", F.col("first_rank").alias("rank"), F.lit(_WORD).alias("kind"), "word", "bits"
    )
    so_far = Window.partitionBy("walk").orderBy("rank", "kind").rowsBetween(Window.unboundedPreceding, 0)
    placed = word_starts.unionByName(kept_ranks).withColumns(
        {
            "_in_word": F.last("word", ignorenulls=True).over(so_far),
            "_in_bits": F.last("bits", ignorenulls=True).over(so_far),
            "_from": F.last(F.when(F.col("kind") == F.lit(_WORD), F.col("rank")), ignorenulls=True).over(so_far),
        }
    )
    kept_places = with_nth_set_bit(
        placed.where(F.col("kind") == F.lit(_SNAPSHOT)), "_in_bits", F.col("rank") - F.col("_from") + 1, "bit"
    )
    return kept_places.groupBy("walk", F.col("_in_word").alias("word")).agg(
        F.expr("bit_or(shiftleft(CAST(1 AS BIGINT), bit))").alias("kept_bits")
    )
