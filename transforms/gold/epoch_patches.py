"""The rows before an epoch group's frame (transforms/gold/epoch_frames.py) that the frame changes.

Two columns of such a row depend on later records: a holding open there (owned_until null) closes when
its member releases it, however many epochs later; an epoch's reconciled_at waits for its last member to
reach it, and a reconciliation recorded with an earlier time would move it. So a run patches those rows:
an open holding gets the close the frame finds for the member's holding of that partition at the anchor
(an open holding can only be that one: its member held it without a break up to its last current
assignment before the anchor, the frame's first), and reconciled_at is found again, from every
reconciliation of the incarnation, where it is null or a new reconciliation's time precedes it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from transforms.gold import epochs, ownership
from transforms.gold.epoch_frames import twin_type
from transforms.gold.frames import FRAME_OFFSET
from transforms.gold.generations import GROUP, INCARNATION, REBALANCE
from transforms.gold.ownership import MEMBER_STATE_STABLE, RECORD_CURRENT_MEMBER


def patched_rows(earlier: DataFrame, details: DataFrame, frame_records: DataFrame, records: DataFrame) -> DataFrame:
    """Generation rows before the frames (as the table holds them) + frame_details + the frames' epoch
    records (epochs.epoch_records of in_epoch_frames) + the touched groups' consumer_group_records ->
    those rows of the frames' incarnations that the frames change (see the module docstring), changed."""
    framed = F.broadcast(details.select(*GROUP, "frame_incarnation", FRAME_OFFSET))
    rows = earlier.join(framed, on=list(GROUP), how="inner").where(F.col("incarnation") == F.col("frame_incarnation"))
    closes = _closes(frame_records, details)
    ownership_patched = F.transform(
        "members",
        lambda m: m.withField(
            "ownership",
            F.transform(
                m["ownership"],
                lambda o: o.withField(
                    "owned_until",
                    F.coalesce(
                        o["owned_until"],
                        F.try_element_at(F.col("_closes"), _holding_key(m["member_id"], o["topic_id"], o["partition"])),
                    ),
                ),
            ),
        ),
    )
    reconciled = _reconciled_again(rows, details, records)
    patched = (
        rows.join(closes, on=list(GROUP), how="left")
        .join(reconciled, on=list(REBALANCE), how="left")
        .withColumns(
            {
                "_members": F.when(F.col("_closes").isNotNull(), ownership_patched).otherwise(F.col("members")),
                "_reconciled_at": F.when(F.col("_is_found_again"), F.col("_found_at")).otherwise(
                    F.col("reconciled_at")
                ),
            }
        )
    )
    is_changed = ~F.col("_members").eqNullSafe(F.col("members")) | ~F.col("_reconciled_at").eqNullSafe(
        F.col("reconciled_at")
    )
    return (
        patched.where(is_changed)
        .withColumns({"members": F.col("_members"), "reconciled_at": F.col("_reconciled_at")})
        .select(*earlier.columns)
    )


def _holding_key(member_id: Column, topic_id: Column, partition: Column) -> Column:
    return F.concat_ws("/", member_id, topic_id, partition.cast("string"))


def _closes(frame_records: DataFrame, details: DataFrame) -> DataFrame:
    """(cluster, group_id, _closes): a map holding key -> owned_until of the holdings the frames close
    that began before their anchors (those of each member's first record in the frame's incarnation)."""
    anchors = F.broadcast(details.select(*GROUP, FRAME_OFFSET))
    return (
        ownership.owned_partitions(frame_records)
        .join(anchors, on=list(GROUP), how="inner")
        .where(
            (F.col("incarnation") == 0)
            & (F.col("seq") == 1)
            & (F.col("source_offset") < F.col(FRAME_OFFSET))
            & F.col("owned_until").isNotNull()
        )
        .groupBy(*GROUP)
        .agg(
            F.map_from_entries(
                F.collect_list(
                    F.struct(_holding_key(F.col("member_id"), F.col("topic_id"), F.col("partition")), "owned_until")
                )
            ).alias("_closes")
        )
    )


def _reconciled_again(rows: DataFrame, details: DataFrame, records: DataFrame) -> DataFrame:
    """(REBALANCE, _is_found_again, _found_at): reconciled_at found again, from every reconciliation of the
    incarnation, for the rows whose value a reconciliation the run brings can change."""
    until = (
        records.join(F.broadcast(details.select(*GROUP, "frame_partition", FRAME_OFFSET)), on=list(GROUP), how="inner")
        .where(
            (F.col("source_partition") == F.col("frame_partition"))
            & (F.col("source_offset") >= F.col(FRAME_OFFSET))
            & (twin_type() == F.lit(epochs.RECORD_GROUP_EPOCH))
            & F.col("is_tombstone")
        )
        .groupBy(*GROUP)
        .agg(F.min("source_offset").alias("_incarnation_end"))
    )
    stable = (
        epochs.as_consumer_records(records)
        .join(
            F.broadcast(
                details.select(
                    *GROUP, "frame_partition", "frame_incarnation", "incarnation_start", "changed_from_offset"
                )
            ),
            on=list(GROUP),
            how="inner",
        )
        .join(until, on=list(GROUP), how="left")
        .where(
            (F.col("source_partition") == F.col("frame_partition"))
            & (F.col("source_offset") > F.col("incarnation_start"))
            & F.coalesce(F.col("source_offset") < F.col("_incarnation_end"), F.lit(True))
            & (F.col("record_type") == F.lit(RECORD_CURRENT_MEMBER))
            & ~F.col("is_tombstone")
            & (F.col("member_state") == F.lit(MEMBER_STATE_STABLE))
            & F.col("member_epoch").isNotNull()
        )
        .withColumn("incarnation", F.col("frame_incarnation"))
    )
    first_new = (
        stable.where(F.col("source_offset") >= F.col("changed_from_offset"))
        .groupBy(*GROUP)
        .agg(F.min("record_at").alias("_first_new_at"))
    )
    anchor = (*INCARNATION, "generation", "anchor_offset")
    waiting = (
        rows.join(first_new, on=list(GROUP), how="left")
        .where(
            F.col("generation").isNotNull()
            & (F.size("members") > 0)
            & (
                F.col("reconciled_at").isNull()
                | F.coalesce(F.col("reconciled_at") > F.col("_first_new_at"), F.lit(False))
            )
        )
        .select(
            *INCARNATION,
            "generation",
            F.col("source_offset").alias("anchor_offset"),
            F.explode("members").alias("member"),
        )
    )
    return (
        ownership.with_reconciliation(waiting, stable, anchor)
        .groupBy(*REBALANCE)
        .agg(F.when(F.count("reached_at") == F.count(F.lit(1)), F.max("reached_at")).alias("_found_at"))
        .withColumn("_is_found_again", F.lit(True))
    )
