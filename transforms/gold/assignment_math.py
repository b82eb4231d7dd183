"""Partition ownership before and after a rebalance: the minimal moves any balanced assignment needed,
and skew.

`partition_changes` pairs each partition's owner before and after a rebalance (a partition revoked and
assigned again in between is compared at the rebalance's two ends only, so it counts once).
Inputs are keyed by the rebalance (cluster, group_id, incarnation, generation = the generation it
produced): `changes`, one row per partition owned before or after (before_member_key and
after_member_key, either null, and is_forced), and `after_members` (member_key, subscribed_topics).
An owner is a `member_key` (group_instance_id for static members, else member_id).

Minimal moves. The partitions to place are those the rebalance assigned (the universe U). Members
with the same subscribed topics form a subscription class; a topic belongs to the one class that
subscribes to it. "Balanced" means each member of a class holds floor(N/M) or ceil(N/M) of the class's
N partitions (M members), counted over all its topics together (max - min <= 1). A partition that had
an owner before is a move unless it stays with that owner.

- One class (identical subscriptions): exact. Member i, holding k_i of its previous partitions, can
  keep at most min(k_i, t_i), t_i its target count; the r = N mod M larger targets (q + 1) go to the
  members with the most to keep (an exchange argument shows no balanced assignment keeps more).
  minimal = (partitions of U with a previous owner) - sum(min(k_i, t_i)).
- Several classes, each topic subscribed by one class only: the same, exactly, class by class.
- Classes sharing topics: a lower bound, the forced moves (the previous owner left the group or no
  longer subscribes to the topic); `minimal_moves_method` = 'lower_bound'.
- A partition held by several members after the rebalance (a share group with more members than
  partitions): balance is no longer one owner per partition, so also the lower bound.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.generations import INCARNATION, REBALANCE, member_key

METHOD_EXACT, METHOD_LOWER_BOUND = "exact", "lower_bound"


def class_key(subscribed_topics: Column) -> Column:
    return F.array_join(F.array_sort(F.coalesce(subscribed_topics, F.array())), ",")


def _classes(after_members: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(rebalance) -> member_classes map and class list; (rebalance, topic) -> covering classes, members."""
    members = after_members.withColumn("class_key", class_key(F.col("subscribed_topics")))
    by_group = members.groupBy(*REBALANCE).agg(
        F.map_from_entries(F.collect_list(F.struct("member_key", "class_key"))).alias("member_classes"),
        F.collect_list("class_key").alias("member_class_list"),
    )
    by_topic = (
        members.select(*REBALANCE, "class_key", F.explode(F.coalesce("subscribed_topics", F.array())).alias("topic"))
        .groupBy(*REBALANCE, "topic")
        .agg(F.collect_set("class_key").alias("covering"), F.count(F.lit(1)).alias("subscriber_count"))
    )
    return by_group, by_topic


def _with_topic_class(changes: DataFrame, after_members: DataFrame) -> DataFrame:
    """changes + topic_class (null when no single class covers the topic), member_classes, class_size."""
    by_group, by_topic = _classes(after_members)
    distinct_classes = F.array_distinct("member_class_list")
    topic_class = F.when(F.size(distinct_classes) == 1, distinct_classes[0]).when(
        F.size(F.coalesce("covering", F.array())) == 1, F.col("covering")[0]
    )
    return (
        changes.join(by_group, on=list(REBALANCE), how="left")
        .join(by_topic, on=[*REBALANCE, "topic"], how="left")
        .withColumn("topic_class", topic_class)
        .withColumn("class_size", F.size(F.filter("member_class_list", lambda c: c == F.col("topic_class"))))
    )


