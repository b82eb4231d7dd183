"""What a metrics run carries to the next, and what a night's changes make it evaluate again.

`lag` and `consumer_status` are evaluated at end-offset snapshots and look back a bounded way from one
(snapshot_horizon.py): to the latest visible offset record at or before it (lag), and to Burrow's
window, the last `intervals` non-empty min-distance buckets (slots) of the group partition's commits
(status). So the past a night needs of a group partition is its last `intervals` + 1 non-empty buckets
of records: the carry (`carry_tails`, table metrics_carry). One bucket more than the window, because a
night's first commit may fall in the bucket of the previous night's last one (nights are cut at log
positions, not at bucket edges): that bucket is evaluated again, whole, with the `intervals` before it.

A night's changes (silver offset_commits and end_offsets, through Delta's Change Data Feed) give each
group partition a start (`start_at`): the earliest record_at of a commit inserted, updated (a
transaction resolved) or deleted, and the earliest observed_at of a snapshot of its topic partition
added or removed. Its lag and consumer_status rows from `start_at` on are evaluated again, `how`:
- continue: the carried records before `start_at` + silver's records from `start_at` on. Exact when
  the carry holds every record of the group partition (`holds_every_record`: the cut never dropped
  one), or when `start_at` falls in or after the last carried bucket (every earlier record either
  table can reach from a snapshot at or after `start_at` is carried). A group partition seen for the
  first time has nothing before `start_at`.
- whole: all of silver's records of the group partition (late data: a commit or snapshot before what
  the carry can answer for). A tombstone that lands behind records of its group partition in the log
  (a backup of an older segment) changes the lives of records of any time: it starts at EARLIEST.
- left out: no record changed and its latest record before `start_at` is a tombstone or expired: it
  holds no committed offset at any later snapshot, so it has no rows there, before or after.

Tombstones. A group partition's lives (commits between tombstones) are counted along the log, not time
(snapshot_horizon.py keeps such partitions whole), and can interleave in time. Its carry keeps every
record after its first tombstone in the log, and of its first life (the records before it) the last
`intervals` + 1 non-empty buckets before the bucket of its earliest tombstone (T0) and any later: from
T0 on no snapshot reaches further back into the first life (a lag is that of the tombstone or a later
record; a first-life window reaches back at most `intervals` slots). So a group partition continues:
- on its first tombstone, from a carry of its last buckets, when the tombstone comes after every record
  of the group partition in the log (`last_position`) and `start_at` is in or after the last carried
  bucket: the records the cut left out are all of the first life and before T0;
- once tombstoned, from `start_at` at or after T0 (earlier: whole, unless the carry holds every record),
  when the night's tombstones again come after every record in the log.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from schemas.metrics_carry import LOG_POSITION, metrics_carry_schema
from transforms.gold import carry_cuts
from transforms.gold.offsets import OFFSET_KEY, PARTITION, filter_invisible_offset_records

CONTINUE, WHOLE = "continue", "whole"
# Records without a timestamp (magic 0) sort before every snapshot: a change to one starts at the beginning.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
GROUP_PARTITION_COLUMNS = ("has_tombstone", "holds_every_record", "last_position")
RECORD_COLUMNS = tuple(
    name for name in metrics_carry_schema.fieldNames() if name not in (*OFFSET_KEY, *GROUP_PARTITION_COLUMNS)
)


def _bucket(at: Column, min_distance_ms: int) -> Column:
    return F.floor(F.unix_millis(at) / F.lit(min_distance_ms))


def record_time(at: Column) -> Column:
    return F.coalesce(at, F.lit(EARLIEST))


def carry_tails(
    records: DataFrame,
    *,
    intervals: int,
    min_distance_ms: int,
    partial: DataFrame | None = None,
    hold: Callable[[DataFrame], DataFrame] = lambda rows: rows,
    lives: DataFrame | None = None,
    words: DataFrame | None = None,
) -> DataFrame:
    """Visible offset records (any clusters) -> metrics_carry rows: of each group partition, the records
    of its first life (before its first tombstone in the log) in its last `intervals` + 1 non-empty
    min-distance buckets before the bucket of its earliest tombstone, and every later one (see the
    module docstring). Without a tombstone: its last `intervals` + 1 non-empty buckets.

    `records` hold every visible record of each group partition but those in `partial` (OFFSET_KEY,
    last_position: the carry's): these hold only their carried tail and what followed, so their carry
    does not hold every record, and the latest log position may be one of the records left out.

    No pass sorts the records (transforms/gold/carry_cuts.py). `hold` materialises the frames of a few
    rows per group partition that later passes read (the caller's: jobs.tables.materialized). `lives`:
    group_partition_facts of `records`, when held already; `words`: their group_partition_words (then
    the records are read once more, for the rows kept, not for the cut)."""
    visible = _with_bucket(filter_invisible_offset_records(records), min_distance_ms).withColumn(
        "_position", _position()
    )
    if lives is None:
        lives = hold(carry_cuts.group_partition_lives(visible))
    if words is None:
        words = _counted_words(visible, lives)
    cut_rows = hold(carry_cuts.cuts(words, intervals + 1))
    cuts = lives.join(cut_rows, on="walk", how="left").select(
        *OFFSET_KEY,
        "_first_tombstone_position",
        "_first_bucket",
        F.col("_first_tombstone_position").isNotNull().alias("has_tombstone"),
        "last_position",
        F.coalesce("_holds_every_bucket", F.lit(True)).alias("holds_every_record"),
    )
    if partial is not None:
        carried = partial.select(
            *OFFSET_KEY, F.col("last_position").alias("_carried_position"), F.lit(True).alias("_partial")
        )
        cuts = carry_cuts.beside(cuts, carried, how="left").withColumns(
            {  # the records left out may be later in the log
                "last_position": F.greatest("last_position", "_carried_position"),
                "holds_every_record": F.col("holds_every_record") & F.col("_partial").isNull(),
            }
        )
    is_kept = (
        F.col("_first_bucket").isNull()
        | (F.col("_bucket") >= F.col("_first_bucket"))
        | F.coalesce(F.col("_position") >= F.col("_first_tombstone_position"), F.lit(False))
    )
    return carry_cuts.beside(visible, cuts).where(is_kept).select(*metrics_carry_schema.fieldNames())


def group_partition_facts(records: DataFrame, *, min_distance_ms: int) -> DataFrame:
    """Offset records -> one row per group partition of its visible ones (carry_cuts.group_partition_lives):
    what carry_tails cuts by, where snapshot_horizon's walk starts and what metrics_reach reads snapshots
    from, found in one aggregation of the records instead of one each. Hold it: all three read it, and
    its numbers (`walk`) key group_partition_words."""
    return carry_cuts.group_partition_lives(_with_bucket(filter_invisible_offset_records(records), min_distance_ms))


def group_partition_words(records: DataFrame, facts: DataFrame, *, min_distance_ms: int) -> DataFrame:
    """Offset records + their held group_partition_facts -> carry_cuts.bucket_words of the records each
    group partition's carry is cut by (walk, _word, _bits): every visible record of one without a
    tombstone, which snapshot_horizon walks too. One aggregation of the records for both."""
    visible = _with_bucket(filter_invisible_offset_records(records), min_distance_ms).withColumn(
        "_position", _position()
    )
    return _counted_words(visible, facts)


def _counted_words(visible: DataFrame, lives: DataFrame) -> DataFrame:
    """Visible records with _bucket and _position + their group_partition_lives -> the bucket_words of
    the records the cut counts: of the first life, in a bucket before the earliest tombstone's."""
    is_counted = F.coalesce(
        (F.col("_position") < F.col("_first_tombstone_position"))
        & (F.col("_bucket") < F.col("_first_tombstone_bucket")),
        F.lit(True),
    )
    tombstones = lives.select(*OFFSET_KEY, "walk", "_first_tombstone_position", "_first_tombstone_bucket")
    return carry_cuts.bucket_words(carry_cuts.beside(visible, tombstones).where(is_counted))


def bucket_of(at: Column, min_distance_ms: int) -> Column:
    """A record's min-distance bucket (an untimed record's is before every timed one's)."""
    return _bucket(record_time(at), min_distance_ms)


def first_record_time() -> Column:
    """The earliest record_time of a group partition's records, from its group_partition_facts row."""
    untimed = F.least(F.lit(EARLIEST), F.col("first_record_at"))
    return F.when(F.col("has_untimed_record"), untimed).otherwise(F.col("first_record_at"))


def _with_bucket(visible: DataFrame, min_distance_ms: int) -> DataFrame:
    return visible.withColumn("_bucket", _bucket(record_time(F.col("record_at")), min_distance_ms))


def _position() -> Column:
    return F.struct("source_partition", "source_offset").cast(LOG_POSITION)


def earliest_changes(commit_changes: DataFrame) -> DataFrame:
    """Changed offset_commits rows -> (group partition, record_at, first_tombstone_position): the
    earliest changed record time of each (an untimed one: EARLIEST) and the first log position of a
    changed tombstone, all that group_partition_starts and group_change_days read of them."""
    by_source_partition = commit_changes.groupBy(*OFFSET_KEY, "source_partition").agg(
        F.min(record_time(F.col("record_at"))).alias("record_at"), *carry_cuts.first_tombstone_offsets()
    )
    return by_source_partition.groupBy(*OFFSET_KEY).agg(
        F.min("record_at").alias("record_at"), carry_cuts.first_tombstone_position().alias("first_tombstone_position")
    )


def group_partition_starts(
    commit_changes: DataFrame, snapshot_changes: DataFrame, carry: DataFrame, *, min_distance_ms: int
) -> DataFrame:
    """earliest_changes of the changed offset_commits rows + changed end_offsets rows + the carry ->
    (group partition, start_at, how) for every group partition whose lag and consumer_status rows from
    start_at on must be evaluated again (see the module docstring)."""
    commit_starts = commit_changes.groupBy(*OFFSET_KEY).agg(
        F.min(record_time(F.col("record_at"))).alias("commit_start_at"),
        F.min("first_tombstone_position").alias("first_tombstone_position"),
    )
    snapshot_starts = snapshot_changes.groupBy(*PARTITION).agg(F.min("observed_at").alias("snapshot_start_at"))
    latest = F.struct(
        record_time(F.col("record_at")).alias("at"), "source_offset", "is_tombstone", "expires_at"
    )  # in lag's order: time, then log position
    carried = carry.groupBy(*OFFSET_KEY).agg(
        F.max(latest).alias("last"),
        F.max("has_tombstone").alias("has_tombstone"),
        F.min(F.coalesce("holds_every_record", F.lit(False))).alias("holds_every_record"),
        F.max("last_position").alias("last_position"),
        F.min(F.when(F.col("is_tombstone"), record_time(F.col("record_at")))).alias("first_tombstone_at"),
    )
    tombstones_follow_the_log = F.col("first_tombstone_position").isNull() | F.coalesce(
        F.col("first_tombstone_position") > F.col("last_position"), F.lit(False)
    )
    # A tombstone behind records in the log moves them to a later life, whatever their time: from the
    # beginning, before every carried bucket and tombstone, so only a carry holding every record continues.
    start_at = F.when(F.col("last").isNotNull() & ~tombstones_follow_the_log, F.lit(EARLIEST)).otherwise(
        F.least("commit_start_at", "snapshot_start_at")
    )
    is_dead_from_start = (F.col("last.at") < start_at) & (
        F.col("last.is_tombstone") | F.coalesce(F.col("last.expires_at") <= start_at, F.lit(False))
    )
    is_left_out = F.col("commit_start_at").isNull() & is_dead_from_start
    in_last_bucket = _bucket(start_at, min_distance_ms) >= _bucket(F.col("last.at"), min_distance_ms)
    continues = (
        F.col("last").isNull()
        | F.col("holds_every_record")
        | (~F.col("has_tombstone") & in_last_bucket)
        | (F.col("has_tombstone") & (start_at >= F.col("first_tombstone_at")))
    )
    return (
        carried.join(commit_starts, on=list(OFFSET_KEY), how="full")
        .join(snapshot_starts, on=list(PARTITION), how="left")
        .where(start_at.isNotNull() & ~F.coalesce(is_left_out, F.lit(False)))
        .select(
            *OFFSET_KEY,
            start_at.alias("start_at"),
            F.when(continues, F.lit(CONTINUE)).otherwise(F.lit(WHOLE)).alias("how"),
        )
    )


def partial_carries(carry: DataFrame, starts: DataFrame) -> DataFrame:
    """(OFFSET_KEY, last_position) of the group partitions continued from a carry that does not hold
    every record: what carry_tails is told of them."""
    continued = starts.where(F.col("how") == F.lit(CONTINUE)).select(*OFFSET_KEY)
    return (
        carry.where(~F.coalesce(F.col("holds_every_record"), F.lit(False)))
        .groupBy(*OFFSET_KEY)
        .agg(F.max("last_position").alias("last_position"))
        .join(continued, on=list(OFFSET_KEY), how="left_semi")
    )


def records_to_evaluate(
    carry: DataFrame, recent_commits: DataFrame, whole_commits: DataFrame, starts: DataFrame
) -> DataFrame:
    """The visible offset records the group partitions in `starts` are evaluated from (silver's columns
    that lag and consumer_status read, txn_state null): continue, the carried ones before start_at and
    `recent_commits` (silver rows, at least those from the earliest such start on) from start_at on;
    whole, every one of `whole_commits` (silver rows, at least those of such group partitions)."""
    # One row per group partition evaluated, next to every record read: broadcast, not a shuffle of them.
    continuing = F.broadcast(starts.where(F.col("how") == F.lit(CONTINUE)).select(*OFFSET_KEY, "start_at"))
    whole = F.broadcast(starts.where(F.col("how") == F.lit(WHOLE)).select(*OFFSET_KEY))
    at = record_time(F.col("record_at"))
    carried = carry.join(continuing, on=list(OFFSET_KEY), how="inner").where(at < F.col("start_at"))
    recent = (
        filter_invisible_offset_records(recent_commits)
        .join(continuing, on=list(OFFSET_KEY), how="inner")
        .where(at >= F.col("start_at"))
    )
    rebuilt = filter_invisible_offset_records(whole_commits).join(whole, on=list(OFFSET_KEY), how="left_semi")
    columns = [*OFFSET_KEY, *RECORD_COLUMNS]
    return (
        carried.select(*columns)
        .unionByName(recent.select(*columns))
        .unionByName(rebuilt.select(*columns))
        .withColumn("txn_state", F.lit(None).cast(StringType()))
    )
