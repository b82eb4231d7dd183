"""KIP-848 consumer groups (record types 3-8, 16) and share groups (KIP-932, types 10-14) rebuilt into
the classic generation shape.

A KIP-848 group has no SyncGroup record. Its coordinator appends, in this order: member metadata
(type 5) and a group-epoch bump (type 3) when membership or subscriptions change; the new target
assignment of each changed member (type 7) and then the assignment epoch (type 6); and, as members
reconcile, their current assignments (type 8). One gold generation is one target-assignment epoch: the
group's members (latest type 5 of each live member) as of the type 6 record, the partitions each owned
(current assignment, type 8) when the epoch ended, i.e. before the next type 6, and their target
partitions (latest type 7). Members reconcile at different moments, and a newcomer targeted a crashed
member's partitions owns them only once that member is fenced: ownership, not the target, is what
moved (see transforms.gold.ownership). Members leave through tombstones of types 8, 7, 5; the group is
deleted through a type 3 tombstone.

A share group's coordinator writes the same sequence under types 10-14 (SHARE_AS_CONSUMER_TYPES), so its
records are read as their consumer twins and its generations carry group_protocol 'share'. Its members
own their current assignment (type 14) as a consumer member owns type 8. Streams groups (KIP-1071, types
17, 19-22) likewise, with group_protocol 'streams': a member owns its active tasks, one per (subtopology,
partition), from its current assignment (type 22; transforms.gold.streams_records).

Partitions are keyed by topic id; transforms.gold.topic_names names them (`topic_names` is re-exported
here for the history job).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from schemas import gold
from schemas.coordinator_records import RECORD_TYPE_CONSUMER_GROUP_REGULAR_EXPRESSION
from transforms.gold import ownership
from transforms.gold.epoch_spans import latest_before
from transforms.gold.generations import (
    GROUP_PROTOCOL_CONSUMER,
    GROUP_PROTOCOL_SHARE,
    GROUP_PROTOCOL_STREAMS,
    INCARNATION,
    LOG_ORDER,
    with_generation_sequence,
    with_incarnation,
)
from transforms.gold.ownership import RECORD_CURRENT_MEMBER
from transforms.gold.streams_records import (
    RECORD_STREAMS_CURRENT_MEMBER,
    SOURCE_SUBTOPOLOGY,
    STREAMS_AS_CONSUMER_TYPES,
    STREAMS_MEMBER_METADATA,
    with_streams_as_consumer,
)
from transforms.gold.topic_names import SOURCE_UNRESOLVED
from transforms.gold.topic_names import topic_names as topic_names  # re-exported: jobs.steps.history calls it

RECORD_GROUP_EPOCH = 3
RECORD_MEMBER_METADATA = 5
RECORD_TARGET_EPOCH = 6
RECORD_TARGET_MEMBER = 7
CONSUMER_GROUP_RECORD_TYPES = (3, 4, 5, 6, 7, 8, 16)
# Share groups (KIP-932) write the same epoch records under their own types, field for field what the
# history reads (Kafka's ShareGroup*Value specs, 4.2.1 and 4.3.1): 11 ShareGroupMetadata (epoch, metadata
# hash), 10 ShareGroupMemberMetadata (rack, client id and host, subscribed topic names: no instance id,
# assignor or rebalance timeout), 12 ShareGroupTargetAssignmentMetadata (assignment epoch), 13 the target
# per member and 14 ShareGroupCurrentMemberAssignment (member epochs, state, assigned partitions: no
# pending revocation, a share partition is handed over without one). Read as their consumer twins.
SHARE_MEMBER_METADATA, SHARE_CURRENT_MEMBER = 10, 14
SHARE_AS_CONSUMER_TYPES = {11: RECORD_GROUP_EPOCH, SHARE_MEMBER_METADATA: RECORD_MEMBER_METADATA,
                           12: RECORD_TARGET_EPOCH, 13: RECORD_TARGET_MEMBER,
                           SHARE_CURRENT_MEMBER: RECORD_CURRENT_MEMBER}  # fmt: skip

# A member's metadata and current assignment (consumer 5, 8; share 10, 14; streams 19, 22): its own records.
OWN_MEMBER_RECORD_TYPES = (RECORD_MEMBER_METADATA, RECORD_CURRENT_MEMBER, SHARE_MEMBER_METADATA, SHARE_CURRENT_MEMBER,
                           STREAMS_MEMBER_METADATA, RECORD_STREAMS_CURRENT_MEMBER)  # fmt: skip

ANCHOR = (*INCARNATION, "generation", "anchor_offset")


def _of_type(records: DataFrame, record_type: int) -> DataFrame:
    return records.where(F.col("record_type") == F.lit(record_type))


def _named_partitions(assigned: Column, names: Column, unnamed_source: Column) -> Column:
    """Topic-id partitions -> ASSIGNED_PARTITIONS, naming each topic through the cluster's id map
    (`unnamed_source` where it has none: unresolved, or a streams subtopology, which no map names)."""
    return F.transform(
        assigned,
        lambda tp: F.struct(
            F.coalesce(F.try_element_at(names, tp["topic_id"])["topic"], tp["topic_id"]).alias("topic"),
            tp["partitions"].alias("partitions"),
            tp["topic_id"].alias("topic_id"),
            F.coalesce(F.try_element_at(names, tp["topic_id"])["topic_name_source"], unnamed_source).alias(
                "topic_name_source"
            ),
        ),
    )


def _names_by_group(records: DataFrame, topic_names: DataFrame) -> DataFrame:
    """(cluster, group_id, names): a map topic id -> (topic, topic_name_source) of the topic ids the group's
    target and current assignments name. A map lookup walks its keys one by one, and every member of
    every epoch looks up each of its topics twice: a map of all the cluster's topic ids (1,500 in the
    benchmark's estate, for 11 assigned) made that the costliest part of history, growing with both."""
    assigned = F.concat(
        F.coalesce("assigned_partitions", F.array()), F.coalesce("partitions_pending_revocation", F.array())
    )
    referenced = (
        records.where(F.col("record_type").isin(RECORD_TARGET_MEMBER, RECORD_CURRENT_MEMBER))
        .select("cluster", "group_id", F.explode(F.transform(assigned, lambda tp: tp["topic_id"])).alias("topic_id"))
        .distinct()
    )
    return (
        referenced.join(topic_names, on=["cluster", "topic_id"], how="inner")
        .groupBy("cluster", "group_id")
        .agg(
            F.map_from_entries(
                F.collect_list(F.struct("topic_id", F.struct("topic", "topic_name_source").alias("name")))
            ).alias("names")
        )
    )