def minimal_moves(changes: DataFrame, after_members: DataFrame) -> DataFrame:
    """(rebalance) -> minimal_moves, minimal_moves_method."""
    owners_after = Window.partitionBy(*REBALANCE, "topic", "partition")
    universe = _with_topic_class(changes.where(F.col("after_member_key").isNotNull()), after_members).withColumn(
        "is_shared", F.count(F.lit(1)).over(owners_after) > 1
    )
    is_class_member = F.try_element_at("member_classes", F.col("before_member_key")) == F.col("topic_class")
    owners = universe.groupBy(
        *REBALANCE,
        "topic_class",
        "class_size",
        "before_member_key",
        F.coalesce(is_class_member, F.lit(False)).alias("keeps"),
    ).agg(
        F.count(F.lit(1)).alias("c"),
        F.sum(F.col("is_forced").cast("int")).alias("forced"),
        F.max("is_shared").alias("is_shared"),
    )
    in_class = Window.partitionBy(*REBALANCE, "topic_class")
    n = F.sum("c").over(in_class.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing))
    k = F.when(F.col("keeps"), F.col("c")).otherwise(F.lit(0))
    rank = F.row_number().over(in_class.orderBy(k.desc(), F.col("before_member_key")))
    target = F.floor(n / F.col("class_size")) + F.when(rank <= n % F.col("class_size"), 1).otherwise(0)
    kept = F.when(F.col("class_size") > 0, F.least(k, target)).otherwise(F.lit(0))
    is_exact = F.bool_and(F.col("topic_class").isNotNull() & (F.col("class_size") > 0) & ~F.col("is_shared"))
    prior = F.sum(F.when(F.col("before_member_key").isNotNull(), F.col("c")).otherwise(0))
    return (
        owners.withColumn("kept", kept)
        .groupBy(*REBALANCE)
        .agg(is_exact.alias("is_exact"), (prior - F.sum("kept")).alias("exact"), F.sum("forced").alias("forced"))
        .select(
            *REBALANCE,
            F.when(F.col("is_exact"), F.col("exact")).otherwise(F.col("forced")).cast("int").alias("minimal_moves"),
            F.when(F.col("is_exact"), F.lit(METHOD_EXACT))
            .otherwise(F.lit(METHOD_LOWER_BOUND))
            .alias("minimal_moves_method"),
        )
    )


def skew(changes: DataFrame, after_members: DataFrame) -> DataFrame:
    """(rebalance) -> skew (max - min partitions per member, all topics) and skew_by_topic.

    Members holding none count as 0. Per topic, the members subscribed to it count (all members when
    none names it, e.g. an unresolved topic id).
    """
    member_count = after_members.groupBy(*REBALANCE).agg(F.count(F.lit(1)).alias("member_count"))
    _, by_topic = _classes(after_members)
    per_member_topic = (
        changes.where(F.col("after_member_key").isNotNull())
        .groupBy(*REBALANCE, "topic", "after_member_key")
        .agg(F.count(F.lit(1)).alias("n"))
    )
    per_topic = (
        per_member_topic.groupBy(*REBALANCE, "topic")
        .agg(F.max("n").alias("most"), F.min("n").alias("least"), F.count(F.lit(1)).alias("holders"))
        .join(by_topic, on=[*REBALANCE, "topic"], how="left")
        .join(member_count, on=list(REBALANCE), how="inner")
    )
    eligible = F.coalesce("subscriber_count", "member_count")
    topic_skew = F.col("most") - F.when(F.col("holders") >= eligible, F.col("least")).otherwise(F.lit(0))
    by_topic_map = per_topic.groupBy(*REBALANCE).agg(
        F.map_from_entries(F.collect_list(F.struct("topic", topic_skew.cast("int")))).alias("skew_by_topic")
    )
    per_member = per_member_topic.groupBy(*REBALANCE, "after_member_key").agg(F.sum("n").alias("n"))
    overall = (
        per_member.groupBy(*REBALANCE)
        .agg(F.max("n").alias("most"), F.min("n").alias("least"), F.count(F.lit(1)).alias("holders"))
        .join(member_count, on=list(REBALANCE), how="inner")
        .select(
            *REBALANCE,
            (F.col("most") - F.when(F.col("holders") >= F.col("member_count"), F.col("least")).otherwise(0))
            .cast("int")
            .alias("skew"),
        )
    )
    return overall.join(by_topic_map, on=list(REBALANCE), how="left")


