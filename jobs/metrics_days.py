"""group_daily continued from its rows: the days a night's changes reach, and the days time alone adds.

A group's row for a day depends on the group's activity that day and on the latest commit and group
record at or before the day's end; the days before it are summed up by the row of the day before
(transforms/gold/group_daily.carried_ends). So a group is evaluated again from the first day its changes
reach, continuing from its row the day before, and every group gets the days after the last day the
table reached up to the new one (the run date, or the last day of any activity), with no reading of
its earlier activity: stale and expiring move with time alone.
"""

from __future__ import annotations

from datetime import date, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.metrics_writes import timestamp_condition, write_table
from jobs.runs import JobRun
from jobs.tables import cluster_rows, materialized
from jobs.watermarks import CHANGE_DELETE, CHANGE_UPDATE
from schemas import gold
from transforms.gold import group_daily, metrics_reach
from transforms.gold.generations import GROUP
from transforms.gold.offsets import is_visible


def last_day_reached(
    spark: SparkSession,
    config: Config,
    covered_last_day: date | None,
    commits_changed: DataFrame,
    generations_changed: DataFrame,
) -> date | None:
    """The last day group_daily rows reach: the run date; without one, the last day of any activity,
    carried from the covered run unless a change removed some (then found again over all of it)."""
    if config.run_date is not None:
        return config.run_date
    is_deleted = F.col("_change_type") == F.lit(CHANGE_DELETE)
    is_uncounted_update = (F.col("_change_type") == F.lit(CHANGE_UPDATE)) & ~(
        is_visible(F.col("txn_state")) & ~F.col("is_tombstone")
    )
    removed = commits_changed.where(is_deleted | is_uncounted_update)
    if not removed.isEmpty() or not generations_changed.where(F.col("is_removed")).isEmpty():
        activity = group_daily.last_activity_day(
            cluster_rows(spark, config, "generations", gold.generations_schema),
            group_daily.commits_per_day(cluster_rows(spark, config, "offset_commits")),
        )
        return activity.first()["last_day"]
    added = group_daily.last_activity_day(
        generations_changed.where(~F.col("is_removed")), group_daily.commits_per_day(commits_changed.where(~is_deleted))
    ).first()["last_day"]
    candidates = [day for day in (covered_last_day, added) if day is not None]
    return max(candidates, default=None)


def continue_group_daily(
    spark: SparkSession,
    config: Config,
    run: JobRun,
    days_changed: DataFrame,
    covered_last_day: date | None,
    last_day: date | None,
    commit_note: str,
) -> None:
    """group_daily from the first day each group's changes reach, every group's days after the covered
    last day up to the new one (time alone moves stale and expiring), and none after the new one."""
    previous = cluster_rows(spark, config, "group_daily", gold.group_daily_schema)
    starts = days_changed
    if last_day is not None and covered_last_day is not None and last_day > covered_last_day:
        next_day = covered_last_day + timedelta(days=1)
        new_day_groups = (
            previous.where(F.col("day") == F.lit(covered_last_day))
            .select(*GROUP)
            .unionByName(_groups_active_from(spark, config, next_day))
            .select(*GROUP, F.lit(next_day).alias("from_day"))
        )
        starts = starts.unionByName(new_day_groups).groupBy(*GROUP).agg(F.min("from_day").alias("from_day"))
    starts = starts.localCheckpoint()
    run.counts["metrics_groups_rebuilt"] = starts.count()
    truncated_from = (
        last_day + timedelta(days=1)
        if last_day is not None and covered_last_day is not None and last_day < covered_last_day
        else None
    )
    first = starts.agg(F.min("from_day")).first()[0]
    since = min([day for day in (first, truncated_from) if day is not None], default=None)
    if last_day is None:  # no activity left at all: no rows
        write_table(spark, config, "group_daily", previous.limit(0), commit_note, "")
        return
    if since is None:
        write_table(spark, config, "group_daily", previous, commit_note, None)
        return
    new_rows = previous.limit(0)
    if first is not None and first <= last_day:
        new_rows = _group_days_since(spark, config, starts, previous, first, last_day)
    condition = f"day >= DATE '{since.isoformat()}'"
    kept = metrics_reach.filter_rebuilt(
        previous.where(condition), starts.withColumnRenamed("from_day", "start_at"), "day", GROUP
    ).where(F.col("day") <= F.lit(last_day))
    rows = kept.unionByName(new_rows.select(*previous.columns)).localCheckpoint()
    write_table(spark, config, "group_daily", rows, commit_note, condition)


def _group_days_since(
    spark: SparkSession, config: Config, starts: DataFrame, previous: DataFrame, first: date, last_day: date
) -> DataFrame:
    """The group_daily rows of the groups in `starts` from their from_day to `last_day`, continuing from
    the previous rows the day before; the inputs are read from the earliest from_day (`first`) on."""
    settings = config.gold_settings()
    carried = group_daily.carried_ends(previous.where(F.col("day") >= F.lit(first - timedelta(days=1))))
    since_at = f"{first.isoformat()} 00:00:00"

    def since(name: str, at: str, schema=None) -> DataFrame:
        return cluster_rows(spark, config, name, schema).where(timestamp_condition(at, since_at))

    return group_daily.group_daily_since(
        starts.where(F.col("from_day") <= F.lit(last_day)).join(
            carried.withColumnRenamed("day", "from_day"), on=[*GROUP, "from_day"], how="left"
        ),
        since("generations", "recorded_at", gold.generations_schema),
        materialized(group_daily.commits_per_day(since("offset_commits", "record_at"))),
        since("rebalances", "completed_at", gold.rebalances_schema),
        since("lag", "observed_at"),
        since("group_status", "evaluated_at"),
        last_day=last_day,
        stale_after_days=settings.stale_after_days,
        offsets_retention_minutes=settings.offsets_retention_minutes,
        expiry_warning_hours=settings.expiry_warning_hours,
    )


def _groups_active_from(spark: SparkSession, config: Config, day: date) -> DataFrame:
    """Groups with activity (a counted commit, a group record) on or after `day`: those without rows yet
    that a later last day gives rows."""
    at = f"{day.isoformat()} 00:00:00"
    commits = (
        cluster_rows(spark, config, "offset_commits")
        .where(timestamp_condition("record_at", at))
        .where(is_visible(F.col("txn_state")) & ~F.col("is_tombstone"))
        .select(*GROUP)
    )
    generations = (
        cluster_rows(spark, config, "generations", gold.generations_schema)
        .where(timestamp_condition("recorded_at", at))
        .select(*GROUP)
    )
    return commits.unionByName(generations).distinct()
