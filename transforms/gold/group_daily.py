"""One row per group per UTC day: activity, lag, status, and its lifecycle at the end of the day.

Grain: (cluster, group_id, day) for every day from the group's first record to the evaluation day
(`as_of`, or the last day the data reaches when none is given), so quiet days are rows too.

Lifecycle at the end of the day:
- stale: no counted commit for `stale_after_days` days or more;
- offsets_expire_at (Kafka's rule, `offsets.retention.minutes`): for an Empty group, retention after
  it became Empty; for a group with no group record at all (standalone consumers), retention after its
  last commit; a Stable group's subscribed offsets do not expire (null). `is_expiring_soon` when that
  moment falls within the next `expiry_warning_hours`. (Explicit v1 expire timestamps are not used.)
- deleted: the latest group record is a tombstone.
"""

from __future__ import annotations

from datetime import date

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from transforms.gold import status
from transforms.gold.generations import GROUP, STATE_DELETED, STATE_EMPTY
from transforms.gold.lag import P95
from transforms.gold.offsets import filter_uncounted_commits
from transforms.gold.timeline import latest_at_or_before

GROUP_DAY = (*GROUP, "day")
MICROS_PER_MINUTE = 60_000_000
MICROS_PER_DAY = 86_400_000_000


def _plus_minutes(at: Column, minutes: int) -> Column:
    return F.timestamp_micros(F.unix_micros(at) + F.lit(minutes * MICROS_PER_MINUTE))


def _days(activity: DataFrame, as_of: date | None) -> DataFrame:
    """(group, day, day_end) for every day from the group's first activity to the evaluation day."""
    spans = activity.groupBy(*GROUP).agg(F.min(F.to_date("at")).alias("first_day"))
    if as_of is not None:
        spans = spans.withColumn("last_day", F.lit(as_of))
    else:
        spans = spans.crossJoin(activity.agg(F.max(F.to_date("at")).alias("last_day")))
    return (
        spans.where(F.col("first_day") <= F.col("last_day"))
        .select(*GROUP, F.explode(F.sequence("first_day", "last_day", F.expr("INTERVAL 1 DAY"))).alias("day"))
        .withColumn("day_end", F.date_add("day", 1).cast("timestamp"))
    )


def _last_commit_candidates(commits: DataFrame) -> DataFrame:
    """(group, record_at): each day's last commit time, and its first when that is exactly midnight.

    The latest commit at or before a day's end (the next midnight) is one of these: the last of some
    day up to that one, or a commit at the very midnight that ends it. A few rows per group and day
    stand in for every commit time in the as-of lookup.
    """
    per_day = commits.groupBy(*GROUP, F.to_date("record_at").alias("day")).agg(
        F.max("record_at").alias("last_at"), F.min("record_at").alias("first_at")
    )
    at_midnight = per_day.where(F.col("first_at") == F.col("day").cast("timestamp"))
    return per_day.select(*GROUP, F.col("last_at").alias("record_at")).unionByName(
        at_midnight.select(*GROUP, F.col("first_at").alias("record_at"))
    )


def _activity(commits: DataFrame, rebalances: DataFrame) -> DataFrame:
    per_day_commits = commits.groupBy(*GROUP, F.to_date("record_at").alias("day")).agg(
        F.count(F.lit(1)).alias("commit_count")
    )
    per_day_rebalances = rebalances.groupBy(*GROUP, F.to_date("completed_at").alias("day")).agg(
        F.count(F.lit(1)).cast("int").alias("rebalance_count"),
        F.sum("moved_partition_count").cast("int").alias("moved_partition_count"),
    )
    return per_day_commits.join(per_day_rebalances, on=list(GROUP_DAY), how="full")