def _members_at_epochs(records: DataFrame, anchors: DataFrame, names: DataFrame) -> DataFrame:
    """(anchor, member) rows: the member's metadata, regex-resolved subscription, the partitions it owned
    when the epoch ended (current assignment, see transforms.gold.ownership) and its target partitions."""
    metadata = latest_before(anchors, _of_type(records, RECORD_MEMBER_METADATA), "member_id").select(
        *ANCHOR,
        "group_protocol",
        "member_id",
        "instance_id",
        "client_id",
        "client_host",
        "rack_id",
        "rebalance_timeout_ms",
        "server_assignor",
        "subscribed_topic_names",
        F.nullif(F.col("subscribed_topic_regex"), F.lit("")).alias("subscribed_topic_regex"),
    )
    targets = latest_before(anchors, _of_type(records, RECORD_TARGET_MEMBER), "member_id").select(
        *ANCHOR, "member_id", F.col("assigned_partitions").alias("target")
    )
    owned = ownership.epoch_ownership(
        records, metadata.join(anchors.select(*ANCHOR, "next_anchor_offset"), on=list(ANCHOR), how="inner"), ANCHOR
    )
    regexes = latest_before(
        anchors, _of_type(records, RECORD_TYPE_CONSUMER_GROUP_REGULAR_EXPRESSION), "regular_expression"
    ).select(*ANCHOR, F.col("regular_expression").alias("subscribed_topic_regex"), "resolved_topics")
    subscribed = F.array_distinct(
        F.concat(F.coalesce("subscribed_topic_names", F.array()), F.coalesce("resolved_topics", F.array()))
    )
    unnamed_source = F.when(
        F.col("group_protocol") == F.lit(GROUP_PROTOCOL_STREAMS), F.lit(SOURCE_SUBTOPOLOGY)
    ).otherwise(F.lit(SOURCE_UNRESOLVED))
    return (
        metadata.join(targets, on=[*ANCHOR, "member_id"], how="left")
        .join(owned, on=[*ANCHOR, "member_id"], how="left")
        .join(regexes, on=[*ANCHOR, "subscribed_topic_regex"], how="left")
        .join(names, on=["cluster", "group_id"], how="left")
        .select(
            *ANCHOR,
            "server_assignor",
            F.struct(
                "member_id",
                F.col("instance_id").alias("group_instance_id"),
                "client_id",
                "client_host",
                "rack_id",
                F.lit(None).cast("int").alias("session_timeout_ms"),
                "rebalance_timeout_ms",
                F.array_sort(subscribed).alias("subscribed_topics"),
                # Ownership is the current assignment (type 8); the target (type 7) stays beside it.
                _named_partitions(F.coalesce("current", F.array()), F.col("names"), unnamed_source).alias(
                    "assigned_partitions"
                ),
                _named_partitions(F.coalesce("target", F.array()), F.col("names"), unnamed_source).alias(
                    "target_partitions"
                ),
                F.coalesce("ownership_times", F.array()).alias("ownership"),
            ).alias("member"),
        )
    )


