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

from transforms.gold.carry_cuts import WORD_BUCKETS, WORD_SHIFT, bucket_words, with_nth_set_bit
from transforms.gold.metrics_carry import bucket_of
from transforms.gold.offsets import OFFSET_KEY, PARTITION, filter_invisible_offset_records, is_visible

_WORD, _SNAPSHOT = 0, 1  # at one place in time a word comes first: its buckets rank before what follows
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
    words: DataFrame | None = None,
) -> DataFrame:
    """offset_commits (silver) -> the visible records `lag` and `consumer_status` can see, with the
    columns those two read (every column more would be carried to them). `hold` computes a frame once
    (the group partitions numbered, read more than once: the numbers must not change; the few rows found
    from them). `facts` and `words`: metrics_carry.group_partition_facts and group_partition_words of
    offset_commits (the words only with the facts they are keyed by), when the caller holds them."""
    read_columns = [*filter_invisible_offset_records(offset_commits).columns, "txn_state"]
    visible = offset_commits.where(is_visible(F.col("txn_state"))).select(*read_columns)
    if facts is None:
        first_seen = visible.groupBy(*OFFSET_KEY).agg(
            F.min("record_at").alias("first_record_at"), F.bool_or("is_tombstone").alias("is_kept_whole")
        )
        numbered = hold(first_seen.withColumn("walk", F.monotonically_increasing_id()))
    else:
        numbered = facts.select(*OFFSET_KEY, "first_record_at", "is_kept_whole", "walk")
    return _near_snapshots(visible, F.broadcast(numbered), end_offsets, intervals, min_distance_ms, hold, words)


def _near_snapshots(
    records: DataFrame,
    numbered: DataFrame,
    end_offsets: DataFrame,
    buckets_before_snapshot: int,
    min_distance_ms: int,
    hold: Callable[[DataFrame], DataFrame],
    words: DataFrame | None,
) -> DataFrame:
    """The records in each snapshot's bucket and in the `buckets_before_snapshot` non-empty buckets before
    it, of their group partition; every record of a group partition with a tombstone.

    No pass sorts the records: one hash aggregation makes each group partition's non-empty buckets
    bitmaps of 64 (`words`: a few rows per minute of commits), the kept buckets are found among those rows
    and the snapshots, and a second pass keeps the records whose bucket's bit is set. `numbered`: (OFFSET_KEY,
    first_record_at, is_kept_whole, walk: the group partition's number, the words' key).
    """
    walked = (
        records.join(numbered.select(*OFFSET_KEY, "walk", "is_kept_whole"), on=list(OFFSET_KEY), how="inner")
        .withColumn("_bucket", bucket_of(F.col("record_at"), min_distance_ms))
        .withColumns({"_word": F.shiftright("_bucket", WORD_SHIFT), "_place": _place("_bucket")})
    )
    if words is None:
        words = bucket_words(walked.where(~F.col("is_kept_whole")))
    else:
        # The caller's are the carry's: those of group partitions with a tombstone count only their first life.
        walked_whole = numbered.where(~F.col("is_kept_whole")).select("walk")
        words = words.join(walked_whole, on="walk", how="left_semi")
    snapshots = (
        numbered.join(end_offsets.select(*PARTITION, "observed_at"), on=list(PARTITION), how="inner")
        .where((F.col("observed_at") >= F.col("first_record_at")) & ~F.col("is_kept_whole"))
        .select("walk", bucket_of(F.col("observed_at"), min_distance_ms).alias("_bucket"))
        .select("walk", F.shiftright("_bucket", WORD_SHIFT).alias("_word"), _place("_bucket").alias("_place"))
    )
    masks = hold(_kept_masks(_ranked(words, snapshots), buckets_before_snapshot))
    if masks.count() <= _BROADCAST_MASKS:
        masks = F.broadcast(masks)
    return (
        walked.join(masks, on=["walk", "_word"], how="left")
        .where(F.col("is_kept_whole") | (F.expr("shiftrightunsigned(_kept_bits, _place) & 1") == F.lit(1)))
        .select(*records.columns)
    )