def _lag_and_status(lag_rows: DataFrame, group_status_rows: DataFrame) -> DataFrame:
    per_snapshot = lag_rows.groupBy(*GROUP, "observed_at").agg(
        F.sum("offset_lag").alias("offset_lag"), F.max("time_lag_seconds").alias("time_lag_seconds")
    )
    lag_days = per_snapshot.groupBy(*GROUP, F.to_date("observed_at").alias("day")).agg(
        F.max("offset_lag").cast("long").alias("max_offset_lag"),
        F.percentile("offset_lag", F.lit(P95)).alias("p95_offset_lag"),
        F.max("time_lag_seconds").alias("max_time_lag_seconds"),
        F.percentile("time_lag_seconds", F.lit(P95)).alias("p95_time_lag_seconds"),
    )
    severity = F.create_map(*[F.lit(item) for pair in status.SEVERITY.items() for item in pair])
    worst = F.max(severity[F.col("status")])
    status_days = group_status_rows.groupBy(*GROUP, F.to_date("evaluated_at").alias("day")).agg(
        F.when(worst == status.SEVERITY[status.ERR], F.lit(status.ERR))
        .when(worst == status.SEVERITY[status.WARN], F.lit(status.WARN))
        .otherwise(F.lit(status.OK))
        .alias("worst_status")
    )
    return lag_days.join(status_days, on=list(GROUP_DAY), how="full")


def group_daily(
    generations: DataFrame,
    offset_commits: DataFrame,
    rebalances: DataFrame,
    lag_rows: DataFrame,
    group_status_rows: DataFrame,
    *,
    as_of: date | None,
    stale_after_days: int,
    offsets_retention_minutes: int,
    expiry_warning_hours: int,
) -> DataFrame:
    """gold generations, rebalances, lag, group_status + silver offset_commits -> gold `group_daily`."""
    commits = filter_uncounted_commits(offset_commits)
    group_records = generations.select(*GROUP, "recorded_at", "state", "join_completed_at", "source_offset")
    activity = commits.select(*GROUP, F.col("record_at").alias("at")).unionByName(
        group_records.select(*GROUP, F.col("recorded_at").alias("at"))
    )
    days = _days(activity, as_of)
    ends = latest_at_or_before(
        latest_at_or_before(days, _last_commit_candidates(commits), GROUP, "day_end", "record_at", "last_commit"),
        group_records,
        GROUP,
        "day_end",
        "recorded_at",
        "group",
        event_order=("source_offset",),
    )
    last_commit_at = F.col("last_commit.record_at")
    state = F.col("group.state")
    empty_since = F.coalesce(F.col("group.join_completed_at"), F.col("group.recorded_at"))
    expire_at = F.when(state == F.lit(STATE_EMPTY), _plus_minutes(empty_since, offsets_retention_minutes)).when(
        state.isNull() & last_commit_at.isNotNull(), _plus_minutes(last_commit_at, offsets_retention_minutes)
    )
    days_since = F.floor((F.unix_micros("day_end") - F.unix_micros(last_commit_at)) / F.lit(MICROS_PER_DAY))
    warning_end = _plus_minutes(F.col("day_end"), expiry_warning_hours * 60)
    return (
        ends.join(_activity(commits, rebalances), on=list(GROUP_DAY), how="left")
        .join(_lag_and_status(lag_rows, group_status_rows), on=list(GROUP_DAY), how="left")
        .withColumn("offsets_expire_at", expire_at)
        .select(
            *GROUP_DAY,
            F.coalesce("commit_count", F.lit(0)).alias("commit_count"),
            F.coalesce("rebalance_count", F.lit(0)).alias("rebalance_count"),
            F.coalesce("moved_partition_count", F.lit(0)).alias("moved_partition_count"),
            "max_offset_lag",
            "p95_offset_lag",
            "max_time_lag_seconds",
            "p95_time_lag_seconds",
            "worst_status",
            state.alias("group_state"),
            last_commit_at.alias("last_commit_at"),
            days_since.cast("int").alias("days_since_last_commit"),
            F.coalesce(days_since >= F.lit(stale_after_days), F.lit(False)).alias("is_stale"),
            "offsets_expire_at",
            F.coalesce(
                (F.col("offsets_expire_at") > F.col("day_end")) & (F.col("offsets_expire_at") <= warning_end),
                F.lit(False),
            ).alias("is_expiring_soon"),
            F.coalesce(state == F.lit(STATE_DELETED), F.lit(False)).alias("is_deleted"),
        )
    )