def _by_member_id(left: Column, right: Column) -> Column:
    return (
        F.when(left["member_id"] < right["member_id"], -1).when(left["member_id"] > right["member_id"], 1).otherwise(0)
    )


def as_consumer_records(consumer_group_records: DataFrame) -> DataFrame:
    """KIP-848, share and streams records, share and streams types renumbered as their consumer twins
    (streams: see transforms.gold.streams_records), + group_protocol."""
    share_types, streams_types = list(SHARE_AS_CONSUMER_TYPES), list(STREAMS_AS_CONSUMER_TYPES)
    as_consumer = F.create_map(*[F.lit(t) for pair in SHARE_AS_CONSUMER_TYPES.items() for t in pair])
    is_share = F.col("record_type").isin(*share_types)
    group_protocol = (
        F.when(is_share, F.lit(GROUP_PROTOCOL_SHARE))
        .when(F.col("record_type").isin(*streams_types), F.lit(GROUP_PROTOCOL_STREAMS))
        .otherwise(F.lit(GROUP_PROTOCOL_CONSUMER))
    )
    return (
        consumer_group_records.where(
            F.col("record_type").isin(*CONSUMER_GROUP_RECORD_TYPES, *share_types, *streams_types)
        )
        .withColumns(
            {
                "group_protocol": group_protocol,
                "record_type": F.when(is_share, as_consumer[F.col("record_type")]).otherwise(F.col("record_type")),
            }
        )
        .transform(with_streams_as_consumer)
    )


def member_own_records(consumer_group_records: DataFrame) -> DataFrame:
    """consumer_group_records -> (cluster, group_id, member_id, record_at): each record a KIP-848, share or
    streams member's own heartbeat made the coordinator write (OWN_MEMBER_RECORD_TYPES: its metadata, on
    joining or changing; its current assignment, on reconciling). The group's epoch and target records
    are written on whichever member's heartbeat computed the epoch, and tombstones also when a member is
    fenced, so they are no sign of any one member's life."""
    is_own = F.col("record_type").isin(*OWN_MEMBER_RECORD_TYPES) & ~F.col("is_tombstone")
    return consumer_group_records.where(is_own).select("cluster", "group_id", "member_id", "record_at")


