"""Classic groups' generations (record type 2) and every generation's assignments, as gold rows.

Grain of `generations`: one generation of one group incarnation (see schemas.gold). Kafka writes
a group record when a rebalance completes (leader's SyncGroup), when the group becomes Empty, when a
static member is replaced (same generation, new member id: not a rebalance) and a tombstone when the
group is deleted. Nothing is written when a rebalance starts, so a jump in generation numbers is a round
that never completed. Records of one group are all in one `__consumer_offsets` partition; their log
order is (source_partition, source_offset).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from schemas import gold

GROUP_PROTOCOL_CLASSIC = "classic"
GROUP_PROTOCOL_CONSUMER = "consumer"
GROUP_PROTOCOL_SHARE = "share"
GROUP_PROTOCOL_STREAMS = "streams"
# Groups whose generations are target-assignment epochs and whose members own their current assignment.
EPOCH_PROTOCOLS = (GROUP_PROTOCOL_CONSUMER, GROUP_PROTOCOL_SHARE, GROUP_PROTOCOL_STREAMS)
STATE_STABLE, STATE_EMPTY, STATE_DELETED = "stable", "empty", "deleted"

LOG_ORDER = ("source_partition", "source_offset")
GROUP = ("cluster", "group_id")
INCARNATION = ("cluster", "group_id", "incarnation")
REBALANCE = (*INCARNATION, "generation")  # a rebalance is keyed by the generation it produced
MEMBER_FIELDS = [field.name for field in gold.MEMBER.fields]


def log_window(*keys: str) -> Window:
    return Window.partitionBy(*keys).orderBy(*LOG_ORDER)


def log_window_until_previous(*keys: str) -> Window:
    return log_window(*keys).rowsBetween(Window.unboundedPreceding, -1)


def member_key(member: Column) -> Column:
    """The owner's identity across rebalances: a static member keeps its group_instance_id."""
    return F.coalesce(member["group_instance_id"], member["member_id"])


def with_incarnation(records: DataFrame, is_deletion: Column) -> DataFrame:
    """Numbers each group's lives: the count of deletions before a record (a deletion ends its own life).

    A deletion right after another deletion (nothing in between) is a repeat and is dropped.
    """
    follows_deletion = F.coalesce(F.lag(is_deletion).over(log_window(*GROUP)), F.lit(False))
    deletions_before = F.coalesce(
        F.sum(is_deletion.cast("int")).over(log_window_until_previous(*GROUP)),
        F.lit(0),
    )
    return (
        records.withColumns({"is_deletion": is_deletion, "follows_deletion": follows_deletion})
        .where(~(F.col("is_deletion") & F.col("follows_deletion")))
        .withColumn("incarnation", deletions_before.cast("int"))
        .drop("follows_deletion")
    )


def _classic_partitions(assigned: Column) -> Column:
    return F.transform(
        assigned,
        lambda tp: F.struct(
            tp["topic"].alias("topic"),
            tp["partitions"].alias("partitions"),
            F.lit(None).cast("string").alias("topic_id"),
            F.lit(None).cast("string").alias("topic_name_source"),
        ),
    )


def _members_by_record(group_members: DataFrame) -> DataFrame:
    """record_id -> the record's members in their written order."""
    kip848_only = {name: F.lit(None).cast(gold.MEMBER[name].dataType) for name in ("target_partitions", "ownership")}
    member = F.struct(
        *[F.col(name) for name in MEMBER_FIELDS if name not in ("assigned_partitions", *kip848_only)],
        _classic_partitions(F.coalesce("assigned_partitions", F.array())).alias("assigned_partitions"),
        *[column.alias(name) for name, column in kip848_only.items()],
    )
    ordered = F.array_sort(F.collect_list(F.struct(F.col("member_index"), member.alias("m"))))
    return (
        group_members.groupBy("cluster", "record_id")
        .agg(ordered.alias("indexed"))
        .select("cluster", "record_id", F.transform("indexed", lambda item: item["m"]).alias("members"))
    )


