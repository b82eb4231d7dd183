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
  `start_at` falls in or after the last carried bucket (every earlier record either table can reach
  from a snapshot at or after `start_at` is carried), or when the carry holds every record of the group
  partition: it had a tombstone (its lives follow log order, not time, so it is evaluated from all its
  records, as snapshot_horizon.py keeps such partitions whole), or it has fewer than `intervals` + 1
  non-empty buckets (the cut dropped nothing). A group partition seen for the first time has nothing
  before `start_at`.
- whole: all of silver's records of the group partition: late data (a commit or snapshot before the
  last carried bucket) of one whose carry does not hold every record, or its first tombstone tonight
  (from then on its carry holds every record: read whole once, not on every night it changes).
- left out: no record changed and its latest record before `start_at` is a tombstone or expired: it
  holds no committed offset at any later snapshot, so it has no rows there, before or after.
"""

from __future__ import annotations

import functools
import operator
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from schemas.metrics_carry import metrics_carry_schema
from transforms.gold.offsets import OFFSET_KEY, PARTITION, filter_invisible_offset_records

CONTINUE, WHOLE = "continue", "whole"
# Records without a timestamp (magic 0) sort before every snapshot: a change to one starts at the beginning.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
RECORD_COLUMNS = tuple(name for name in metrics_carry_schema.fieldNames() if name not in (*OFFSET_KEY, "has_tombstone"))


def _bucket(at: Column, min_distance_ms: int) -> Column:
    return F.floor(F.unix_millis(at) / F.lit(min_distance_ms))


def _record_time(at: Column) -> Column:
    return F.coalesce(at, F.lit(EARLIEST))


def carry_tails(records: DataFrame, *, intervals: int, min_distance_ms: int) -> DataFrame:
    """Visible offset records (any clusters) -> metrics_carry rows: each group partition's records in its
    last `intervals` + 1 non-empty min-distance buckets, all of them if it ever had a tombstone (whether
    it had is carried too).

    The cut is found among each group partition's distinct buckets (an aggregation, about one row per
    min-distance of its commits) and applied to the records by a join: ranking the records themselves
    sorted a night's every record by group partition and time."""
    visible = filter_invisible_offset_records(records).withColumn(
        "_bucket", _bucket(_record_time(F.col("record_at")), min_distance_ms)
    )
    by_key = Window.partitionBy(*OFFSET_KEY)
    buckets = visible.groupBy(*OFFSET_KEY, "_bucket").agg(F.max("is_tombstone").alias("_has_tombstone"))
    cuts = (
        buckets.withColumns(
            {
                "_buckets_back": F.row_number().over(by_key.orderBy(F.col("_bucket").desc())),
                "has_tombstone": F.max("_has_tombstone").over(
                    by_key.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
                ),
            }
        )
        .where(F.col("_buckets_back") <= F.lit(intervals + 1))
        .groupBy(*OFFSET_KEY)
        .agg(F.min("_bucket").alias("_first_bucket"), F.max("has_tombstone").alias("has_tombstone"))
        .withColumnsRenamed({name: f"_cut_{name}" for name in OFFSET_KEY})
    )
    same_key = functools.reduce(operator.and_, [F.col(name).eqNullSafe(F.col(f"_cut_{name}")) for name in OFFSET_KEY])
    return (
        visible.join(cuts, on=same_key)
        .where((F.col("_bucket") >= F.col("_first_bucket")) | F.col("has_tombstone"))
        .select(*metrics_carry_schema.fieldNames())
    )


def earliest_changes(commit_changes: DataFrame) -> DataFrame:
    """Changed offset_commits rows -> (group partition, record_at, has_tombstone): the earliest changed
    record time of each (an untimed one: EARLIEST) and whether a tombstone changed, all that
    group_partition_starts and group_change_days read of them."""
    return commit_changes.groupBy(*OFFSET_KEY).agg(
        F.min(_record_time(F.col("record_at"))).alias("record_at"),
        F.max("is_tombstone").alias("has_tombstone_changed"),
    )


