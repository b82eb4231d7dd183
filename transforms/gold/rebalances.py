"""Logical rebalances, partition movements and rebalance frequency, from generations and assignments.

Grain of `rebalances`: one logical rebalance, keyed by the generation it produced. Consecutive
generations are one logical rebalance when the earlier one is a cooperative *revoke round*: its
assignor is incremental (cooperative-sticky; Connect's compatible/sessioned), it leaves unassigned some
partitions whose owner is still a member (revoked, to be handed over), and the next generation follows
within the members' rebalance timeout. Movement is counted between the rebalance's endpoints, so a
partition revoked in the first round and assigned in the second counts once. A static member replaced
within its session timeout writes no new generation and is no rebalance. KIP-848 target-assignment
epochs are each one (incremental) rebalance, except an epoch with a member whose topic regex the
coordinator has not resolved yet (it subscribes to no topic name): the join completes in the next
epoch, which resolves it, so the two are one rebalance, as the member sees it. Share-group epochs
(rebalance_protocol 'share') likewise, except an epoch that waits for share partitions to be initialised
(a join epoch that targets nothing, or one that saw a topic grow and targets what the epoch before did):
it and the next epoch, same members, are one rebalance.
Streams-group epochs too, except an epoch that targets no active task while the coordinator has not yet
validated the group's topology (the group is NOT_READY until its internal topics exist; Kafka 4.3 writes
that epoch's empty target, 4.2 wrote none): it and the next epoch, same members, are one rebalance.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from schemas import gold
from transforms.gold import assignment_math, departures
from transforms.gold.generations import (
    GROUP_PROTOCOL_CONSUMER,
    GROUP_PROTOCOL_SHARE,
    GROUP_PROTOCOL_STREAMS,
    INCARNATION,
    REBALANCE,
    STATE_DELETED,
    log_window,
    member_key,
)

PROTOCOL_EAGER = departures.PROTOCOL_EAGER
PROTOCOL_COOPERATIVE, PROTOCOL_CONSUMER, PROTOCOL_SHARE = "cooperative", "consumer", "share"
PROTOCOL_STREAMS = "streams"
COOPERATIVE_ASSIGNORS = ("cooperative-sticky", "compatible", "sessioned")  # consumer; Connect (KIP-415, KIP-507)


def rebalance_protocol(group_protocol: Column, assignor: Column) -> Column:
    return (
        F.when(group_protocol == F.lit(GROUP_PROTOCOL_CONSUMER), F.lit(PROTOCOL_CONSUMER))
        .when(group_protocol == F.lit(GROUP_PROTOCOL_SHARE), F.lit(PROTOCOL_SHARE))
        .when(group_protocol == F.lit(GROUP_PROTOCOL_STREAMS), F.lit(PROTOCOL_STREAMS))
        .when(assignor.isin(*COOPERATIVE_ASSIGNORS), F.lit(PROTOCOL_COOPERATIVE))
        .otherwise(F.lit(PROTOCOL_EAGER))
    )


def _member_keys(members: Column) -> Column:
    return F.transform(members, member_key)


def _revoke_rounds(generations: DataFrame, assignments: DataFrame, round_gap_fallback_ms: int) -> DataFrame:
    """Live generation rows + is_revoke_round (the round does not complete its rebalance)."""
    live = generations.where(F.col("state") != F.lit(STATE_DELETED))
    previous_owners = assignments.select(
        *INCARNATION, F.col("generation").alias("previous_generation"), "topic", "partition", "member_key"
    )
    still_assigned = assignments.select(*REBALANCE, "topic", "partition", F.lit(True).alias("is_assigned"))
    pending = (
        live.select(*REBALANCE, "previous_generation", _member_keys(F.col("members")).alias("keys"))
        .join(previous_owners, on=[*INCARNATION, "previous_generation"], how="inner")
        .where(F.array_contains("keys", F.col("member_key")))
        .join(still_assigned, on=[*REBALANCE, "topic", "partition"], how="left")
        .where(F.col("is_assigned").isNull())
        .groupBy(*REBALANCE)
        .agg(F.count(F.lit(1)).alias("revoked_pending"))
    )
    order = log_window(*INCARNATION)
    round_gap_ms = F.coalesce(
        F.array_max(F.transform("members", lambda m: m["rebalance_timeout_ms"])), F.lit(round_gap_fallback_ms)
    )
    follows_in_time = (F.unix_millis(F.lead("recorded_at").over(order)) - F.unix_millis("recorded_at")) <= round_gap_ms
    protocol = rebalance_protocol(F.col("group_protocol"), F.col("assignor"))
    awaits_regex = F.exists("members", lambda m: F.size(F.coalesce(m["subscribed_topics"], F.array())) == 0)
    targets_nothing = F.forall("members", lambda m: F.size(F.coalesce(m["target_partitions"], F.array())) == 0)
    same_members_next = (
        F.lead(F.array_sort(_member_keys(F.col("members"))))
        .over(order)
        .eqNullSafe(F.array_sort(_member_keys(F.col("members"))))
    )
    # A share group's coordinator assigns a topic's partitions only once the share coordinator has
    # initialised their state (type 15 moves them from initializing to initialized): the epoch a member
    # joins in can target nothing, and one that sees a topic's new partitions targets what the previous
    # epoch did; the next, with the same members, assigns them.
    subscribes = F.forall("members", lambda m: F.size(F.coalesce(m["subscribed_topics"], F.array())) > 0)
    targets = F.array_sort(F.transform("members", lambda m: F.struct(member_key(m), m["target_partitions"])))
    targets_as_before = F.lag(targets).over(order).eqNullSafe(targets)
    awaits_share_partitions = (targets_nothing | targets_as_before) & subscribes & same_members_next
    # A streams group assigns tasks only once its topology is validated (the coordinator creates the
    # internal topics first); a streams member's target partitions are its active tasks.
    awaits_topology = targets_nothing & same_members_next
    is_revoke_round = (
        ((protocol == F.lit(PROTOCOL_COOPERATIVE)) & (F.coalesce("revoked_pending", F.lit(0)) > 0))
        | ((protocol == F.lit(PROTOCOL_CONSUMER)) & awaits_regex)
        | ((protocol == F.lit(PROTOCOL_SHARE)) & (F.size("members") > 0) & awaits_share_partitions)
        | ((protocol == F.lit(PROTOCOL_STREAMS)) & (F.size("members") > 0) & awaits_topology)
    ) & F.coalesce(follows_in_time, F.lit(False))
    return live.join(pending, on=list(REBALANCE), how="left").withColumn("is_revoke_round", is_revoke_round)


def _logical_rebalances(rounds: DataFrame) -> DataFrame:
    """One row per closing generation, with its first round and the previous closing generation."""
    closes_before = F.coalesce(
        F.sum((~F.col("is_revoke_round")).cast("int")).over(
            log_window(*INCARNATION).rowsBetween(Window.unboundedPreceding, -1)
        ),
        F.lit(0),
    )
    numbered = rounds.withColumn("logical", closes_before)
    first_round = F.struct(
        F.col("generation").alias("first_round_generation"),
        F.coalesce("join_completed_at", "recorded_at").alias("join_completed_at"),
    )
    spans = numbered.groupBy(*INCARNATION, "logical").agg(
        F.min_by(first_round, F.col("source_offset")).alias("first"),
        F.count(F.lit(1)).cast("int").alias("round_count"),
        F.sum(F.coalesce("skipped_generation_count", F.lit(0))).cast("int").alias("failed_round_count"),
    )
    closing = numbered.where(~F.col("is_revoke_round")).join(spans, on=[*INCARNATION, "logical"], how="inner")
    before = log_window(*INCARNATION)
    return closing.select(
        "*",
        F.lag("generation").over(before).alias("before_generation"),
        F.coalesce(F.lag("members").over(before), F.array().cast(closing.schema["members"].dataType)).alias(
            "before_members"
        ),
        F.lag("last_recorded_at").over(before).alias("before_last_recorded_at"),
        F.lag("recorded_at").over(before).alias("before_recorded_at"),
        F.lag("assignor").over(before).alias("before_assignor"),
    ).where(F.col("before_generation").isNotNull() | (F.size("members") > 0))


def _membership(rebalances: DataFrame) -> DataFrame:
    """Adds members_joined, members_left (as members), static_replacements, is_subscription_changed."""
    before_keys, after_keys = _member_keys(F.col("before_members")), _member_keys(F.col("members"))
    joined = F.filter("members", lambda m: ~F.array_contains(before_keys, member_key(m)))
    replacements = F.transform(
        "members",
        lambda m: F.struct(
            m["group_instance_id"].alias("group_instance_id"),
            F.try_element_at(
                F.filter("before_members", lambda b: b["group_instance_id"] == m["group_instance_id"]), F.lit(1)
            )["member_id"].alias("previous_member_id"),
            m["member_id"].alias("member_id"),
            F.col("recorded_at").alias("replaced_at"),
        ),
    )
    changed = F.exists(
        "members",
        lambda m: F.exists(
            "before_members",
            lambda b: (
                (member_key(b) == member_key(m))
                & (
                    assignment_math.class_key(b["subscribed_topics"])
                    != assignment_math.class_key(m["subscribed_topics"])
                )
            ),
        ),
    )
    return rebalances.withColumns(
        {
            "members_joined": F.transform(
                joined, lambda m: F.struct(*[m[f.name].alias(f.name) for f in gold.MEMBER_REF.fields])
            ),
            "left_members": F.filter("before_members", lambda b: ~F.array_contains(after_keys, member_key(b))),
            "static_replacements": F.filter(
                replacements,
                lambda r: (
                    r["group_instance_id"].isNotNull()
                    & r["previous_member_id"].isNotNull()
                    & (r["previous_member_id"] != r["member_id"])
                ),
            ),
            "is_subscription_changed": changed,
        }
    )


def _causes(rebalances: DataFrame) -> Column:
    """Every cause the records show, most telling first."""
    hows = F.transform("members_left", lambda d: d["how"])
    candidates = [
        (F.lit("group_emptied"), (F.size("members") == 0) & (F.size("before_members") > 0)),
        (F.lit("member_left_after_timeout"), F.array_contains(hows, departures.HOW_TIMEOUT)),
        (F.lit("member_left_cleanly"), F.array_contains(hows, departures.HOW_CLEAN)),
        (F.lit("member_left"), F.array_contains(hows, departures.HOW_UNKNOWN)),
        (F.lit("member_joined"), F.size("members_joined") > 0),
        (F.lit("subscription_changed"), F.col("is_subscription_changed")),
        (F.lit("partitions_added"), F.coalesce("has_partitions_added", F.lit(False))),
        (F.lit("partitions_removed"), F.coalesce("has_partitions_removed", F.lit(False))),
    ]
    found = F.filter(F.array(*[F.when(condition, name) for name, condition in candidates]), lambda c: c.isNotNull())
    return F.when(F.size(found) > 0, found).otherwise(F.array(F.lit("unknown")))


def logical_rebalances(generations: DataFrame, assignments: DataFrame, round_gap_fallback_ms: int) -> DataFrame:
    """generations + generation_assignments -> one framed row per logical rebalance (internal shape:
    the closing generation's columns, its first round, the previous closing generation, membership)."""
    framed = _logical_rebalances(_revoke_rounds(generations, assignments, round_gap_fallback_ms))
    first_round = {
        "first_round_generation": F.col("first.first_round_generation"),
        "join_completed_at": F.col("first.join_completed_at"),  # the join phase that started the rebalance
    }
    protocol = rebalance_protocol(F.col("group_protocol"), F.coalesce("assignor", "before_assignor"))
    return _membership(framed.withColumns(first_round).drop("first")).withColumn("rebalance_protocol", protocol)


def rebalances(
    framed: DataFrame,
    changes: DataFrame,
    assignments: DataFrame,
    commits: DataFrame,
    member_own_records: DataFrame,
    standby_moves: DataFrame,
    *,
    departure_slack_ms: int,
    default_session_timeout_ms: int,
    default_heartbeat_interval_ms: int,
) -> DataFrame:
    """framed (`logical_rebalances`) + changes (`assignment_math.partition_changes`) + assignments + counted commits
    + members' own records (`epochs.member_own_records`) + streams groups' standby moves
    (`streams_members.standby_task_moves`) -> gold `rebalances`."""
    after_members = framed.select(*REBALANCE, F.explode("members").alias("m")).select(
        *REBALANCE, member_key(F.col("m")).alias("member_key"), F.col("m.subscribed_topics").alias("subscribed_topics")
    )
    no_departures = F.array().cast(gold.rebalances_schema["members_left"].dataType)
    left = departures.members_left(
        framed,
        assignments,
        commits,
        member_own_records,
        departure_slack_ms,
        default_session_timeout_ms,
        default_heartbeat_interval_ms,
    )
    enriched = (
        framed.join(left, on=list(REBALANCE), how="left")
        .withColumn("members_left", F.coalesce("members_left", no_departures))
        .join(departures.pause_estimates(framed, commits), on=list(REBALANCE), how="left")
        .join(assignment_math.movement_counts(changes), on=list(REBALANCE), how="left")
        .join(assignment_math.minimal_moves(changes, after_members), on=list(REBALANCE), how="left")
        .join(assignment_math.skew(changes, after_members), on=list(REBALANCE), how="left")
        .join(standby_moves, on=list(REBALANCE), how="left")
    )
    moved = F.coalesce("moved_partition_count", F.lit(0))
    minimal = F.coalesce("minimal_moves", F.lit(0))
    causes = _causes(enriched)
    has_members = F.size("members") > 0
    return enriched.select(
        *REBALANCE,
        F.col("before_generation").alias("previous_generation"),
        "first_round_generation",
        "group_protocol",
        "rebalance_protocol",
        "assignor",
        "join_completed_at",
        F.col("recorded_at").alias("completed_at"),
        "round_count",
        "failed_round_count",
        F.size("before_members").alias("member_count_before"),
        F.size("members").alias("member_count_after"),
        "members_joined",
        "members_left",
        "static_replacements",
        causes[0].alias("cause"),
        causes.alias("causes"),
        moved.alias("moved_partition_count"),
        F.coalesce("newly_assigned_partition_count", F.lit(0)).alias("newly_assigned_partition_count"),
        F.coalesce("unassigned_partition_count", F.lit(0)).alias("unassigned_partition_count"),
        minimal.alias("minimal_moves"),
        F.coalesce("minimal_moves_method", F.lit(assignment_math.METHOD_EXACT)).alias("minimal_moves_method"),
        F.when(moved > 0, minimal / moved).otherwise(F.lit(1.0)).alias("stickiness"),
        F.when(has_members, F.coalesce("skew", F.lit(0))).alias("skew"),
        F.when(has_members, F.coalesce("skew_by_topic", F.create_map().cast("map<string,int>"))).alias("skew_by_topic"),
        "estimated_pause_ms",
        "pause_estimate_method",
        "moved_standby_task_count",
    )


def partition_movements(framed: DataFrame, changes: DataFrame) -> DataFrame:
    """framed + changes -> gold `partition_movements`: one row per partition that changed owner."""
    owner = ("member_id", "group_instance_id", "client_id", "client_host")
    times = framed.select(*REBALANCE, F.col("recorded_at").alias("completed_at"))
    return (
        changes.where(F.col("is_moved"))
        .join(times, on=list(REBALANCE), how="inner")
        .select(
            *REBALANCE,
            F.col("before_generation").alias("previous_generation"),
            "completed_at",
            "topic",
            "partition",
            *[F.col(f"before_{name}").alias(f"from_{name}") for name in owner],
            *[F.col(f"after_{name}").alias(f"to_{name}") for name in owner],
            "is_forced",
        )
    )