def _static_replacements(members: Column, previous: Column, replaced_at: Column) -> Column:
    """Members whose group_instance_id held another member id in the previous record of the generation."""
    pairs = F.transform(
        members,
        lambda m: F.struct(
            m["group_instance_id"].alias("group_instance_id"),
            F.try_element_at(F.filter(previous, lambda p: p["group_instance_id"] == m["group_instance_id"]), F.lit(1))[
                "member_id"
            ].alias("previous_member_id"),
            m["member_id"].alias("member_id"),
            replaced_at.alias("replaced_at"),
        ),
    )
    return F.filter(
        pairs,
        lambda r: (
            r["group_instance_id"].isNotNull()
            & r["previous_member_id"].isNotNull()
            & (r["previous_member_id"] != r["member_id"])
        ),
    )


def _classic_records(group_metadata: DataFrame, group_members: DataFrame) -> DataFrame:
    """One row per group record (tombstones included) with its incarnation, members and replacements."""
    records = with_incarnation(group_metadata, F.col("is_tombstone")).join(
        _members_by_record(group_members), on=["cluster", "record_id"], how="left"
    )
    no_members = F.array().cast(gold.generations_schema["members"].dataType)
    previous_members = F.lag("members").over(log_window(*INCARNATION, "generation"))
    return records.withColumn("members", F.coalesce(F.col("members"), no_members)).withColumn(
        "replacements",
        F.when(
            ~F.col("is_tombstone") & previous_members.isNotNull(),
            _static_replacements(F.col("members"), previous_members, F.col("record_at")),
        ),
    )


def _generation_rows(records: DataFrame) -> DataFrame:
    """Aggregates the records of one generation (first record = the rebalance's outcome)."""
    first = F.struct(*LOG_ORDER, "record_at", "protocol_type", "protocol", "leader", "state_changed_at", "members")
    replacements = F.flatten(
        F.transform(
            F.array_sort(F.collect_list(F.struct("source_offset", "replacements"))),
            lambda item: F.coalesce(item["replacements"], F.array()),
        )
    )
    live = records.where(~F.col("is_tombstone"))
    generations = live.groupBy(*INCARNATION, "generation").agg(
        F.min_by(first, F.struct(*LOG_ORDER)).alias("first"),
        F.max("record_at").alias("last_recorded_at"),
        F.count(F.lit(1)).cast("int").alias("record_count"),
        replacements.alias("static_replacements"),
    )
    deletions = records.where(F.col("is_tombstone")).select(
        *INCARNATION,
        F.lit(None).cast("int").alias("generation"),
        F.struct(
            *LOG_ORDER,
            "record_at",
            F.lit(None).cast("string").alias("protocol_type"),
            F.lit(None).cast("string").alias("protocol"),
            F.lit(None).cast("string").alias("leader"),
            F.lit(None).cast("timestamp").alias("state_changed_at"),
            "members",
        ).alias("first"),
        F.col("record_at").alias("last_recorded_at"),
        F.lit(1).alias("record_count"),
        F.array().cast(gold.generations_schema["static_replacements"].dataType).alias("static_replacements"),
    )
    return generations.unionByName(deletions).select(
        *INCARNATION,
        "generation",
        F.lit(GROUP_PROTOCOL_CLASSIC).alias("group_protocol"),
        "first.protocol_type",
        F.col("first.protocol").alias("assignor"),
        "first.leader",
        F.col("first.state_changed_at").alias("join_completed_at"),
        F.col("first.record_at").alias("recorded_at"),
        "last_recorded_at",
        F.when(F.col("generation").isNotNull(), F.col("first.record_at")).alias("reconciled_at"),
        "record_count",
        "first.members",
        "static_replacements",
        "first.source_partition",
        "first.source_offset",
    )


