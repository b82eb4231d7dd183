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


def commits_per_day(offset_commits: DataFrame) -> DataFrame:
    """silver offset_commits -> (group, day, commit_count, first_at, last_at): each group's counted commits
    summed up per day, the only form of the commits group_daily reads. Hold it before handing it over: it
    is read four times, each read wanting other columns, so the plans share no exchange and Spark would
    scan every commit four times (measured on the 10M estate: docs/bench-log.md, fifteenth session)."""
    return (
        filter_uncounted_commits(offset_commits)
        .groupBy(*GROUP, F.to_date("record_at").alias("day"))
        .agg(
            F.count(F.lit(1)).alias("commit_count"),
            F.min("record_at").alias("first_at"),
            F.max("record_at").alias("last_at"),
        )
    )


def _last_commit_candidates(commit_days: DataFrame) -> DataFrame:
    """(group, record_at): each day's last commit time, and its first when that is exactly midnight.

    The latest commit at or before a day's end (the next midnight) is one of these: the last of some
    day up to that one, or a commit at the very midnight that ends it. A few rows per group and day
    stand in for every commit time in the as-of lookup.
    """
    at_midnight = commit_days.where(F.col("first_at") == F.col("day").cast("timestamp"))
    return commit_days.select(*GROUP, F.col("last_at").alias("record_at")).unionByName(
        at_midnight.select(*GROUP, F.col("first_at").alias("record_at"))
    )


def _activity(commit_days: DataFrame, rebalances: DataFrame) -> DataFrame:
    per_day_commits = commit_days.select(*GROUP_DAY, "commit_count")
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


CARRIED = "carried"  # struct(last_commit_at, group_state, empty_expire_at): a group's ends before its first day


def carried_ends(group_daily_rows: DataFrame) -> DataFrame:
    """gold group_daily rows -> (group, day, carried): what each row says of the end of its day, carried
    to the next day (`day` is that next day): the last commit, the group's state and, for an Empty
    group, when its offsets expire. That is all a day's lifecycle needs of the days before it."""
    is_empty = F.col("group_state") == F.lit(STATE_EMPTY)
    carried = F.struct(
        F.col("last_commit_at").alias("last_commit_at"),
        F.col("group_state").alias("group_state"),
        F.when(is_empty, F.col("offsets_expire_at")).alias("empty_expire_at"),
    )
    return group_daily_rows.select(*GROUP, F.date_add("day", 1).alias("day"), carried.alias(CARRIED))


def _no_carry() -> Column:
    return F.lit(None).cast("struct<last_commit_at:timestamp,group_state:string,empty_expire_at:timestamp>")


def group_daily(
    generations: DataFrame,
    commit_days: DataFrame,
    rebalances: DataFrame,
    lag_rows: DataFrame,
    group_status_rows: DataFrame,
    *,
    as_of: date | None,
    stale_after_days: int,
    offsets_retention_minutes: int,
    expiry_warning_hours: int,
) -> DataFrame:
    """gold generations, rebalances, lag, group_status + `commit_days` -> gold `group_daily`."""
    group_records = generations.select(*GROUP, "recorded_at", "state", "join_completed_at", "source_offset")
    days = _days(_activity_times(commit_days, group_records), as_of).withColumn(CARRIED, _no_carry())
    return _daily_rows(
        days,
        commit_days,
        group_records,
        rebalances,
        lag_rows,
        group_status_rows,
        stale_after_days=stale_after_days,
        offsets_retention_minutes=offsets_retention_minutes,
        expiry_warning_hours=expiry_warning_hours,
    )


def group_daily_since(
    starts: DataFrame,
    generations: DataFrame,
    commit_days: DataFrame,
    rebalances: DataFrame,
    lag_rows: DataFrame,
    group_status_rows: DataFrame,
    *,
    last_day: date,
    stale_after_days: int,
    offsets_retention_minutes: int,
    expiry_warning_hours: int,
) -> DataFrame:
    """The group_daily rows of each group in `starts` (group, from_day, carried) from its from_day to
    `last_day`, equal to those of `group_daily` over all the inputs. `carried`: `carried_ends` of the
    group's row the day before from_day, null when it had none (then no activity of the group came
    before from_day, and its rows start at its first activity). The other inputs need hold only their
    rows from each group's from_day on (earlier ones are left out here)."""
    since = starts.select(*GROUP, F.col("from_day").cast("timestamp").alias("_since"))
    # A day's commits all lie at or after its midnight: whole days from from_day on are its commits from it on.
    commit_days = _from_since(commit_days.withColumn("_day_start", F.col("day").cast("timestamp")), since, "_day_start")
    commit_days = commit_days.drop("_day_start")
    group_records = _from_since(
        generations.select(*GROUP, "recorded_at", "state", "join_completed_at", "source_offset"), since, "recorded_at"
    )
    first_days = (
        _activity_times(commit_days, group_records).groupBy(*GROUP).agg(F.min(F.to_date("at")).alias("first_day"))
    )
    has_carry = F.col(CARRIED).isNotNull()
    # greatest() skips nulls: a group with neither a row before from_day nor any activity left from it on
    # (all of its records forgotten) must get no rows, not rows from from_day.
    first_active_day = F.when(F.col("first_day").isNotNull(), F.greatest("first_day", "from_day"))
    days = (
        starts.join(first_days, on=list(GROUP), how="left")
        .select(
            *GROUP,
            F.when(has_carry, F.col("from_day")).otherwise(first_active_day).alias("first_day"),
            F.lit(last_day).alias("last_day"),
            CARRIED,
        )
        .where(F.col("first_day") <= F.col("last_day"))
        .select(*GROUP, F.explode(F.sequence("first_day", "last_day", F.expr("INTERVAL 1 DAY"))).alias("day"), CARRIED)
        .withColumn("day_end", F.date_add("day", 1).cast("timestamp"))
    )
    return _daily_rows(
        days,
        commit_days,
        group_records,
        rebalances,
        lag_rows,
        group_status_rows,
        stale_after_days=stale_after_days,
        offsets_retention_minutes=offsets_retention_minutes,
        expiry_warning_hours=expiry_warning_hours,
    )


