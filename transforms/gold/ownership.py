"""KIP-848 partition ownership from members' current assignments (record type 8), not from the target.

The target assignment (type 7) is what the coordinator wants; a member owns a partition from the type 8
record that first holds it until the member's next type 8 record that no longer does (or its tombstone).
A partition pending revocation (partitionsPendingRevocation) is still owned: the member has not released
it yet. So a newcomer targeted a crashed member's partitions owns nothing until that member is fenced at
its session timeout, however early the target names it.

An epoch's ownership is each member's current assignment as it last stood before the next target epoch
(the next type 6 record; the latest record for the current epoch): where the epoch's reconciliation got
to. Grain of `owned_partitions`: one row per (type 8 record, topic id, partition) the record holds,
with the ownership interval it belongs to (owned_from, owned_until; owned_until null while held).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.generations import INCARNATION

RECORD_CURRENT_MEMBER = 8
MEMBER_STATE_STABLE = 0  # type 8/14 State: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS
MEMBER = (*INCARNATION, "member_id")
_AFTER_EVERY_RECORD = 2**63 - 1  # the last epoch ends after the member's every record
# A frame's first type 8 record of a member holds partitions since before the frame: when each was taken.
CARRIED_OWNED_FROM = "carried_owned_from"
CARRIED_TYPE = "array<struct<topic_id:string,partition:int,owned_from:timestamp>>"
# A frame's record before its anchor that counts only as a reconciliation (with_reconciliation), not as a
# state of its member's assignment.
REACH_ONLY = "reach_only"


def owned_by() -> Column:
    """A type 8 record's owned partitions (topic-id shape): its assignment and those pending revocation."""
    return F.concat(
        F.coalesce("assigned_partitions", F.array()), F.coalesce("partitions_pending_revocation", F.array())
    )


def _member_records(records: DataFrame) -> DataFrame:
    """Every type 8 record (tombstones too), numbered in log order per member (`seq`), with the starts of
    its holdings carried from before a frame (CARRIED_OWNED_FROM, epoch_frames.py; null elsewhere)."""
    in_member_order = Window.partitionBy(*MEMBER).orderBy("source_offset")
    carried = F.col(CARRIED_OWNED_FROM) if CARRIED_OWNED_FROM in records.columns else F.lit(None)
    is_state = F.col("record_type") == F.lit(RECORD_CURRENT_MEMBER)
    if REACH_ONLY in records.columns:
        is_state = is_state & ~F.coalesce(F.col(REACH_ONLY), F.lit(False))
    return records.where(is_state).select(
        *MEMBER,
        "source_offset",
        "record_at",
        "is_tombstone",
        F.row_number().over(in_member_order).alias("seq"),
        F.when(~F.col("is_tombstone"), owned_by()).alias("owned"),
        carried.cast(CARRIED_TYPE).alias(CARRIED_OWNED_FROM),
    )


def owned_partitions(records: DataFrame) -> DataFrame:
    """consumer_group_records with incarnation -> one row per (type 8 record, topic_id, partition) it holds:
    member_id, seq, source_offset, owned_from (the record that started this holding), owned_until (the
    member's first later record without it, or its tombstone; null while held)."""
    states = _member_records(records)
    carried = F.try_element_at(
        F.filter(
            F.col(CARRIED_OWNED_FROM),
            lambda held: (held["topic_id"] == F.col("topic_id")) & (held["partition"] == F.col("partition")),
        ),
        F.lit(1),
    )["owned_from"]
    held = (
        states.select(*MEMBER, "seq", "record_at", CARRIED_OWNED_FROM, F.explode("owned").alias("tp"))
        .select(
            *MEMBER,
            "seq",
            "record_at",
            CARRIED_OWNED_FROM,
            "tp.topic_id",
            F.explode("tp.partitions").alias("partition"),
        )
        .select(*MEMBER, "seq", "topic_id", "partition", F.coalesce(carried, "record_at").alias("held_from"))
        .distinct()  # a partition is never both assigned and pending; this only guards the interval math
    )
    per_partition = Window.partitionBy(*MEMBER, "topic_id", "partition").orderBy("seq")
    is_start = F.coalesce(F.lag("seq").over(per_partition) != F.col("seq") - 1, F.lit(True))
    interval = Window.partitionBy(*MEMBER, "topic_id", "partition", "holding").rowsBetween(
        Window.unboundedPreceding, Window.unboundedFollowing
    )
    ends = states.select(*MEMBER, (F.col("seq") - 1).alias("last_seq"), F.col("record_at").alias("owned_until"))
    return (
        held.withColumn(
            "holding", F.sum(is_start.cast("int")).over(per_partition.rowsBetween(Window.unboundedPreceding, 0))
        )
        .withColumns({"owned_from": F.min("held_from").over(interval), "last_seq": F.max("seq").over(interval)})
        .join(ends, on=[*MEMBER, "last_seq"], how="left")
        .join(states.select(*MEMBER, "seq", "source_offset"), on=[*MEMBER, "seq"], how="inner")
        .select(*MEMBER, "seq", "source_offset", "topic_id", "partition", "owned_from", "owned_until")
    )


