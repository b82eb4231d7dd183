"""Where an incremental history run takes up a touched KIP-848, share or streams group: from a row of the
table on (transforms/gold/frames.py chooses the row), instead of from the group's first record. Share and
streams records are read here as their consumer twins (a streams member's active tasks as its partitions).

An epoch row (transforms/gold/epochs.py) is made of the latest record of each kind and key before its
anchor (its type 6 record): each member's metadata (5) and target (7), each regular expression (16), the
bumps (3) of its epoch; and each member's current assignment (8) as the epoch ended, every partition owned
from the record that began holding it. So a frame reads the group's records from the frame row's anchor
on after a *prefix*, the records before the anchor that still count: the latest 5 and 7 of each member
and 16 of each expression, the bumps of the frame's epoch and later, and each member's latest type 8
record that is not a tombstone with the record after it, whose holdings' starts are taken from the row
before the frame (that row's epoch ended at that very record); and the reconciliations (type 8, STABLE)
already at the frame's epoch or later, read for reconciled_at only (ownership.REACH_ONLY). All of them
after the last deletion.

Rows before the frame change too (transforms/gold/epoch_patches.py). The row before the frame gets its
assignment rows again: their valid_until follows the holdings it hands on to the frame.

A group whose prefix cannot be taken up exactly (a holding the row before does not list) is framed from
its first record instead.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from schemas.coordinator_records import RECORD_TYPE_CONSUMER_GROUP_REGULAR_EXPRESSION
from transforms.gold import epochs, ownership
from transforms.gold.frames import FRAME_COLUMNS, FRAME_OFFSET, FRAMED_EPOCH_PROTOCOLS
from transforms.gold.generations import GROUP
from transforms.gold.ownership import CARRIED_OWNED_FROM, MEMBER_STATE_STABLE, RECORD_CURRENT_MEMBER
from transforms.gold.streams_records import STREAMS_AS_CONSUMER_TYPES, with_streams_as_consumer

# Per epoch group framed: its frame (FRAME_COLUMNS), the frame row's epoch, the row before it (offset,
# generation, members), the offset of the deletion its incarnation follows (-1: none) and where its changes start.
DETAIL_COLUMNS = (
    *FRAME_COLUMNS,
    "frame_generation",
    "before_offset",
    "before_generation",
    "before_members",
    "incarnation_start",
    "changed_from_offset",
)
# On a prefix row (prefix): its group's prefix cannot be taken up exactly.
UNTAKEN = "_untaken"
# Types of which the latest record of each key before an anchor holds there (epoch_spans.latest_before).
_KEYED_TYPES = (
    epochs.RECORD_MEMBER_METADATA,
    epochs.RECORD_TARGET_MEMBER,
    RECORD_TYPE_CONSUMER_GROUP_REGULAR_EXPRESSION,
)


# The columns a streams record holds otherwise than its consumer twin (streams_records.py).
_TWINNED = ("record_type", "member_state", "assigned_partitions", "partitions_pending_revocation")


def twin_type() -> Column:
    """A record's type as a consumer group's (a share or streams record's twin)."""
    twin_pairs = {**epochs.SHARE_AS_CONSUMER_TYPES, **STREAMS_AS_CONSUMER_TYPES}
    twins = F.create_map(*[F.lit(t) for pair in twin_pairs.items() for t in pair])
    return F.coalesce(F.try_element_at(twins, F.col("record_type")), F.col("record_type"))


def _with_twin_view(rows: DataFrame) -> DataFrame:
    """Silver rows + `_twin` (type), `_state` (member state) and `_owned` (ownership.owned_by) as their
    consumer twins'; the silver columns unchanged, for the prefix is read again as silver."""
    saved = rows.withColumns({f"_silver_{name}": F.col(name) for name in _TWINNED})
    return (
        with_streams_as_consumer(saved)
        .withColumns({"_state": F.col("member_state"), "_owned": ownership.owned_by()})
        .withColumns({name: F.col(f"_silver_{name}") for name in _TWINNED})
        .drop(*[f"_silver_{name}" for name in _TWINNED])
        .withColumn("_twin", twin_type())
    )


def frame_details(frames: DataFrame, generations: DataFrame, starts: DataFrame) -> DataFrame:
    """frames.frame_rows + the touched groups' generation rows (as the table holds them) + change_starts
    -> DETAIL_COLUMNS of the frames of epoch groups (every row before a frame is in its partition)."""
    rows = generations.join(F.broadcast(frames.select(*FRAME_COLUMNS)), on=list(GROUP), how="inner").where(
        F.col("group_protocol").isin(*FRAMED_EPOCH_PROTOCOLS)
    )
    before_frame = F.col("source_offset") < F.col(FRAME_OFFSET)
    details = rows.groupBy(*FRAME_COLUMNS).agg(
        F.max(F.when(F.col("source_offset") == F.col(FRAME_OFFSET), F.col("generation"))).alias("frame_generation"),
        F.max_by(
            F.struct(F.col("source_offset").alias("offset"), F.col("generation"), F.col("members")),
            F.when(before_frame & F.col("generation").isNotNull(), F.col("source_offset")),
        ).alias("before"),
        F.coalesce(F.max(F.when(before_frame & F.col("generation").isNull(), F.col("source_offset"))), F.lit(-1))
        .cast("long")
        .alias("incarnation_start"),
    )
    return details.join(starts.select(*GROUP, "changed_from_offset"), on=list(GROUP), how="inner").select(
        *FRAME_COLUMNS,
        "frame_generation",
        F.col("before.offset").alias("before_offset"),
        F.col("before.generation").alias("before_generation"),
        F.col("before.members").alias("before_members"),
        "incarnation_start",
        "changed_from_offset",
    )


def _before_anchor(records: DataFrame, details: DataFrame) -> DataFrame:
    """The frames' group records from their incarnation's start to the anchor, with their consumer twins'
    view (_with_twin_view)."""
    return _with_twin_view(
        records.join(F.broadcast(details), on=list(GROUP), how="inner").where(
            (F.col("source_partition") == F.col("frame_partition"))
            & (F.col("source_offset") > F.col("incarnation_start"))
            & (F.col("source_offset") < F.col(FRAME_OFFSET))
        )
    )


def prefix(records: DataFrame, details: DataFrame) -> DataFrame:
    """The touched groups' consumer_group_records (silver) + frame_details -> the prefix of each frame:
    silver rows, with CARRIED_OWNED_FROM on each member's held type 8 record, REACH_ONLY, and UNTAKEN on
    a held record whose holdings cannot all be taken up (its group is to be framed whole)."""
    before = _before_anchor(records, details)
    is_tombstone = F.col("is_tombstone")
    latest = F.row_number().over(
        Window.partitionBy(*GROUP, "_twin", "member_id", "regular_expression").orderBy(F.col("source_offset").desc())
    )
    keyed = before.where(F.col("_twin").isin(*_KEYED_TYPES)).withColumn("_latest", latest).where(F.col("_latest") == 1)
    bumps = before.where(
        (F.col("_twin") == F.lit(epochs.RECORD_GROUP_EPOCH))
        & ~is_tombstone
        & (F.col("group_epoch") >= F.col("frame_generation"))
    )
    member = Window.partitionBy(*GROUP, "member_id")
    current = (
        before.where(F.col("_twin") == F.lit(RECORD_CURRENT_MEMBER))
        .join(_members_from_anchor(records, details, keyed), on=[*GROUP, "member_id"], how="left_semi")
        .withColumn("_held_at", F.max(F.when(~is_tombstone, F.col("source_offset"))).over(member))
        .withColumn(
            "_after", F.min(F.when(F.col("source_offset") > F.col("_held_at"), F.col("source_offset"))).over(member)
        )
    )
    is_held = F.col("source_offset") == F.col("_held_at")
    held = current.where(is_held).join(_holdings_before(details), on=[*GROUP, "member_id"], how="left")
    pairs = F.flatten(
        F.transform(
            F.col("_owned"),
            lambda tp: F.transform(
                tp["partitions"], lambda p: F.struct(tp["topic_id"].alias("topic_id"), p.alias("partition"))
            ),
        )
    )
    carried = F.transform(
        pairs,
        lambda pair: F.struct(
            pair["topic_id"].alias("topic_id"),
            pair["partition"].alias("partition"),
            F.try_element_at(
                F.filter(
                    F.coalesce("_ownership", F.array()),
                    lambda o: (o["topic_id"] == pair["topic_id"]) & (o["partition"] == pair["partition"]),
                ),
                F.lit(1),
            )["owned_from"].alias("owned_from"),
        ),
    )
    held = held.withColumn(CARRIED_OWNED_FROM, carried.cast(ownership.CARRIED_TYPE))
    # A holding the row before does not list: not exact.
    is_untaken = F.exists(CARRIED_OWNED_FROM, lambda pair: pair["owned_from"].isNull())
    # A member can report an epoch before its target's anchor (its epoch bumped, the target not yet
    # written): such a reconciliation counts for the frame's epochs, and only for their reconciled_at.
    reached_early = current.where(
        ~is_tombstone
        & ~is_held
        & (F.col("_state") == F.lit(MEMBER_STATE_STABLE))
        & (F.col("member_epoch") >= F.col("frame_generation"))
    )
    no_carry = F.lit(None).cast(ownership.CARRIED_TYPE).alias(CARRIED_OWNED_FROM)
    counted = [*records.columns, no_carry, F.lit(False).alias(ownership.REACH_ONLY), F.lit(False).alias(UNTAKEN)]
    return (
        keyed.select(*counted)
        .unionByName(bumps.select(*counted))
        .unionByName(current.where(F.col("source_offset") == F.col("_after")).select(*counted))
        .unionByName(
            held.select(
                *records.columns,
                CARRIED_OWNED_FROM,
                F.lit(False).alias(ownership.REACH_ONLY),
                is_untaken.alias(UNTAKEN),
            )
        )
        .unionByName(
            reached_early.select(
                *records.columns, no_carry, F.lit(True).alias(ownership.REACH_ONLY), F.lit(False).alias(UNTAKEN)
            )
        )
    )


def _members_from_anchor(records: DataFrame, details: DataFrame, keyed: DataFrame) -> DataFrame:
    """(cluster, group_id, member_id) of the members an epoch from the anchor on can list: a member there
    at the anchor, or one whose metadata comes again after it (a member that left may rejoin under its
    id). A member that left for good before the anchor is in no frame row: its type 8 records before the
    anchor (and their holdings, which the row before no longer lists) are left out."""
    at_anchor = keyed.where((F.col("_twin") == F.lit(epochs.RECORD_MEMBER_METADATA)) & ~F.col("is_tombstone")).select(
        *GROUP, "member_id"
    )
    again = (
        records.join(F.broadcast(details.select(*GROUP, "frame_partition", FRAME_OFFSET)), on=list(GROUP))
        .where(
            (F.col("source_partition") == F.col("frame_partition"))
            & (F.col("source_offset") >= F.col(FRAME_OFFSET))
            & (twin_type() == F.lit(epochs.RECORD_MEMBER_METADATA))
            & ~F.col("is_tombstone")
        )
        .select(*GROUP, "member_id")
    )
    return at_anchor.unionByName(again).distinct()


def _holdings_before(details: DataFrame) -> DataFrame:
    """(cluster, group_id, member_id, _ownership): each member's holdings in the row before the frame."""
    return details.select(*GROUP, F.explode("before_members").alias("m")).select(
        *GROUP, F.col("m.member_id").alias("member_id"), F.col("m.ownership").alias("_ownership")
    )


def in_epoch_frames(records: DataFrame, details: DataFrame, prefixes: DataFrame) -> DataFrame:
    """consumer_group_records (silver) -> the records epochs.consumer_group_generations reads: an epoch
    group framed from a row, its prefix and its records from the anchor on; every record of the others."""
    framed = F.broadcast(details.select(*GROUP, "frame_partition", FRAME_OFFSET))
    is_before = (F.col("source_partition") == F.col("frame_partition")) & (F.col("source_offset") < F.col(FRAME_OFFSET))
    return (
        records.join(framed, on=list(GROUP), how="left")
        .where(F.col(FRAME_OFFSET).isNull() | ~F.coalesce(is_before, F.lit(False)))
        .select(
            *records.columns,
            F.lit(None).cast(ownership.CARRIED_TYPE).alias(CARRIED_OWNED_FROM),
            F.lit(False).alias(ownership.REACH_ONLY),
        )
        .unionByName(prefixes)
    )


def assignment_frames(frames: DataFrame, details: DataFrame) -> DataFrame:
    """frames -> the same, an epoch group's moved to the row before its frame row: from where a run
    writes the group's assignment rows again."""
    before = details.select(*GROUP, F.col("before_offset"))
    return (
        frames.join(before, on=list(GROUP), how="left")
        .withColumn(FRAME_OFFSET, F.coalesce("before_offset", F.col(FRAME_OFFSET)))
        .select(*FRAME_COLUMNS)
    )
