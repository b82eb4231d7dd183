"""The group report's data: gold tables -> the small, per-group series the report's pages draw.

Every time is epoch milliseconds (`*_at_ms`, UTC), the one form a browser's charts read without a
time-zone guess. Each function states its grain; none reads or writes storage.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

HEALTH_DELETED, HEALTH_CRITICAL, HEALTH_WARNING, HEALTH_OK = "deleted", "critical", "warning", "ok"
STATUS_ERR, STATUS_WARN = "ERR", "WARN"
WHATIF_PERIOD = "last_30_days"  # the whatif_summary view's period the report shows
# An owner is named by its static instance id when it has one, else its member id (gold's member_key).
UNKNOWN_MEMBER = "?"


def epoch_ms(timestamp: Column) -> Column:
    return F.unix_millis(timestamp)


def member_key(member_id: Column, group_instance_id: Column) -> Column:
    return F.coalesce(group_instance_id, member_id, F.lit(UNKNOWN_MEMBER))


def health(is_deleted: Column, status: Column, is_stale: Column, is_expiring_soon: Column) -> Column:
    """deleted, critical (Burrow's ERR), warning (WARN, stale, offsets about to expire) or ok."""
    is_warning = (status == STATUS_WARN) | F.coalesce(is_stale | is_expiring_soon, F.lit(False))
    return (
        F.when(F.coalesce(is_deleted, F.lit(False)), HEALTH_DELETED)
        .when(status == STATUS_ERR, HEALTH_CRITICAL)
        .when(is_warning, HEALTH_WARNING)
        .otherwise(HEALTH_OK)
    )


def current_lag_totals(lag: DataFrame, cluster_lag: DataFrame) -> DataFrame:
    """One row per group with a lag row at the cluster's latest end-offset snapshot, the current_lag
    view's "now": the group's offset lag summed over its partitions then and its largest time lag.
    A group without a row then (its offsets deleted or expired) has no current lag, as in group_health.
    `cluster_lag` is the whole cluster's lag, so that a report of one group finds the same snapshot."""
    latest = cluster_lag.groupBy("cluster").agg(F.max("observed_at").alias("observed_at"))
    return (
        lag.join(latest, on=["cluster", "observed_at"], how="inner")
        .groupBy("cluster", "group_id")
        .agg(
            F.sum("offset_lag").alias("current_offset_lag"),
            F.max("time_lag_seconds").alias("current_time_lag_seconds"),
        )
        .select("cluster", "group_id", "current_offset_lag", "current_time_lag_seconds")
    )


def group_summaries(
    generations: DataFrame, group_daily: DataFrame, group_status: DataFrame, current_lag: DataFrame
) -> DataFrame:
    """One row per group of the index: what it is now and how it has behaved.

    `rebalances_per_day` is over the days group_daily holds for the group (its first record to the
    evaluation day); lifecycle is the last day's, status the last window's. Lag twice, since a day's
    worst and its present differ (29 offsets behind in the morning, 0 at the last snapshot): the
    largest of the group's last day (`last_day_max_*`) and at the latest snapshot (`current_*`)."""
    days = group_daily.groupBy("cluster", "group_id").agg(
        F.count(F.lit(1)).alias("day_count"),
        F.sum("rebalance_count").alias("rebalance_count"),
        F.max("rebalance_count").alias("max_rebalances_in_a_day"),
        F.sum("moved_partition_count").alias("moved_partition_count"),
        F.max("day").alias("last_day"),
        F.max_by("max_offset_lag", "day").alias("last_day_max_offset_lag"),
        F.max_by("max_time_lag_seconds", "day").alias("last_day_max_time_lag_seconds"),
        F.max_by("group_state", "day").alias("daily_state"),
        F.max_by("is_stale", "day").alias("is_stale"),
        F.max_by("is_expiring_soon", "day").alias("is_expiring_soon"),
        F.max_by("is_deleted", "day").alias("is_deleted"),
        F.max("last_commit_at").alias("last_commit_at"),
    )
    latest = generations.groupBy("cluster", "group_id").agg(
        F.max_by("group_protocol", "source_offset").alias("group_protocol"),
        F.max_by("state", "source_offset").alias("state"),
        F.max_by("member_count", "source_offset").alias("member_count"),
        F.max("generation").alias("generation"),
        F.max("last_recorded_at").alias("last_recorded_at"),
    )
    status = group_status.groupBy("cluster", "group_id").agg(
        F.max_by("status", "evaluated_at").alias("status"),
        F.max("evaluated_at").alias("evaluated_at"),
    )
    summaries = (
        days.join(latest, on=["cluster", "group_id"], how="full")
        .join(status, on=["cluster", "group_id"], how="left")
        .join(current_lag, on=["cluster", "group_id"], how="left")
        .withColumns(
            {
                "health": health(F.col("is_deleted"), F.col("status"), F.col("is_stale"), F.col("is_expiring_soon")),
                "rebalances_per_day": F.round(F.col("rebalance_count") / F.col("day_count"), 2),
                "last_seen_at": F.greatest("last_commit_at", "last_recorded_at"),
            }
        )
    )
    return summaries.select(
        "cluster",
        "group_id",
        F.coalesce("group_protocol", F.lit("offsets only")).alias("group_protocol"),
        F.coalesce("state", "daily_state").alias("state"),
        "health",
        "status",
        "member_count",
        "generation",
        F.coalesce("rebalance_count", F.lit(0)).cast("long").alias("rebalance_count"),
        "rebalances_per_day",
        "max_rebalances_in_a_day",
        "current_offset_lag",
        F.date_format("last_day", "yyyy-MM-dd").alias("last_day"),
        "last_day_max_offset_lag",
        "current_time_lag_seconds",
        "last_day_max_time_lag_seconds",
        epoch_ms(F.col("last_seen_at")).alias("last_seen_at_ms"),
    )


def estate_rebalances_per_day(group_daily: DataFrame) -> DataFrame:
    """One row per UTC day: rebalances of every group that day, and how many groups rebalanced."""
    return (
        group_daily.groupBy("cluster", "day")
        .agg(
            F.sum("rebalance_count").alias("rebalance_count"),
            F.count_if(F.col("rebalance_count") > 0).alias("rebalancing_group_count"),
        )
        .select(
            "cluster", F.date_format("day", "yyyy-MM-dd").alias("day"), "rebalance_count", "rebalancing_group_count"
        )
    )


def generation_points(generations: DataFrame) -> DataFrame:
    """One row per generation (deletions have none): when it was recorded and with how many members."""
    return generations.where(F.col("generation").isNotNull()).select(
        "group_id",
        epoch_ms(F.col("recorded_at")).alias("recorded_at_ms"),
        "generation",
        "member_count",
        "state",
        "group_protocol",
    )


def rebalance_points(rebalances: DataFrame) -> DataFrame:
    """One row per logical rebalance, with its cause and what it cost."""
    return rebalances.select(
        "group_id",
        epoch_ms(F.col("completed_at")).alias("completed_at_ms"),
        "generation",
        "previous_generation",
        "cause",
        F.array_join("causes", ", ").alias("causes"),
        "moved_partition_count",
        "minimal_moves",
        "member_count_before",
        "member_count_after",
        "rebalance_protocol",
        "assignor",
        "estimated_pause_ms",
    )


def ownership_intervals(assignments: DataFrame) -> DataFrame:
    """One row per (partition, owner) interval: `valid_until_at_ms` null while it is still owned."""
    return assignments.select(
        "group_id",
        F.concat_ws("-", "topic", F.col("partition").cast("string")).alias("topic_partition"),
        "member_key",
        epoch_ms(F.col("assigned_at")).alias("assigned_at_ms"),
        epoch_ms(F.col("valid_until")).alias("valid_until_at_ms"),
    )


def movement_points(movements: DataFrame) -> DataFrame:
    """One row per partition that changed owner in a rebalance, owners named as in ownership_intervals."""
    return movements.select(
        "group_id",
        epoch_ms(F.col("completed_at")).alias("completed_at_ms"),
        F.concat_ws("-", "topic", F.col("partition").cast("string")).alias("topic_partition"),
        member_key(F.col("from_member_id"), F.col("from_group_instance_id")).alias("from_member_key"),
        member_key(F.col("to_member_id"), F.col("to_group_instance_id")).alias("to_member_key"),
        "is_forced",
    )


def group_lag_series(lag: DataFrame) -> DataFrame:
    """One row per (group, end-offset snapshot): the group's offset lag summed over its partitions and
    its largest time lag, as group_daily counts them."""
    return (
        lag.groupBy("group_id", "observed_at")
        .agg(F.sum("offset_lag").alias("offset_lag"), F.max("time_lag_seconds").alias("time_lag_seconds"))
        .select("group_id", epoch_ms(F.col("observed_at")).alias("observed_at_ms"), "offset_lag", "time_lag_seconds")
    )


def status_points(group_status: DataFrame) -> DataFrame:
    """One row per group evaluation window: Burrow's roll-up and the lag behind it."""
    return group_status.select(
        "group_id",
        epoch_ms(F.col("evaluated_at")).alias("evaluated_at_ms"),
        "status",
        "total_lag",
        "error_partition_count",
    )


def whatif_last_30_days(whatif_summary: DataFrame) -> DataFrame:
    """One row per (group, assignor): the whatif_summary view's last 30 days (ending at the cluster's
    latest rebalance), what each assignor would have cost beside the one the group used."""
    return whatif_summary.where(F.col("period") == F.lit(WHATIF_PERIOD)).select(
        "group_id",
        "assignor",
        "is_actual_assignor",
        "rebalance_count",
        "moved_partition_count",
        "unnecessary_moves",
        "revoked_partition_count",
        F.round("average_stickiness", 3).alias("average_stickiness"),
        "max_skew",
        "max_idle_member_count",
        "estimated_pause_ms",
        "same_as_actual_count",
    )


def capacity_points(capacity: DataFrame) -> DataFrame:
    """One row per generation with members: how many own nothing, and the share doing work."""
    return capacity.select(
        "group_id",
        epoch_ms(F.col("recorded_at")).alias("recorded_at_ms"),
        "generation",
        "member_count",
        "idle_member_count",
        "capacity_used",
    )


def idle_member_rows(capacity: DataFrame) -> DataFrame:
    """One row per member that owned nothing in a generation, and why."""
    idle = F.col("idle")
    return (
        capacity.where(F.col("idle_member_count") > 0)
        .select("group_id", "recorded_at", "generation", "idle_since", F.explode("idle_members").alias("idle"))
        .select(
            "group_id",
            epoch_ms(F.col("recorded_at")).alias("recorded_at_ms"),
            "generation",
            member_key(idle["member_id"], idle["group_instance_id"]).alias("member_key"),
            idle["client_id"].alias("client_id"),
            idle["client_host"].alias("client_host"),
            F.array_join(idle["subscribed_topics"], ", ").alias("subscribed_topics"),
            idle["reason"].alias("reason"),
            epoch_ms(F.col("idle_since")).alias("idle_since_at_ms"),
        )
    )
