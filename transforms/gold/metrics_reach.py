"""What a night's starts (metrics_carry.group_partition_starts) reach beyond the records evaluated
again: the snapshots read for them, the rows of each metrics table they replace, and the days and
windows of the tables summed from those rows."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from transforms.gold.metrics_carry import WHOLE, first_record_time, record_time
from transforms.gold.offsets import OFFSET_KEY, PARTITION


def snapshots_needed_from(facts: DataFrame, starts: DataFrame) -> DataFrame:
    """metrics_carry.group_partition_facts of the records evaluated -> (topic partition, needed_from_at,
    is_whole): the time from which each topic partition's snapshots are read for the rows evaluated
    again: every record evaluated and every start is at or after it. Snapshots before it matter too (the
    latest end offset before a commit, Burrow's recent end offsets, the points time lag interpolates
    between): the reader checks it has enough of them (`partitions_short_of_snapshots`). is_whole: a
    group partition there is evaluated from all its records."""
    first_records = facts.groupBy(*PARTITION).agg(F.min(first_record_time()).alias("first_record_at"))
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
    return F.to_date(F.timestamp_micros(F.unix_micros(record_time(at)) - F.lit(1)))


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
