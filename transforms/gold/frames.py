"""Where an incremental history run takes up a touched group's generations: from one of its rows
in the table on, instead of from the group's first record.

A classic group record (type 2) holds the whole group: generation, members and their assignments. So a
classic generation row depends only on its own records (those of its generation, contiguous in the log),
its incarnation (the deletions before it) and the generation before it (previous_generation); an
assignment's validity on the next row; a rebalance on its rounds, the closing generation before them (its
`before`) and the row after. A run frames such a group from its *frame row* on: it reads the group's
records from that row's first record, numbers their incarnations on from the row's, takes the row's
previous_generation from the table, and keeps every generation and assignment row before it as the table
holds them. The frame row is the earliest of
- the `before` of every rebalance the run does not keep (resume.settled_rebalances), or its first round
  when it has none (an incarnation's first, whose first round is the incarnation's first row);
- the last two rows recorded before the group's changes (the rows the changes can extend).
So every rebalance the run computes is framed as from the group's beginning, and the rebalance closing
at the frame row, like every one before it, is settled: kept as the table holds it. The frame row closes
a rebalance in the frame as it does in the whole history: a revoke round needs partitions still pending
from the generation before, which the frame lacks, so the test can only turn false there, never true.

KIP-848, share and streams records are deltas of their members' state: such a group's frame also reads a
prefix of the records before its frame row (transforms/gold/epoch_frames.py) and patches rows before it
(epoch_patches.py). A group that changed protocol is framed from its first record, as is one with a row
outside its changes' partition, or changes without a place.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from schemas import gold
from transforms.gold.generations import (
    GROUP,
    GROUP_PROTOCOL_CLASSIC,
    GROUP_PROTOCOL_CONSUMER,
    GROUP_PROTOCOL_SHARE,
    GROUP_PROTOCOL_STREAMS,
    INCARNATION,
    REBALANCE,
    skipped_generations,
)

FRAME_OFFSET = "frame_from_offset"
# Epoch groups framed from a row: their records are one stream of member deltas.
FRAMED_EPOCH_PROTOCOLS = (GROUP_PROTOCOL_CONSUMER, GROUP_PROTOCOL_SHARE, GROUP_PROTOCOL_STREAMS)
# Per framed group: the frame row's place (frame_partition, FRAME_OFFSET), incarnation and previous generation.
FRAME_COLUMNS = (*GROUP, "frame_partition", FRAME_OFFSET, "frame_incarnation", "frame_previous_generation")
FRAMES_SCHEMA = (
    "cluster string, group_id string, frame_partition int, frame_from_offset long, frame_incarnation int,"
    " frame_previous_generation int"
)


@dataclass(frozen=True)
class TakenUp:
    """Framed groups (`frames`: FRAME_COLUMNS) and their generation rows before their frame rows, as the
    table held them before the run (their assignments stay in theirs)."""

    frames: DataFrame
    generations: DataFrame
    # The epoch groups' frames (epoch_frames.frame_details) and the records before their anchors that
    # still count (epoch_frames.prefix); None in a run from scratch.
    epochs: DataFrame | None = None
    prefix: DataFrame | None = None

    def kept_generations(self) -> DataFrame:
        """REBALANCE keys of the generations kept (a deletion row's generation is null): the table's rows of
        these stay, in generations and in the tables of one row per generation (assignments, capacity)."""
        return self.generations.select(*REBALANCE)


def nothing_taken_up(spark: SparkSession) -> TakenUp:
    """Every group framed from its first record (a run from scratch)."""
    return TakenUp(spark.createDataFrame([], FRAMES_SCHEMA), spark.createDataFrame([], gold.generations_schema))


def frame_rows(generations: DataFrame, rebalances: DataFrame, settled: DataFrame, starts: DataFrame) -> DataFrame:
    """Gold generations and rebalances of the touched groups (as the tables hold them) + the rebalance
    rows kept (settled_rebalances) + change_starts -> FRAME_COLUMNS, one row per group framed from a row
    of the table (see the module docstring); the other touched groups have none."""
    placed = starts.where(F.col("changed_from_offset").isNotNull()).select(
        *GROUP, F.col("source_partition").alias("frame_partition"), "changed_from_offset"
    )
    rows = generations.join(placed, on=list(GROUP), how="inner")
    is_placed = (F.col("source_partition") == F.col("frame_partition")) & F.col("source_offset").isNotNull()
    framable = rows.groupBy(*GROUP).agg(
        F.bool_and(F.coalesce(is_placed, F.lit(False))).alias("is_placed"),
        F.collect_set("group_protocol").alias("protocols"),
    )
    # One protocol throughout: a group migrated between classic and KIP-848 is framed whole.
    is_framable = (
        F.col("is_placed")
        & (F.array_size("protocols") == 1)
        & F.col("protocols")[0].isin(GROUP_PROTOCOL_CLASSIC, *FRAMED_EPOCH_PROTOCOLS)
    )
    back_from_change = Window.partitionBy(*GROUP).orderBy(F.col("source_offset").desc())
    last_before_change = (
        rows.where(F.col("source_offset") < F.col("changed_from_offset"))
        .withColumn("_back", F.row_number().over(back_from_change))
        .where(F.col("_back") <= 2)
        .select(*GROUP, "source_offset", F.lit(True).alias("_is_before_change"))
    )
    anchors = (
        rebalances.join(settled.select(*REBALANCE), on=list(REBALANCE), how="left_anti")
        .select(*INCARNATION, F.coalesce("previous_generation", "first_round_generation").alias("generation"))
        .join(
            generations.where(F.col("generation").isNotNull()).select(*REBALANCE, "source_offset"),
            on=list(REBALANCE),
            how="left",
        )
        .select(*GROUP, "source_offset", F.lit(False).alias("_is_before_change"))
    )
    candidates = (
        last_before_change.unionByName(anchors)
        .groupBy(*GROUP)
        .agg(
            F.min("source_offset").alias(FRAME_OFFSET),
            # An anchor not found among the rows (none should be): the group is framed whole.
            F.max(F.col("source_offset").isNull()).alias("_has_lost_anchor"),
            # With no row before its changes, a group's every row may change (a late backup of its start).
            F.max("_is_before_change").alias("_has_row_before_change"),
        )
    )
    before = F.lag("row").over(Window.partitionBy(*GROUP).orderBy("source_offset"))
    frame_row = rows.withColumn("row", F.struct("incarnation", "generation", "group_protocol")).select(
        *GROUP,
        "frame_partition",
        F.col("source_offset").alias(FRAME_OFFSET),
        F.col("incarnation").alias("frame_incarnation"),
        F.col("previous_generation").alias("frame_previous_generation"),
        # An epoch group's frame takes its members' holdings up from the row before (epoch_frames.py).
        (
            (F.col("group_protocol") == F.lit(GROUP_PROTOCOL_CLASSIC))
            | (before["incarnation"] == F.col("incarnation")) & before["generation"].isNotNull()
        ).alias("_has_row_to_take_up"),
    )
    return (
        candidates.where(~F.col("_has_lost_anchor") & F.col("_has_row_before_change"))
        .join(framable.where(is_framable), on=list(GROUP), how="inner")
        .join(frame_row.where("_has_row_to_take_up"), on=[*GROUP, FRAME_OFFSET], how="inner")
        .select(*FRAME_COLUMNS)
    )


def without_keys(rows: DataFrame, keys: DataFrame) -> DataFrame:
    """`rows` whose REBALANCE key is not among `keys`, matched null-safe (a deletion row has no generation)."""
    renamed = keys.select(*(F.col(column).alias(f"_key_{column}") for column in REBALANCE)).distinct()
    is_key = functools.reduce(
        operator.and_, (F.col(column).eqNullSafe(F.col(f"_key_{column}")) for column in REBALANCE)
    )
    return rows.join(renamed, on=is_key, how="left_anti")


def _beside_frames(rows: DataFrame, frames: DataFrame) -> DataFrame:
    return rows.join(F.broadcast(frames.select(*FRAME_COLUMNS)), on=list(GROUP), how="left")


def _is_in_frame(offset: str = "source_offset") -> F.Column:
    """A row of an unframed group, or of a framed one at or after its frame row in the log."""
    return (
        F.col(FRAME_OFFSET).isNull()
        | (F.col("source_partition") != F.col("frame_partition"))
        | (F.col(offset) >= F.col(FRAME_OFFSET))
    )


def in_frames(rows: DataFrame, frames: DataFrame) -> DataFrame:
    """Silver records or generation rows (source_partition, source_offset) of the frames: a framed group's
    from its frame row on, every row of the others."""
    return _beside_frames(rows, frames).where(_is_in_frame()).drop(*FRAME_COLUMNS[2:])


def before_frames(generations: DataFrame, frames: DataFrame) -> DataFrame:
    """Generation rows of the framed groups before their frame rows: kept as they are."""
    return (
        generations.join(F.broadcast(frames.select(*FRAME_COLUMNS)), on=list(GROUP), how="inner")
        .where(~_is_in_frame())
        .drop(*FRAME_COLUMNS[2:])
    )


def settled_by_frames(generations: DataFrame, frames: DataFrame) -> DataFrame:
    """REBALANCE keys of the framed groups' rows up to and including their frame rows: a rebalance
    closing there is settled and its row kept (the frame row's own framing lacks what lies before it)."""
    return (
        generations.join(F.broadcast(frames.select(*FRAME_COLUMNS)), on=list(GROUP), how="inner")
        .where(F.col("generation").isNotNull() & (F.col("source_offset") <= F.col(FRAME_OFFSET)))
        .select(*REBALANCE)
    )


def continued(generations: DataFrame, frames: DataFrame) -> DataFrame:
    """Generation rows framed from the frame rows' records -> the same rows as from the group's first
    record: incarnations counted on from the frame row's, and the frame row's previous generation (with
    its skipped count) as the table holds it."""
    is_frame_row = F.col(FRAME_OFFSET).isNotNull() & (F.col("source_offset") == F.col(FRAME_OFFSET))
    previous = F.when(is_frame_row, F.col("frame_previous_generation")).otherwise(F.col("previous_generation"))
    return (
        _beside_frames(generations, frames)
        .withColumns(
            {
                "incarnation": (F.col("incarnation") + F.coalesce("frame_incarnation", F.lit(0))).cast("int"),
                "previous_generation": previous,
                "skipped_generation_count": skipped_generations(F.col("generation"), previous),
            }
        )
        .select(*generations.columns)
    )
