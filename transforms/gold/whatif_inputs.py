"""What each logical rebalance gave Kafka's assignors to work with: the input of the what-if replay.

Grain: one row per logical rebalance of a consumer group with members after it: classic groups of
protocol type `consumer` and KIP-848 `consumer` groups (connect, share and streams groups have other
assignors). `replay` holds what a group leader (classic) or the coordinator (KIP-848) handed its assignor:

- members: those of the generation the rebalance produced, with rack and subscribed topics, each under
  two names. `member_id` is the one the assignor sees: a Java leader keys its GroupSubscription by
  member id (ConsumerCoordinator.onLeaderElected) and the KIP-848 coordinator its members, and the sticky
  assignors break ties on that key. `member_key` (group_instance_id when static, else member_id) matches
  the member with what it held before, since a static member rejoins under a new member id, and names it
  in the output rows. A member whose subscription was not decoded (null) subscribes to the topics it was
  given: the only subscription the records imply. A decoded empty one is kept: the member subscribed to
  nothing.
- owned: what the member held in the generation before (classic: its assignment; KIP-848: its target
  assignment, which is what the coordinator's assignor is given), with that generation's number.
- topics: each topic any member held before or after, with its partition count taken as the highest
  partition held + 1 (the records name no partition counts; a partition never assigned is not seen).

`previous_owners` (every member before, departed ones too) and `actual_assignment` (what the group got)
ride along for the counts in transforms/gold/whatif.py; the replay ignores them.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from transforms.gold.generations import INCARNATION, REBALANCE, member_key

CLASSIC, CONSUMER = "classic", "consumer"
CONSUMER_PROTOCOL_TYPE = "consumer"


def member_partitions(assigned: Column) -> Column:
    """ASSIGNED_PARTITIONS -> array<struct(topic, partition, topic_id)>, one entry per partition."""
    return F.flatten(
        F.transform(
            F.coalesce(assigned, F.array()),
            lambda entry: F.transform(
                F.coalesce(entry["partitions"], F.array()),
                lambda number: F.struct(
                    entry["topic"].alias("topic"), number.alias("partition"), entry["topic_id"].alias("topic_id")
                ),
            ),
        )
    )


def held(member: Column, group_protocol: Column) -> Column:
    """What the assignor is told a member holds: KIP-848 its target, classic its assignment."""
    target = F.when(group_protocol == F.lit(CONSUMER), member["target_partitions"])
    return member_partitions(F.coalesce(target, member["assigned_partitions"]))


def _owner_rows(members: Column, group_protocol: Column) -> Column:
    """members -> array<struct(member_key, topic, partition)> of everything they hold."""
    return F.flatten(
        F.transform(
            F.coalesce(members, F.array()),
            lambda member: F.transform(
                held(member, group_protocol),
                lambda p: F.struct(
                    member_key(member).alias("member_key"), p["topic"].alias("topic"), p["partition"].alias("partition")
                ),
            ),
        )
    )


def _subscription(member: Column, group_protocol: Column) -> Column:
    given = F.array_distinct(F.transform(held(member, group_protocol), lambda p: p["topic"]))
    return F.array_sort(F.coalesce(member["subscribed_topics"], given))


def _replay_member(
    member: Column, before_members: Column, previous_generation: Column, group_protocol: Column
) -> Column:
    key = member_key(member)
    # looked up by filter, not a map: a key held twice must not fail the run (maps refuse duplicate keys)
    same_owner = F.filter(before_members, lambda before: member_key(before) == key)
    owned = F.flatten(
        F.transform(
            same_owner,
            lambda before: F.transform(
                held(before, group_protocol),
                lambda p: F.struct(p["topic"].alias("topic"), p["partition"].alias("partition")),
            ),
        )
    )
    return F.struct(
        key.alias("member_key"),
        member["member_id"].alias("member_id"),
        member["group_instance_id"].alias("instance_id"),
        member["rack_id"].alias("rack_id"),
        _subscription(member, group_protocol).alias("topics"),
        F.when(F.size(same_owner) > 0, previous_generation).alias("generation"),
        owned.alias("owned"),
    )


def _topics(before_members: Column, members: Column, group_protocol: Column) -> Column:
    """array<struct(topic, partition_count, topic_id)> of every topic held before or after."""
    everything = F.flatten(
        F.transform(
            F.concat(F.coalesce(before_members, F.array()), F.coalesce(members, F.array())),
            lambda member: F.concat(held(member, group_protocol), member_partitions(member["assigned_partitions"])),
        )
    )
    names = F.array_sort(F.array_distinct(F.transform(everything, lambda p: p["topic"])))
    return F.transform(
        names,
        lambda name: F.struct(
            name.alias("topic"),
            (
                F.array_max(F.transform(F.filter(everything, lambda p: p["topic"] == name), lambda p: p["partition"]))
                + 1
            ).alias("partition_count"),
            F.array_max(F.transform(F.filter(everything, lambda p: p["topic"] == name), lambda p: p["topic_id"])).alias(
                "topic_id"
            ),
        ),
    )


def replay_inputs(rebalances: DataFrame, generations: DataFrame) -> DataFrame:
    """gold rebalances + generations -> (rebalance key, group_protocol, replay, replay_json)."""
    is_replayed = (F.col("group_protocol") == F.lit(CONSUMER)) | (
        (F.col("group_protocol") == F.lit(CLASSIC)) & (F.col("protocol_type") == F.lit(CONSUMER_PROTOCOL_TYPE))
    )
    after = generations.select(*REBALANCE, "protocol_type", "members")
    before = generations.select(
        *INCARNATION, F.col("generation").alias("previous_generation"), F.col("members").alias("before_members")
    )
    protocol = F.col("group_protocol")
    joined = (
        rebalances.select(*REBALANCE, "previous_generation", "group_protocol")
        .join(after, on=list(REBALANCE), how="inner")
        .where(is_replayed & (F.size("members") > 0))
        .join(before, on=[*INCARNATION, "previous_generation"], how="left")
    )
    replay = F.struct(
        F.struct(*REBALANCE).alias("key"),
        protocol.alias("group_protocol"),
        F.col("group_id"),
        _topics(F.col("before_members"), F.col("members"), protocol).alias("topics"),
        F.transform(
            "members",
            lambda m: _replay_member(
                m, F.coalesce("before_members", F.array()), F.col("previous_generation"), protocol
            ),
        ).alias("members"),
        _owner_rows(F.col("before_members"), protocol).alias("previous_owners"),
        _owner_rows(F.col("members"), protocol).alias("actual_assignment"),
    )
    return joined.select(*REBALANCE, "group_protocol", replay.alias("replay")).withColumn(
        "replay_json", F.to_json("replay")
    )