def last_activity_day(generations: DataFrame, commit_days: DataFrame) -> DataFrame:
    """One row (last_day): the last day any group has activity, the day `group_daily` rows reach when no
    evaluation day is given (null without activity)."""
    group_records = generations.select(*GROUP, "recorded_at")
    return _activity_times(commit_days, group_records).agg(F.max(F.to_date("at")).alias("last_day"))


def _from_since(rows: DataFrame, since: DataFrame, at: str) -> DataFrame:
    # One row per group, next to the rows of all of them: broadcast, not a shuffle of the commits.
    return rows.join(F.broadcast(since), on=list(GROUP), how="inner").where(F.col(at) >= F.col("_since")).drop("_since")


def _activity_times(commit_days: DataFrame, group_records: DataFrame) -> DataFrame:
    """(group, at): times of activity, a commit day's first commit standing for the day's others (only
    the days of activity are read)."""
    return commit_days.select(*GROUP, F.col("first_at").alias("at")).unionByName(
        group_records.select(*GROUP, F.col("recorded_at").alias("at"))
    )


def _daily_rows(
    days: DataFrame,
    commit_days: DataFrame,
    group_records: DataFrame,
    rebalances: DataFrame,
    lag_rows: DataFrame,
    group_status_rows: DataFrame,
    *,
    stale_after_days: int,
    offsets_retention_minutes: int,
    expiry_warning_hours: int,
) -> DataFrame:
    """(group, day, day_end, carried) -> group_daily rows; the ends of each day are the latest commit and
    group record at or before day_end, else what was carried from before the first day given."""
    ends = latest_at_or_before(
        latest_at_or_before(days, _last_commit_candidates(commit_days), GROUP, "day_end", "record_at", "last_commit"),
        group_records,
        GROUP,
        "day_end",
        "recorded_at",
        "group",
        event_order=("source_offset",),
    )
    last_commit_at = F.coalesce(F.col("last_commit.record_at"), F.col(f"{CARRIED}.last_commit_at"))
    has_group_record = F.col("group").isNotNull()
    state = F.when(has_group_record, F.col("group.state")).otherwise(F.col(f"{CARRIED}.group_state"))
    empty_since = F.coalesce(F.col("group.join_completed_at"), F.col("group.recorded_at"))
    empty_expire_at = F.when(has_group_record, _plus_minutes(empty_since, offsets_retention_minutes)).otherwise(
        F.col(f"{CARRIED}.empty_expire_at")
    )
    expire_at = F.when(state == F.lit(STATE_EMPTY), empty_expire_at).when(
        state.isNull() & last_commit_at.isNotNull(), _plus_minutes(last_commit_at, offsets_retention_minutes)
    )
    days_since = F.floor((F.unix_micros("day_end") - F.unix_micros(last_commit_at)) / F.lit(MICROS_PER_DAY))
    warning_end = _plus_minutes(F.col("day_end"), expiry_warning_hours * 60)
    return (
        ends.join(_activity(commit_days, rebalances), on=list(GROUP_DAY), how="left")
        .join(_lag_and_status(lag_rows, group_status_rows), on=list(GROUP_DAY), how="left")
        .withColumns({"offsets_expire_at": expire_at, "group_state": state, "last_commit_at": last_commit_at})
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
            "group_state",
            "last_commit_at",
            days_since.cast("int").alias("days_since_last_commit"),
            F.coalesce(days_since >= F.lit(stale_after_days), F.lit(False)).alias("is_stale"),
            "offsets_expire_at",
            F.coalesce(
                (F.col("offsets_expire_at") > F.col("day_end")) & (F.col("offsets_expire_at") <= warning_end),
                F.lit(False),
            ).alias("is_expiring_soon"),
            F.coalesce(F.col("group_state") == F.lit(STATE_DELETED), F.lit(False)).alias("is_deleted"),
        )
    )