def skipped_generations(generation: Column, previous: Column) -> Column:
    """Generation numbers between a row and the one before it: rounds that never completed."""
    return F.when(generation.isNotNull() & previous.isNotNull(), F.greatest(generation - previous - 1, F.lit(0)))


def with_generation_sequence(rows: DataFrame) -> DataFrame:
    """Adds state, previous_generation and skipped_generation_count, ordering generations by the log."""
    previous = F.lag("generation").over(log_window(*INCARNATION))
    is_deleted = F.col("generation").isNull()
    return rows.withColumns(
        {
            "state": F.when(is_deleted, F.lit(STATE_DELETED))
            .when(F.size("members") > 0, F.lit(STATE_STABLE))
            .otherwise(F.lit(STATE_EMPTY)),
            "previous_generation": previous,
            "skipped_generation_count": skipped_generations(F.col("generation"), previous),
            "member_count": F.size("members"),
        }
    ).select(*[field.name for field in gold.generations_schema.fields])


def classic_generations(group_metadata: DataFrame, group_members: DataFrame) -> DataFrame:
    """group_metadata + group_members (silver) -> generations rows of classic groups."""
    return with_generation_sequence(_generation_rows(_classic_records(group_metadata, group_members)))


def explode_generation_assignments(generations: DataFrame) -> DataFrame:
    """generations -> one row per assigned partition, valid until the group's next generation.

    KIP-848 and share rows follow the current assignment (type 8, 14): a partition the member took during the epoch is
    assigned from that record, and one it released is valid until its release, which can fall before or
    after the next epoch's start (a fenced member's tombstone; a revocation still reconciling).
    """
    next_recorded_at = F.lead("recorded_at").over(log_window(*INCARNATION))
    exploded = (
        generations.withColumn("next_recorded_at", next_recorded_at)
        .where(F.col("generation").isNotNull())
        .select(
            *INCARNATION,
            "generation",
            "group_protocol",
            "recorded_at",
            "next_recorded_at",
            F.explode("members").alias("m"),
        )
        .select("*", F.explode("m.assigned_partitions").alias("assigned"))
        .select("*", F.explode("assigned.partitions").alias("partition"))
    )
    held = F.try_element_at(
        F.filter(
            F.coalesce(F.col("m.ownership"), F.array()),
            lambda o: (o["topic_id"] == F.col("assigned.topic_id")) & (o["partition"] == F.col("partition")),
        ),
        F.lit(1),
    )
    with_held = exploded.withColumns(
        {"held": held, "owner_key": member_key(F.col("m")), "topic": F.col("assigned.topic")}
    )
    # The owner's next row for the partition (share partitions can have several owners at once): the
    # holding goes on there when it is the same holding, and that row takes over.
    same_owner_next = F.lead(F.struct(F.col("held.owned_from").alias("owned_from"))).over(
        Window.partitionBy(*INCARNATION, "topic", "partition", "owner_key").orderBy("generation")
    )
    is_kept = same_owner_next.isNotNull() & same_owner_next["owned_from"].eqNullSafe(F.col("held.owned_from"))
    is_released = F.col("group_protocol").isin(*EPOCH_PROTOCOLS) & ~F.coalesce(is_kept, F.lit(False))
    return with_held.select(
        *INCARNATION,
        "generation",
        "topic",
        F.col("partition").cast("int").alias("partition"),
        "group_protocol",
        F.col("m.member_id").alias("member_id"),
        F.col("owner_key").alias("member_key"),
        F.col("m.group_instance_id").alias("group_instance_id"),
        F.col("m.client_id").alias("client_id"),
        F.col("m.client_host").alias("client_host"),
        F.col("assigned.topic_id").alias("topic_id"),
        F.col("assigned.topic_name_source").alias("topic_name_source"),
        F.greatest("recorded_at", F.col("held.owned_from")).alias("assigned_at"),
        F.when(is_released & F.col("held").isNotNull(), F.col("held.owned_until"))
        .otherwise(F.col("next_recorded_at"))
        .alias("valid_until"),
    )