def _paired_owners(before: DataFrame, after: DataFrame, owner: list[str]) -> DataFrame:
    """(rebalance, topic, partition) owners before and after, paired: an owner that keeps the partition
    with itself, then the owners that lost it with those that took it, in member-key order, one to one
    (the rest alone). A partition has one owner at a time except in a share group with more members than
    partitions, where several members share it: pairing owner to owner counts a move per owner that
    changed, not one per combination."""
    on_partition = [*REBALANCE, "topic", "partition"]
    same = before.withColumn("_owner", F.col("before_member_key")).join(
        after.withColumn("_owner", F.col("after_member_key")), on=[*on_partition, "_owner"], how="full"
    )
    is_kept = F.col("before_member_key").isNotNull() & F.col("after_member_key").isNotNull()
    is_leaver = F.col("after_member_key").isNull()
    rank = F.row_number().over(Window.partitionBy(*on_partition, is_leaver).orderBy("_owner"))
    changing = same.where(~is_kept).withColumn("_rank", rank)
    paired = (
        changing.where(is_leaver)
        .select(*on_partition, "_rank", *[f"before_{name}" for name in owner])
        .join(
            changing.where(~is_leaver).select(*on_partition, "_rank", *[f"after_{name}" for name in owner]),
            on=[*on_partition, "_rank"],
            how="full",
        )
    )
    return same.where(is_kept).drop("_owner").unionByName(paired.drop("_rank"))


def partition_changes(rebalances: DataFrame, assignments: DataFrame) -> DataFrame:
    """One row per (rebalance, topic, partition, owner pair) owned before or after, with both owners."""
    owner = ["member_key", "member_id", "group_instance_id", "client_id", "client_host"]
    keys = rebalances.select(
        *REBALANCE,
        "before_generation",
        F.map_from_entries(
            F.transform("members", lambda m: F.struct(member_key(m), F.coalesce(m["subscribed_topics"], F.array())))
        ).alias("after_subscriptions"),
    )
    before = keys.join(
        assignments.select(
            *INCARNATION,
            F.col("generation").alias("before_generation"),
            "topic",
            "partition",
            *[F.col(name).alias(f"before_{name}") for name in owner],
        ),
        on=[*INCARNATION, "before_generation"],
        how="inner",
    ).drop("before_generation", "after_subscriptions")
    after = assignments.join(keys.select(*REBALANCE), on=list(REBALANCE), how="inner").select(
        *REBALANCE, "topic", "partition", *[F.col(name).alias(f"after_{name}") for name in owner]
    )
    subscriptions = F.try_element_at("after_subscriptions", F.col("before_member_key"))
    is_forced = F.col("before_member_key").isNotNull() & (
        subscriptions.isNull() | ((F.size(subscriptions) > 0) & ~F.array_contains(subscriptions, F.col("topic")))
    )
    per_topic = Window.partitionBy(*REBALANCE, "topic").rowsBetween(
        Window.unboundedPreceding, Window.unboundedFollowing
    )
    return (
        _paired_owners(before, after, owner)
        .join(keys, on=list(REBALANCE), how="inner")
        .withColumns(
            {
                "is_moved": F.coalesce(F.col("before_member_key") != F.col("after_member_key"), F.lit(False)),
                "is_forced": F.coalesce(is_forced, F.lit(False)),
                "is_topic_known_before": F.max(F.col("before_member_key").isNotNull()).over(per_topic),
                # Owned before by a member that stays and still subscribes to it, owned by nobody after, and
                # so is every partition of its topic: the topic is gone (Kafka removes partitions only by
                # deleting their topic). A partition merely between owners leaves the rest of its topic owned.
                "is_topic_gone": ~F.max(F.col("after_member_key").isNotNull()).over(per_topic)
                & F.max(F.col("before_member_key").isNotNull() & ~F.coalesce(is_forced, F.lit(False))).over(per_topic),
            }
        )
        .drop("after_subscriptions")
    )


def movement_counts(changes: DataFrame) -> DataFrame:
    is_new = F.col("before_member_key").isNull() & F.col("after_member_key").isNotNull()
    return changes.groupBy(*REBALANCE).agg(
        F.sum(F.col("is_moved").cast("int")).cast("int").alias("moved_partition_count"),
        F.sum(is_new.cast("int")).cast("int").alias("newly_assigned_partition_count"),
        F.sum((F.col("before_member_key").isNotNull() & F.col("after_member_key").isNull()).cast("int"))
        .cast("int")
        .alias("unassigned_partition_count"),
        F.max(is_new & F.col("is_topic_known_before")).alias("has_partitions_added"),
        F.max(F.col("is_topic_gone")).alias("has_partitions_removed"),
    )
