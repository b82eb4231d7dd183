"""The what-if replay's counts: gold `rebalance_whatif`, one row per (logical rebalance, assignor).

`replayed` holds what Kafka's own assignors made of each rebalance's input (transforms/gold/whatif_inputs.py;
the job runs them, jvm/assignors). Each assignment is counted against the owners before the rebalance the
way `rebalances` counts the real one: a move is a partition that had an owner and gets another.

Pause. An eager assignor (range, roundrobin, sticky) makes every member revoke all it owns before it joins,
so every partition the remaining members owned stops until the sync (`revoked_partition_count`); the length
of that stop is not something the assignor changes, so `estimated_pause_ms` is the real rebalance's commit
gap (rebalances.estimated_pause_ms) where the group did rebalance eagerly, else unknown. cooperative-sticky
pauses only what its first round revokes; a KIP-848 assignor only the partitions that move.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from schemas.whatif import REPLAYED_PARTITION
from transforms.gold.generations import REBALANCE
from transforms.gold.whatif_inputs import CONSUMER

EAGER_ASSIGNORS = ("range", "roundrobin", "sticky")
COOPERATIVE_STICKY = "cooperative-sticky"
SERVER_DEFAULT_ASSIGNOR = "uniform"  # what a KIP-848 group naming no assignor gets (group.consumer.assignors)
REPLAY = (*REBALANCE, "assignor")
PARTITION_KEY = ("topic", "partition")


def _sorted_rows(rows) -> F.Column:
    return F.array_sort(F.transform(rows, lambda r: F.struct(r["member_key"], r["topic"], r["partition"])))


def _movement_counts(inputs: DataFrame, replayed: DataFrame) -> DataFrame:
    """(rebalance, assignor) -> moved, newly assigned, unassigned and assigned partition counts."""
    before = inputs.select(*REBALANCE, F.inline("replay.previous_owners")).select(
        *REBALANCE, *PARTITION_KEY, F.col("member_key").alias("before_member_key")
    )
    before_per_assignor = before.join(replayed.select(*REPLAY), on=list(REBALANCE), how="inner")
    after = replayed.select(*REPLAY, F.inline("assignment")).select(
        *REPLAY, *PARTITION_KEY, F.col("member_key").alias("after_member_key")
    )
    paired = before_per_assignor.join(after, on=[*REPLAY, *PARTITION_KEY], how="full_outer")
    had, has = F.col("before_member_key").isNotNull(), F.col("after_member_key").isNotNull()
    is_moved = had & has & (F.col("before_member_key") != F.col("after_member_key"))
    return paired.groupBy(*REPLAY).agg(
        F.count_if(is_moved).cast("int").alias("moved_partition_count"),
        F.count_if(~had & has).cast("int").alias("newly_assigned_partition_count"),
        F.count_if(had & ~has).cast("int").alias("unassigned_partition_count"),
        F.count_if(has).cast("int").alias("assigned_partition_count"),
    )


def _member_counts(inputs: DataFrame, replayed: DataFrame) -> DataFrame:
    """(rebalance, assignor) -> member count, idle members and skew (idle members hold 0)."""
    members = inputs.select(*REBALANCE, F.explode("replay.members.member_key").alias("member_key"))
    held = (
        replayed.select(*REPLAY, F.explode("assignment.member_key").alias("member_key"))
        .groupBy(*REPLAY, "member_key")
        .agg(F.count(F.lit(1)).cast("int").alias("held"))
    )
    per_member = (
        members.join(replayed.select(*REPLAY), on=list(REBALANCE), how="inner")
        .join(held, on=[*REPLAY, "member_key"], how="left")
        .withColumn("held", F.coalesce("held", F.lit(0)))
    )
    return per_member.groupBy(*REPLAY).agg(
        F.count(F.lit(1)).cast("int").alias("member_count"),
        F.count_if(F.col("held") == 0).cast("int").alias("idle_member_count"),
        (F.max("held") - F.min("held")).cast("int").alias("skew"),
    )


def rebalance_whatif(inputs: DataFrame, replayed: DataFrame, rebalances: DataFrame) -> DataFrame:
    """replay inputs + replayed assignments (rebalance key, assignor, round_count, assignment, revoked)
    + gold rebalances -> gold `rebalance_whatif`."""
    actual = rebalances.select(
        *REBALANCE,
        "previous_generation",
        "completed_at",
        "rebalance_protocol",
        F.col("assignor").alias("actual_assignor"),
        "minimal_moves",
        "minimal_moves_method",
        F.col("estimated_pause_ms").alias("actual_pause_ms"),
        F.col("moved_partition_count").alias("actual_moved_partition_count"),
    )
    rows = (
        replayed.join(inputs.select(*REBALANCE, "group_protocol", "replay"), on=list(REBALANCE), how="inner")
        .join(actual, on=list(REBALANCE), how="inner")
        .join(_movement_counts(inputs, replayed), on=list(REPLAY), how="left")
        .join(_member_counts(inputs, replayed), on=list(REPLAY), how="left")
    )
    is_eager = F.col("assignor").isin(*EAGER_ASSIGNORS) & (F.col("group_protocol") != F.lit(CONSUMER))
    still_owned = F.size(F.flatten(F.col("replay.members.owned")))
    # A replay that moves nothing has no movement counts (a left join): zero moved, zero revoked.
    moved = F.coalesce("moved_partition_count", F.lit(0))
    revoked = (
        F.when(is_eager, still_owned)
        .when(F.col("assignor") == F.lit(COOPERATIVE_STICKY), F.size("revoked"))
        .otherwise(moved)
    )
    used = F.when(
        F.col("group_protocol") == F.lit(CONSUMER), F.coalesce("actual_assignor", F.lit(SERVER_DEFAULT_ASSIGNOR))
    )
    return rows.select(
        *REBALANCE,
        "previous_generation",
        "completed_at",
        "group_protocol",
        "actual_assignor",
        "assignor",
        (F.col("assignor") == F.coalesce(used, "actual_assignor")).alias("is_actual_assignor"),
        is_eager.alias("is_eager"),
        F.col("round_count").cast("int").alias("round_count"),
        "member_count",
        F.coalesce("assigned_partition_count", F.lit(0)).alias("assigned_partition_count"),
        moved.alias("moved_partition_count"),
        F.coalesce("newly_assigned_partition_count", F.lit(0)).alias("newly_assigned_partition_count"),
        F.coalesce("unassigned_partition_count", F.lit(0)).alias("unassigned_partition_count"),
        revoked.cast("int").alias("revoked_partition_count"),
        "minimal_moves",
        "minimal_moves_method",
        F.when(moved > 0, F.col("minimal_moves") / moved).otherwise(F.lit(1.0)).alias("stickiness"),
        "skew",
        "idle_member_count",
        F.when(is_eager & (F.col("rebalance_protocol") == F.lit("eager")), F.col("actual_pause_ms")).alias(
            "estimated_pause_ms"
        ),
        "actual_moved_partition_count",
        (_sorted_rows(F.col("assignment")) == _sorted_rows(F.col("replay.actual_assignment"))).alias(
            "is_same_as_actual"
        ),
        F.col("assignment").cast(ArrayType(REPLAYED_PARTITION)).alias("assignment"),
    )