def epoch_ownership(records: DataFrame, members_at: DataFrame, anchor: tuple[str, ...]) -> DataFrame:
    """(anchor, member_id) of each epoch member -> current (topic-id partitions it owned when the epoch
    ended, in the type 7/8 shape) and ownership_times (per partition: owned_from, owned_until).

    `members_at` has the anchor columns plus member_id and next_anchor_offset (null for the last epoch).
    A member without a type 8 record by then owns nothing (no row: the caller coalesces).
    """
    last_state = ending_states(_member_records(records), members_at, anchor)
    held = last_state.join(owned_partitions(records), on=[*MEMBER, "seq"], how="inner")
    by_topic = held.groupBy(*anchor, "member_id", "topic_id").agg(
        F.array_sort(F.collect_list("partition")).alias("partitions"),
        F.collect_list(F.struct("topic_id", "partition", "owned_from", "owned_until")).alias("times"),
    )
    return by_topic.groupBy(*anchor, "member_id").agg(
        F.array_sort(F.collect_list(F.struct("topic_id", "partitions"))).alias("current"),
        F.array_sort(F.flatten(F.collect_list("times"))).alias("ownership_times"),
    )


def ending_states(states: DataFrame, members_at: DataFrame, anchor: tuple[str, ...]) -> DataFrame:
    """(anchor, member_id, seq) of the member's latest type 8 record (not a tombstone) before the next
    epoch: `states` as _member_records gives them, `members_at` as epoch_ownership takes it.

    Each epoch's end is put in its member's log, where the record before it is the one then held: a walk
    along the log, not each epoch paired with every earlier record of its member (the square of a
    member's history)."""
    ends = members_at.select(
        *anchor,
        "member_id",
        F.coalesce("next_anchor_offset", F.lit(_AFTER_EVERY_RECORD)).alias("source_offset"),
        F.lit(True).alias("_is_end"),
    )
    before = Window.partitionBy(*MEMBER).orderBy("source_offset").rowsBetween(Window.unboundedPreceding, -1)
    return (
        states.where(~F.col("is_tombstone"))
        .select(*MEMBER, "seq", "source_offset", F.lit(False).alias("_is_end"))
        .unionByName(ends, allowMissingColumns=True)
        .withColumn("held_seq", F.last("seq", ignorenulls=True).over(before))
        .where(F.col("_is_end") & F.col("held_seq").isNotNull())
        .select(*anchor, "member_id", F.col("held_seq").alias("seq"))
    )


def with_reconciliation(members_at: DataFrame, records: DataFrame, anchor: tuple[str, ...]) -> DataFrame:
    """(anchor, member) rows + reached_at: the first time the member's current assignment (type 8) was
    STABLE at this epoch or a later one (null when never).

    Found along each member's epochs from the latest down, with the reconciliations among them: pairing
    each epoch with every later reconciliation of its member grew with the square of the member's life."""
    reached = records.where(
        (F.col("record_type") == F.lit(RECORD_CURRENT_MEMBER))
        & ~F.col("is_tombstone")
        & (F.col("member_state") == F.lit(MEMBER_STATE_STABLE))
        & F.col("member_epoch").isNotNull()
    ).select(*MEMBER, F.col("member_epoch").alias("_epoch"), "record_at", F.lit(False).alias("_is_epoch"))
    epochs = members_at.select(
        *anchor,
        F.col("member.member_id").alias("member_id"),
        F.col("generation").alias("_epoch"),
        F.lit(True).alias("_is_epoch"),
    )
    # At one epoch number the reconciliations come first: an epoch is reached by a STABLE record of its own.
    down_the_epochs = (
        Window.partitionBy(*MEMBER)
        .orderBy(F.col("_epoch").desc(), "_is_epoch")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    first_reached = (
        reached.unionByName(epochs, allowMissingColumns=True)
        .withColumn("reached_at", F.min("record_at").over(down_the_epochs))
        .where(F.col("_is_epoch"))
        .select(*anchor, "member_id", F.when(F.col("_epoch").isNotNull(), F.col("reached_at")).alias("reached_at"))
    )
    with_id = members_at.withColumn("member_id", F.col("member.member_id"))
    return with_id.join(first_reached, on=[*anchor, "member_id"], how="left").drop("member_id")
