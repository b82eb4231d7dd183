"""Over-provisioned groups: gold `generation_capacity`, one row per generation of a consumer group with
members: who owns nothing, partitions per member, the share of members doing work, and since when the
group has been carrying idle members.

A member is idle when it owns no partition when the generation starts (classic: its assignment; KIP-848:
its current assignment as the epoch left it, not the target). Why, as far as the records tell:
- more_members_than_partitions: partitions of topics it subscribes to were assigned, all to others, and
  the generation has more members than assigned partitions;
- assignor_gave_none: the same, but with partitions enough for every member: what a cooperative
  rebalance's first round leaves a joining member with, or range over topics with fewer partitions than
  members; not over-provisioning;
- subscription_matches_nothing: no partition of any topic it subscribes to was assigned (a typo, a topic
  not created yet, a pattern that matches nothing);
- unknown: its subscription was not decoded.
Connect, share and streams groups are left out: their members own tasks or share partitions.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.generations import INCARNATION, REBALANCE
from transforms.gold.whatif_inputs import CLASSIC, CONSUMER, CONSUMER_PROTOCOL_TYPE, member_partitions

MORE_MEMBERS_THAN_PARTITIONS = "more_members_than_partitions"
ASSIGNOR_GAVE_NONE = "assignor_gave_none"
SUBSCRIPTION_MATCHES_NOTHING = "subscription_matches_nothing"
UNKNOWN = "unknown"


def _reason(subscribed: Column, assigned_topics: Column, too_many_members: Column) -> Column:
    has_subscription = F.size(F.coalesce(subscribed, F.array())) > 0
    return (
        F.when(~has_subscription, F.lit(UNKNOWN))
        .when(~F.arrays_overlap(subscribed, assigned_topics), F.lit(SUBSCRIPTION_MATCHES_NOTHING))
        .when(too_many_members, F.lit(MORE_MEMBERS_THAN_PARTITIONS))
        .otherwise(F.lit(ASSIGNOR_GAVE_NONE))
    )


def _idle_member(member: Column, assigned_topics: Column, too_many_members: Column) -> Column:
    return F.struct(
        member["member_id"].alias("member_id"),
        member["group_instance_id"].alias("group_instance_id"),
        member["client_id"].alias("client_id"),
        member["client_host"].alias("client_host"),
        member["subscribed_topics"].alias("subscribed_topics"),
        _reason(member["subscribed_topics"], assigned_topics, too_many_members).alias("reason"),
    )


def _with_idle_since(rows: DataFrame) -> DataFrame:
    """idle_since: the first generation of the unbroken run of generations with an idle member."""
    log_order = Window.partitionBy(*INCARNATION).orderBy("source_partition", "source_offset")
    runs = log_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_idle = F.col("idle_member_count") > 0
    in_run = Window.partitionBy(*INCARNATION, "run").orderBy("source_partition", "source_offset")
    return rows.withColumn("run", F.sum(F.when(is_idle, 0).otherwise(1)).over(runs)).withColumn(
        "idle_since",
        F.when(
            is_idle,
            F.min(F.when(is_idle, F.col("recorded_at"))).over(
                in_run.rowsBetween(Window.unboundedPreceding, Window.currentRow)
            ),
        ),
    )


def generation_capacity(generations: DataFrame) -> DataFrame:
    """gold generations -> gold `generation_capacity`."""
    log_order = Window.partitionBy(*INCARNATION).orderBy("source_partition", "source_offset")
    is_consumer_group = (F.col("group_protocol") == F.lit(CONSUMER)) | (
        (F.col("group_protocol") == F.lit(CLASSIC)) & (F.col("protocol_type") == F.lit(CONSUMER_PROTOCOL_TYPE))
    )
    members = F.coalesce(F.col("members"), F.array())
    counts = F.transform(members, lambda m: F.size(member_partitions(m["assigned_partitions"])))
    assigned_topics = F.array_distinct(
        F.flatten(
            F.transform(
                members, lambda m: F.transform(member_partitions(m["assigned_partitions"]), lambda p: p["topic"])
            )
        )
    )
    idle = F.filter(members, lambda m: F.size(member_partitions(m["assigned_partitions"])) == 0)
    too_many_members = F.size(members) > F.aggregate(counts, F.lit(0), lambda total, n: total + n)
    measured = (
        generations.withColumn("valid_until", F.lead("recorded_at").over(log_order))
        .where(F.col("generation").isNotNull() & is_consumer_group)
        .withColumns(
            {
                "counts": counts,
                "idle_members": F.transform(idle, lambda m: _idle_member(m, assigned_topics, too_many_members)),
            }
        )
        .withColumn("idle_member_count", F.size("idle_members"))
    )
    member_count = F.size("counts")
    busy = member_count - F.col("idle_member_count")
    return (
        _with_idle_since(measured)
        .where(member_count > 0)
        .select(
            *REBALANCE,
            "group_protocol",
            "recorded_at",
            "valid_until",
            member_count.alias("member_count"),
            F.aggregate("counts", F.lit(0), lambda total, n: total + n).alias("assigned_partition_count"),
            "idle_member_count",
            "idle_members",
            F.array_min("counts").alias("min_partitions_per_member"),
            F.array_max("counts").alias("max_partitions_per_member"),
            (F.aggregate("counts", F.lit(0), lambda total, n: total + n) / member_count).alias(
                "avg_partitions_per_member"
            ),
            (busy / member_count).alias("capacity_used"),
            "idle_since",
        )
    )