def epoch_records(consumer_group_records: DataFrame) -> DataFrame:
    """consumer_group_records (silver) -> the epoch groups' records as their consumer twins, with incarnation."""
    is_group_deletion = (F.col("record_type") == F.lit(RECORD_GROUP_EPOCH)) & F.col("is_tombstone")
    return with_incarnation(as_consumer_records(consumer_group_records), is_group_deletion)


def consumer_group_generations(consumer_group_records: DataFrame, topic_names: DataFrame) -> DataFrame:
    """consumer_group_records (silver) + topic_names -> generations rows of KIP-848 and share groups."""
    records = epoch_records(consumer_group_records)
    anchor_order = Window.partitionBy(*INCARNATION).orderBy("anchor_offset")
    last_of_epoch = Window.partitionBy(*INCARNATION, "assignment_epoch").orderBy(F.col("source_offset").desc())
    anchors = (
        _of_type(records, RECORD_TARGET_EPOCH)
        .where(~F.col("is_tombstone"))
        .withColumn("rank", F.row_number().over(last_of_epoch))
        .where(F.col("rank") == 1)
        .select(
            *INCARNATION,
            "source_partition",
            "group_protocol",
            F.col("assignment_epoch").alias("generation"),
            F.col("source_offset").alias("anchor_offset"),
            F.col("record_at").alias("recorded_at"),
        )
        .withColumn("next_anchor_offset", F.lead("anchor_offset").over(anchor_order))
    )
    members = (
        _members_at_epochs(records, anchors.drop("group_protocol"), _names_by_group(records, topic_names))
        .transform(ownership.with_reconciliation, records, ANCHOR)  # one row per member of each epoch
        .groupBy(*ANCHOR)
        .agg(
            F.array_sort(F.collect_list("member"), _by_member_id).alias("members"),
            F.max("server_assignor").alias("assignor"),
            F.when(F.count("reached_at") == F.count(F.lit(1)), F.max("reached_at")).alias("reconciled_at"),
        )
    )
    bumps = (
        _of_type(records, RECORD_GROUP_EPOCH)
        .where(~F.col("is_tombstone"))
        .groupBy(*INCARNATION, F.col("group_epoch").alias("generation"))
        .agg(F.max("record_at").alias("join_completed_at"))
    )
    no_members = F.array().cast(gold.generations_schema["members"].dataType)
    epochs = (
        anchors.join(members, on=list(ANCHOR), how="left")
        .join(bumps, on=[*INCARNATION, "generation"], how="left")
        .select(
            *INCARNATION,
            "generation",
            "group_protocol",
            F.col("group_protocol").alias("protocol_type"),
            "assignor",
            F.lit(None).cast("string").alias("leader"),
            "join_completed_at",
            "recorded_at",
            F.col("recorded_at").alias("last_recorded_at"),
            F.coalesce("reconciled_at", F.when(F.col("members").isNull(), F.col("recorded_at"))).alias("reconciled_at"),
            F.lit(1).alias("record_count"),
            F.coalesce("members", no_members).alias("members"),
            F.array().cast(gold.generations_schema["static_replacements"].dataType).alias("static_replacements"),
            "source_partition",
            F.col("anchor_offset").alias("source_offset"),
        )
    )
    deletions = records.where(F.col("is_deletion")).select(
        *INCARNATION,
        F.lit(None).cast("int").alias("generation"),
        "group_protocol",
        F.col("group_protocol").alias("protocol_type"),
        F.lit(None).cast("string").alias("assignor"),
        F.lit(None).cast("string").alias("leader"),
        F.lit(None).cast("timestamp").alias("join_completed_at"),
        F.col("record_at").alias("recorded_at"),
        F.col("record_at").alias("last_recorded_at"),
        F.lit(None).cast("timestamp").alias("reconciled_at"),
        F.lit(1).alias("record_count"),
        no_members.alias("members"),
        F.array().cast(gold.generations_schema["static_replacements"].dataType).alias("static_replacements"),
        *LOG_ORDER,
    )
    return with_generation_sequence(epochs.unionByName(deletions))