def _place(bucket: str) -> Column:
    return F.col(bucket).bitwiseAND(WORD_BUCKETS - 1).cast("int")


def _ranked(words: DataFrame, snapshots: DataFrame) -> DataFrame:
    """Words (walk, _word, _bits) and snapshots (walk, _word, _place) of each group partition in time
    order, with the rank (from 1, earliest first) of its non-empty buckets: a word's first (first_rank),
    and for a snapshot the last before its bucket (below) and whether its own bucket holds records
    (has_own)."""
    stream = words.select("walk", "_word", F.lit(_WORD).alias("kind"), "_bits", F.lit(None).cast("int").alias("_place"))
    stream = stream.unionByName(snapshots.select("walk", "_word", F.lit(_SNAPSHOT).alias("kind"),
        F.lit(None).cast("long").alias("_bits"), "_place"))  # fmt: skip
    so_far = Window.partitionBy("walk").orderBy("_word", "kind").rowsBetween(Window.unboundedPreceding, 0)
    is_word = F.col("kind") == F.lit(_WORD)
    stream = stream.withColumns(
        {
            "_through": F.coalesce(F.sum(F.bit_count("_bits")).over(so_far), F.lit(0)),
            "_word_bits": F.last(F.when(is_word, F.col("_bits")), ignorenulls=True).over(so_far),
            "_last_word": F.last(F.when(is_word, F.col("_word")), ignorenulls=True).over(so_far),
        }
    )
    in_own_word = F.coalesce(F.col("_last_word") == F.col("_word"), F.lit(False))
    from_own = F.call_function("shiftrightunsigned", F.col("_word_bits"), F.col("_place"))
    return stream.select(
        "walk", "_word", "kind", "_bits",
        (F.col("_through") - F.bit_count("_bits") + 1).alias("first_rank"),
        (F.col("_through") - F.when(in_own_word, F.bit_count(from_own)).otherwise(0)).alias("below"),
        (in_own_word & (from_own.bitwiseAND(1) == F.lit(1))).alias("has_own"),
    )  # fmt: skip


def _kept_masks(ranked: DataFrame, buckets_before_snapshot: int) -> DataFrame:
    """(walk, _word, _kept_bits): the buckets each word keeps. A snapshot keeps its own bucket's rank and
    the `buckets_before_snapshot` ranks below it; each rank is placed in the word it falls in (the last
    word starting at or before it) and at its bit there. One pass over `ranked`: a word stands at its
    first rank, a snapshot at each rank it keeps."""
    top = F.col("below") + F.col("has_own").cast("long")
    lowest = F.greatest(F.lit(1).cast("long"), F.col("below") - F.lit(buckets_before_snapshot - 1))
    ranks = F.when(F.col("kind") == F.lit(_WORD), F.array("first_rank")).when(top >= 1, F.sequence(lowest, top))
    placed = ranked.select(
        "walk", "kind", F.when(F.col("kind") == F.lit(_WORD), F.col("_word")).alias("_word"), "_bits",
        F.explode(ranks).alias("rank"),
    )  # fmt: skip
    so_far = Window.partitionBy("walk").orderBy("rank", "kind").rowsBetween(Window.unboundedPreceding, 0)
    placed = placed.withColumns(
        {
            "_in_word": F.last("_word", ignorenulls=True).over(so_far),
            "_in_bits": F.last("_bits", ignorenulls=True).over(so_far),
            "_from": F.last(F.when(F.col("kind") == F.lit(_WORD), F.col("rank")), ignorenulls=True).over(so_far),
        }
    )
    kept_places = with_nth_set_bit(
        placed.where(F.col("kind") == F.lit(_SNAPSHOT)), "_in_bits", F.col("rank") - F.col("_from") + 1, "_place"
    )
    return kept_places.groupBy("walk", F.col("_in_word").alias("_word")).agg(
        F.bit_or(F.call_function("shiftleft", F.lit(1).cast("long"), F.col("_place"))).alias("_kept_bits")
    )