def group_partition_starts(
    commit_changes: DataFrame, snapshot_changes: DataFrame, carry: DataFrame, *, intervals: int, min_distance_ms: int
) -> DataFrame:
    """Changed offset_commits rows + changed end_offsets rows + the carry -> (group partition, start_at,
    how) for every group partition whose lag and consumer_status rows from start_at on must be evaluated
    again (see the module docstring)."""
    commit_starts = commit_changes.groupBy(*OFFSET_KEY).agg(
        F.min(_record_time(F.col("record_at"))).alias("commit_start_at"),
        F.max("has_tombstone_changed").alias("has_tombstone_changed"),
    )
    snapshot_starts = snapshot_changes.groupBy(*PARTITION).agg(F.min("observed_at").alias("snapshot_start_at"))
    latest = F.struct(
        _record_time(F.col("record_at")).alias("at"), "source_offset", "is_tombstone", "expires_at"
    )  # in lag's order: time, then log position
    carried = carry.groupBy(*OFFSET_KEY).agg(
        F.max(latest).alias("last"),
        F.max("has_tombstone").alias("has_tombstone"),
        F.count_distinct(_bucket(_record_time(F.col("record_at")), min_distance_ms)).alias("carried_buckets"),
    )
    start_at = F.least("commit_start_at", "snapshot_start_at")
    is_dead_from_start = (F.col("last.at") < start_at) & (
        F.col("last.is_tombstone") | F.coalesce(F.col("last.expires_at") <= start_at, F.lit(False))
    )
    is_left_out = F.col("commit_start_at").isNull() & is_dead_from_start
    is_first_tombstone = ~F.col("has_tombstone") & F.coalesce(F.col("has_tombstone_changed"), F.lit(False))
    holds_every_record = F.col("has_tombstone") | (F.col("carried_buckets") <= F.lit(intervals))
    continues = F.col("last").isNull() | (
        holds_every_record
        | (~is_first_tombstone & (_bucket(start_at, min_distance_ms) >= _bucket(F.col("last.at"), min_distance_ms)))
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
    at = _record_time(F.col("record_at"))
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


def snapshots_needed_from(records: DataFrame, starts: DataFrame) -> DataFrame:
    """(topic partition, needed_from_at, is_whole): the time from which each topic partition's snapshots
    are read for the rows evaluated again: every record evaluated and every start is at or after it.
    Snapshots before it matter too (the latest end offset before a commit, Burrow's recent end offsets,
    the points time lag interpolates between): the reader checks it has enough of them
    (`partitions_short_of_snapshots`). is_whole: a group partition there is evaluated from all its records."""
    first_records = records.groupBy(*PARTITION).agg(F.min(_record_time(F.col("record_at"))).alias("first_record_at"))
    per_partition = starts.groupBy(*PARTITION).agg(
        F.min("start_at").alias("first_start_at"), F.max(F.col("how") == F.lit(WHOLE)).alias("is_whole")
    )
    return per_partition.join(first_records, on=list(PARTITION), how="left").select(
        *PARTITION, F.least("first_start_at", "first_record_at").alias("needed_from_at"), "is_whole"
    )


def partitions_short_of_snapshots(snapshots: DataFrame, needed: DataFrame, *, intervals: int) -> DataFrame:
    """(topic partition) whose snapshots read (a suffix of each partition's history) may leave out one
    an evaluation needs: fewer than `intervals` of them at or before needed_from_at (Burrow's recent end
    offsets, the latest end offset before a commit), or a group partition evaluated whole."""
    before = (
        snapshots.join(needed, on=list(PARTITION), how="inner")
        .where(F.col("observed_at") <= F.col("needed_from_at"))
        .groupBy(*PARTITION)
        .agg(F.count(F.lit(1)).alias("snapshot_count"))
    )
    return (
        needed.join(before, on=list(PARTITION), how="left")
        .where(F.col("is_whole") | (F.coalesce(F.col("snapshot_count"), F.lit(0)) < F.lit(intervals)))
        .select(*PARTITION)
    )


def filter_before_start(rows: DataFrame, starts: DataFrame, at: str) -> DataFrame:
    """Rows (of lag or consumer_status) of the group partitions in `starts`, at or after their start_at."""
    return (
        rows.join(starts.select(*OFFSET_KEY, "start_at"), on=list(OFFSET_KEY), how="inner")
        .where(F.col(at) >= F.col("start_at"))
        .select(*rows.columns)
    )


def filter_rebuilt(rows: DataFrame, starts: DataFrame, at: str, keys: tuple[str, ...] = OFFSET_KEY) -> DataFrame:
    """Rows a table keeps: those of keys not in `starts` (keys, start_at) and those before their start."""
    return (
        rows.join(starts.select(*keys, F.col("start_at").alias("_start_at")), on=list(keys), how="left")
        .where(F.col("_start_at").isNull() | (F.col(at) < F.col("_start_at")))
        .select(*rows.columns)
    )


def group_window_starts(starts: DataFrame, window_minutes: int) -> DataFrame:
    """(cluster, group_id, read_from_at, start_at): read_from_at, the start of the group_status window
    holding the group's earliest start; its windows ending after it (start_at on) are evaluated again,
    from the consumer_status rows from read_from_at on, which hold every row of those windows."""
    seconds = window_minutes * 60
    window_start = F.floor(F.unix_seconds(F.min("start_at")) / seconds) * seconds
    return starts.groupBy("cluster", "group_id").agg(
        F.timestamp_seconds(window_start).alias("read_from_at"),
        F.timestamp_seconds(window_start + seconds).alias("start_at"),
    )


def topic_day_starts(starts: DataFrame) -> DataFrame:
    """(cluster, group_id, topic, start_at): midnight of the day of each group topic's earliest start.
    Its lag_daily rows from that day on are evaluated again, from the lag rows from then on."""
    return starts.groupBy("cluster", "group_id", "topic").agg(
        F.to_date(F.min("start_at")).cast("timestamp").alias("start_at")
    )


def _first_day_changed(at: Column) -> Column:
    """The first group_daily day an event at `at` can change: its own day, or the day before when it is
    at midnight exactly (a day's lifecycle is as of its end, the next midnight, inclusive)."""
    return F.to_date(F.timestamp_micros(F.unix_micros(_record_time(at)) - F.lit(1)))


def group_change_days(
    commit_changes: DataFrame, generation_changes: DataFrame, rebalance_changes: DataFrame, starts: DataFrame
) -> DataFrame:
    """(cluster, group_id, from_day): the first group_daily day of each group that a night's changes
    reach: commits changed (record_at), generations and rebalances changed (recorded_at, completed_at),
    and its lag and status rows evaluated again (start_at: group_status windows end later still)."""
    events = [
        commit_changes.select("cluster", "group_id", F.col("record_at").alias("at")),
        generation_changes.select("cluster", "group_id", F.col("recorded_at").alias("at")),
        rebalance_changes.select("cluster", "group_id", F.col("completed_at").alias("at")),
        starts.select("cluster", "group_id", F.col("start_at").alias("at")),
    ]
    union = events[0]
    for more in events[1:]:
        union = union.unionByName(more)
    return union.groupBy("cluster", "group_id").agg(F.min(_first_day_changed(F.col("at"))).alias("from_day"))
