"""Streams groups (KIP-1071, record types 17, 19-22) read as their KIP-848 twins, active tasks as partitions.

A streams group's coordinator writes the same epoch sequence as a consumer group's (Kafka's
StreamsGroup*Value specs, 4.2.1): 17 StreamsGroupMetadata (epoch, metadata hash, validated topology
epoch), 19 StreamsGroupMemberMetadata (instance and rack id, client id and host, rebalance timeout,
topology epoch, process id, user endpoint, client tags), 20 StreamsGroupTargetAssignmentMetadata
(assignment epoch), 21 the target per member and 22 StreamsGroupCurrentMemberAssignment (member epochs,
state, and active, standby and warm-up tasks, each with its own pending revocation).

A task is (subtopology id, partition). Only active tasks process records and commit offsets, so they are
what a member owns: they fill the twins' assigned partitions (and pending revocation), keyed by the
subtopology id where a consumer record has a topic id. Standby and warm-up tasks, which the generations'
shape has no column for, are in `streams_members` (transforms.gold.streams_members). Topic names never
apply: the history names such a holding's `topic` by its subtopology id, with topic_name_source
'subtopology'.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

STREAMS_MEMBER_METADATA, RECORD_STREAMS_CURRENT_MEMBER = 19, 22
# Consumer twin types: 3 group epoch, 5 member metadata, 6 target epoch, 7 target member, 8 current member.
STREAMS_AS_CONSUMER_TYPES = {17: 3, STREAMS_MEMBER_METADATA: 5, 20: 6, 21: 7, RECORD_STREAMS_CURRENT_MEMBER: 8}
# Streams MemberState bytes (org.apache.kafka.coordinator.group.streams.MemberState, 4.2.1): 1 STABLE,
# 2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS, 0 UNKNOWN; a consumer member's are one lower (0 STABLE,
# 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS), so the twin's state is the streams state minus one.
STREAMS_STATE_OFFSET = 1
SOURCE_SUBTOPOLOGY = "subtopology"

_TASK_IDS = ArrayType(
    StructType([StructField("subtopology_id", StringType()), StructField("partitions", ArrayType(IntegerType()))])
)
_TASKS_JSON = StructType([StructField(name, _TASK_IDS) for name in ("active_tasks", "active_tasks_pending_revocation")])


def is_streams_record(record_type: Column) -> Column:
    return record_type.isin(*STREAMS_AS_CONSUMER_TYPES)


def _as_topic_partitions(tasks: Column) -> Column:
    """TaskIds -> the twins' (topic_id, partitions), the subtopology id standing for the topic id."""
    return F.transform(tasks, lambda t: F.struct(t["subtopology_id"].alias("topic_id"), t["partitions"]))


def with_streams_as_consumer(records: DataFrame) -> DataFrame:
    """consumer_group_records -> the same rows, streams records (17, 19-22) renumbered as their consumer
    twins, their member state as a consumer member's, and their active tasks (from value_json) as the
    assigned partitions and partitions pending revocation. Other rows unchanged."""
    is_streams = is_streams_record(F.col("record_type"))
    twin = F.create_map(*[F.lit(t) for pair in STREAMS_AS_CONSUMER_TYPES.items() for t in pair])
    tasks = F.from_json("value_json", _TASKS_JSON)
    has_tasks = is_streams & F.col("record_type").isin(21, RECORD_STREAMS_CURRENT_MEMBER) & ~F.col("is_tombstone")
    return records.withColumns(
        {
            "record_type": F.when(is_streams, twin[F.col("record_type")]).otherwise(F.col("record_type")),
            "member_state": F.when(is_streams, F.col("member_state") - F.lit(STREAMS_STATE_OFFSET)).otherwise(
                F.col("member_state")
            ),
            "assigned_partitions": F.when(has_tasks, _as_topic_partitions(tasks["active_tasks"])).otherwise(
                F.col("assigned_partitions")
            ),
            "partitions_pending_revocation": F.when(
                has_tasks, _as_topic_partitions(tasks["active_tasks_pending_revocation"])
            ).otherwise(F.col("partitions_pending_revocation")),
        }
    )
