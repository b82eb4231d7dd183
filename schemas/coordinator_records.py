"""Every record type Kafka writes to `__consumer_offsets`, declared once.

A record is `key = int16 type ++ key fields` (never flexible) and `value = int16 version ++ value
fields` (a null value is a tombstone). Field names are Kafka's schema names in snake_case; layouts
follow Kafka's `group-coordinator/src/main/resources/common/message/*.json` as summarised in
shared/reference/kafka-record-formats.md (sections 3-7). Types 3-24 are flexible from version 0.
"""

from __future__ import annotations

from schemas.layouts import ZERO_UUID, Field, JvmFastPath, Message, RecordType

GROUP_ID = Field("group_id", "string")
MEMBER_ID = Field("member_id", "string")
TOPIC_PARTITIONS = (Field("topic_id", "uuid"), Field("partitions", "[]int32"))
# Per-partition assignment epochs (the epoch each partition was assigned in), a tagged nullable array.
# Kafka's specs declare it `"default": null`, a JSON null, which Kafka's generator reads as no default:
# an absent field is an empty list (standby and warm-up tasks are written without it) and is not printed;
# only a null written on the wire is null. So no `default=` here (see schemas.layouts.default_value).
# Streams (type 22) has it since 4.1/4.2. Consumer groups (type 8) gained it in 4.3 (KIP-1251) as a new
# tag in the same value version 0, so nothing in a record says which release wrote it: it is declared as
# 4.3 declares it, which reads every older record the way that release reads it too (a 4.2.1 writer never
# sets tag 0, so the field is absent, takes its default and is not printed, as 4.2.1 prints it).
ASSIGNMENT_EPOCHS = Field("assignment_epochs", "[]int32", nullable_versions="0+", tag=0, tagged_versions="0+")
TOPIC_PARTITIONS_WITH_EPOCHS = (*TOPIC_PARTITIONS, ASSIGNMENT_EPOCHS)
ASSIGNMENT_TIMESTAMP = Field("assignment_timestamp", "int64", tag=0, tagged_versions="0+", default=0)
KEY_VALUE = (Field("key", "string"), Field("value", "string"))
TASK_IDS = (Field("subtopology_id", "string"), Field("partitions", "[]int32"))
TASK_IDS_WITH_EPOCHS = (*TASK_IDS, ASSIGNMENT_EPOCHS)
TOPIC_INFO = (
    Field("name", "string"),
    Field("partitions", "int32"),
    Field("replication_factor", "int16"),
    Field("topic_configs", "[]struct", fields=KEY_VALUE),
)
PARTITION_METADATA_TOPICS = (
    Field(
        "topics",
        "[]struct",
        fields=(
            Field("topic_id", "uuid"),
            Field("topic_name", "string"),
            Field("num_partitions", "int32"),
            Field("partition_metadata", "[]struct", fields=(Field("partition", "int32"), Field("racks", "[]string"))),
        ),
    ),
)


CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


def flexible_v0(name: str, *fields: Field) -> Message:
    return Message(name, valid_versions="0", flexible_versions="0+", fields=fields)


OFFSET_COMMIT_KEY = (Field("group", "string"), Field("topic", "string"), Field("partition", "int32"))
# Nearly every record is an offset commit, so the silver decoder reads the common ones in the JVM with
# a Java mirror of this layout (jvm/decoder/src/groupscope/CommonOffsetCommits.java). A new version is
# declared here AND decoded there, then claimed in `fast_path`: registration fails while they differ.
OFFSET_COMMIT_VALUE = Message(
    "OffsetCommitValue",
    valid_versions="0-4",
    flexible_versions="4+",
    fast_path=JvmFastPath("groupscope.CommonOffsetCommits", versions="0-4"),
    fields=(
        Field("offset", "int64"),
        Field("leader_epoch", "int32", versions="3+", default=-1),
        Field("metadata", "string"),
        Field("commit_timestamp", "int64"),
        Field("expire_timestamp", "int64", versions="1", default=-1),
        Field("topic_id", "uuid", versions="4+", tag=0, tagged_versions="4+", default=ZERO_UUID),
    ),
)
GROUP_METADATA_VALUE = Message(
    "GroupMetadataValue",
    valid_versions="0-4",
    flexible_versions="4+",
    fields=(
        Field("protocol_type", "string"),
        Field("generation", "int32"),
        Field("protocol", "string", nullable_versions="0+"),
        Field("leader", "string", nullable_versions="0+"),
        Field("current_state_timestamp", "int64", versions="2+", default=-1),
        Field(
            "members",
            "[]struct",
            fields=(
                Field("member_id", "string"),
                Field("group_instance_id", "string", versions="3+", nullable_versions="3+", default=None),
                Field("client_id", "string"),
                Field("client_host", "string"),
                Field("rebalance_timeout", "int32", versions="1+", default=-1),
                Field("session_timeout", "int32"),
                Field("subscription", "bytes"),
                Field("assignment", "bytes"),
            ),
        ),
    ),
)

CONSUMER_GROUP_MEMBER_METADATA_VALUE = flexible_v0(
    "ConsumerGroupMemberMetadataValue",
    Field("instance_id", "string", nullable_versions="0+"),
    Field("rack_id", "string", nullable_versions="0+"),
    Field("client_id", "string"),
    Field("client_host", "string"),
    Field("subscribed_topic_names", "[]string"),
    Field("subscribed_topic_regex", "string", nullable_versions="0+"),
    Field("rebalance_timeout_ms", "int32", default=-1),
    Field("server_assignor", "string", nullable_versions="0+"),
    Field(
        "classic_member_metadata",
        "struct",
        nullable_versions="0+",
        tag=0,
        tagged_versions="0+",  # `"default": null` in Kafka's spec: no default (an empty struct)
        fields=(
            Field("session_timeout_ms", "int32"),
            Field("supported_protocols", "[]struct", fields=(Field("name", "string"), Field("metadata", "bytes"))),
        ),
    ),
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = flexible_v0(
    "ConsumerGroupCurrentMemberAssignmentValue",
    Field("member_epoch", "int32"),
    Field("previous_member_epoch", "int32"),
    Field("state", "int8"),
    Field("assigned_partitions", "[]struct", fields=TOPIC_PARTITIONS_WITH_EPOCHS),
    Field("partitions_pending_revocation", "[]struct", fields=TOPIC_PARTITIONS_WITH_EPOCHS),
)
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = flexible_v0(
    "StreamsGroupCurrentMemberAssignmentValue",
    Field("member_epoch", "int32"),
    Field("previous_member_epoch", "int32"),
    Field("state", "int8"),
    *(
        Field(name, "[]struct", fields=TASK_IDS_WITH_EPOCHS)
        for name in (
            "active_tasks",
            "standby_tasks",
            "warmup_tasks",
            "active_tasks_pending_revocation",
            "standby_tasks_pending_revocation",
            "warmup_tasks_pending_revocation",
        )
    ),
)
STREAMS_GROUP_TOPOLOGY_VALUE = flexible_v0(
    "StreamsGroupTopologyValue",
    Field("epoch", "int32"),
    Field(
        "subtopologies",
        "[]struct",
        fields=(
            Field("subtopology_id", "string"),
            Field("source_topics", "[]string"),
            Field("source_topic_regex", "[]string"),
            Field("state_changelog_topics", "[]struct", fields=TOPIC_INFO),
            Field("repartition_sink_topics", "[]string"),
            Field("repartition_source_topics", "[]struct", fields=TOPIC_INFO),
            Field(
                "copartition_groups",
                "[]struct",
                fields=(
                    Field("source_topics", "[]int16"),
                    Field("source_topic_regex", "[]int16"),
                    Field("repartition_source_topics", "[]int16"),
                ),
            ),
        ),
    ),
)

_GROUP = (GROUP_ID,)
_MEMBER = (GROUP_ID, MEMBER_ID)

RECORD_TYPES: dict[int, RecordType] = {
    rt.type_id: rt
    for rt in (
        RecordType(0, "legacy_offset_commit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
        RecordType(1, "offset_commit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
        RecordType(2, "group_metadata", (Field("group", "string"),), GROUP_METADATA_VALUE),
        RecordType(
            3,
            "consumer_group_metadata",
            _GROUP,
            flexible_v0(
                "ConsumerGroupMetadataValue",
                Field("epoch", "int32"),
                Field("metadata_hash", "int64", tag=0, tagged_versions="0+", default=0),
            ),
        ),
        RecordType(
            4,
            "consumer_group_partition_metadata",
            _GROUP,
            flexible_v0("ConsumerGroupPartitionMetadataValue", *PARTITION_METADATA_TOPICS),
        ),
        RecordType(5, "consumer_group_member_metadata", _MEMBER, CONSUMER_GROUP_MEMBER_METADATA_VALUE),
        RecordType(
            6,
            "consumer_group_target_assignment_metadata",
            _GROUP,
            flexible_v0(
                "ConsumerGroupTargetAssignmentMetadataValue",
                Field("assignment_epoch", "int32"),
                ASSIGNMENT_TIMESTAMP,
            ),
        ),
        RecordType(
            7,
            "consumer_group_target_assignment_member",
            _MEMBER,
            flexible_v0(
                "ConsumerGroupTargetAssignmentMemberValue",
                Field("topic_partitions", "[]struct", fields=TOPIC_PARTITIONS),
            ),
        ),
        RecordType(
            8,
            "consumer_group_current_member_assignment",
            _MEMBER,
            CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
        ),
        RecordType(
            9,
            "share_group_partition_metadata",
            _GROUP,
            flexible_v0("ShareGroupPartitionMetadataValue", *PARTITION_METADATA_TOPICS),
        ),
        RecordType(
            10,
            "share_group_member_metadata",
            _MEMBER,
            flexible_v0(
                "ShareGroupMemberMetadataValue",
                Field("rack_id", "string", nullable_versions="0+"),
                Field("client_id", "string"),
                Field("client_host", "string"),
                Field("subscribed_topic_names", "[]string"),
            ),
        ),
        RecordType(
            11,
            "share_group_metadata",
            _GROUP,
            None,
            value_variants=(
                flexible_v0("ShareGroupMetadataValue", Field("epoch", "int32"), Field("metadata_hash", "int64")),
                flexible_v0("ShareGroupMetadataValue (4.0)", Field("epoch", "int32")),
            ),
        ),
        RecordType(
            12,
            "share_group_target_assignment_metadata",
            _GROUP,
            flexible_v0(
                "ShareGroupTargetAssignmentMetadataValue",
                Field("assignment_epoch", "int32"),
                ASSIGNMENT_TIMESTAMP,
            ),
        ),
        RecordType(
            13,
            "share_group_target_assignment_member",
            _MEMBER,
            flexible_v0(
                "ShareGroupTargetAssignmentMemberValue",
                Field("topic_partitions", "[]struct", fields=TOPIC_PARTITIONS),
            ),
        ),
        RecordType(
            14,
            "share_group_current_member_assignment",
            _MEMBER,
            flexible_v0(
                "ShareGroupCurrentMemberAssignmentValue",
                Field("member_epoch", "int32"),
                Field("previous_member_epoch", "int32"),
                Field("state", "int8"),
                Field("assigned_partitions", "[]struct", fields=TOPIC_PARTITIONS),
            ),
        ),
        RecordType(
            15,
            "share_group_state_partition_metadata",
            _GROUP,
            None,
            value_variants=(
                flexible_v0(
                    "ShareGroupStatePartitionMetadataValue",
                    Field(
                        "initializing_topics",
                        "[]struct",
                        fields=(
                            Field("topic_id", "uuid"),
                            Field("topic_name", "string"),
                            Field("partitions", "[]int32"),
                        ),
                    ),
                    Field(
                        "initialized_topics",
                        "[]struct",
                        fields=(
                            Field("topic_id", "uuid"),
                            Field("topic_name", "string"),
                            Field("partitions", "[]int32"),
                        ),
                    ),
                    Field(
                        "deleting_topics",
                        "[]struct",
                        fields=(Field("topic_id", "uuid"), Field("topic_name", "string")),
                    ),
                ),
                flexible_v0(
                    "ShareGroupStatePartitionMetadataValue (4.0)",
                    Field(
                        "initialized_topics",
                        "[]struct",
                        fields=(
                            Field("topic_id", "uuid"),
                            Field("topic_name", "string"),
                            Field("partitions", "[]int32"),
                        ),
                    ),
                    Field(
                        "deleting_topics",
                        "[]struct",
                        fields=(Field("topic_id", "uuid"), Field("topic_name", "string")),
                    ),
                ),
            ),
        ),
        RecordType(
            16,
            "consumer_group_regular_expression",
            (GROUP_ID, Field("regular_expression", "string")),
            flexible_v0(
                "ConsumerGroupRegularExpressionValue",
                Field("topics", "[]string"),
                Field("version", "int64"),
                Field("timestamp", "int64"),
            ),
        ),
        RecordType(
            17,
            "streams_group_metadata",
            _GROUP,
            flexible_v0(
                "StreamsGroupMetadataValue",
                Field("epoch", "int32"),
                Field("metadata_hash", "int64"),
                Field("validated_topology_epoch", "int32", tag=0, tagged_versions="0+", default=-1),
                Field(
                    "last_assignment_configs",
                    "[]struct",
                    nullable_versions="0+",
                    tag=1,
                    tagged_versions="0+",  # `"default": null` in Kafka's spec: no default (empty)
                    fields=KEY_VALUE,
                ),
                Field("stored_description_topology_epoch", "int32", tag=2, tagged_versions="0+", default=-1),
                Field("failed_description_topology_epoch", "int32", tag=3, tagged_versions="0+", default=-1),
            ),
        ),
        RecordType(
            18,
            "streams_group_partition_metadata",
            _GROUP,
            flexible_v0("StreamsGroupPartitionMetadataValue", *PARTITION_METADATA_TOPICS),
        ),
        RecordType(
            19,
            "streams_group_member_metadata",
            _MEMBER,
            flexible_v0(
                "StreamsGroupMemberMetadataValue",
                Field("instance_id", "string", nullable_versions="0+"),
                Field("rack_id", "string", nullable_versions="0+"),
                Field("client_id", "string"),
                Field("client_host", "string"),
                Field("rebalance_timeout_ms", "int32", default=-1),
                Field("topology_epoch", "int32"),
                Field("process_id", "string"),
                Field(
                    "user_endpoint",
                    "struct",
                    nullable_versions="0+",
                    fields=(Field("host", "string"), Field("port", "uint16")),
                ),
                Field("client_tags", "[]struct", fields=KEY_VALUE),
            ),
        ),
        RecordType(
            20,
            "streams_group_target_assignment_metadata",
            _GROUP,
            flexible_v0(
                "StreamsGroupTargetAssignmentMetadataValue",
                Field("assignment_epoch", "int32"),
                ASSIGNMENT_TIMESTAMP,
            ),
        ),
        RecordType(
            21,
            "streams_group_target_assignment_member",
            _MEMBER,
            flexible_v0(
                "StreamsGroupTargetAssignmentMemberValue",
                *(
                    Field(name, "[]struct", fields=TASK_IDS)
                    for name in ("active_tasks", "standby_tasks", "warmup_tasks")
                ),
            ),
        ),
        RecordType(
            22,
            "streams_group_current_member_assignment",
            _MEMBER,
            STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
        ),
        RecordType(23, "streams_group_topology", _GROUP, STREAMS_GROUP_TOPOLOGY_VALUE),
        RecordType(
            24,
            "streams_group_target_assignment_resolved_topic_ids",
            _GROUP,
            flexible_v0(
                "StreamsGroupTargetAssignmentResolvedTopicIdsValue",
                Field("assignment_epoch", "int32"),
                Field(
                    "resolved_topic_ids_by_subtopology",
                    "[]struct",
                    fields=(Field("subtopology_id", "string"), Field("topic_ids", "[]uuid")),
                ),
            ),
        ),
    )
}

RECORD_TYPE_OFFSET_COMMIT_LEGACY = 0
RECORD_TYPE_OFFSET_COMMIT = 1
RECORD_TYPE_GROUP_METADATA = 2
OFFSET_COMMIT_TYPES = frozenset({RECORD_TYPE_OFFSET_COMMIT_LEGACY, RECORD_TYPE_OFFSET_COMMIT})
RECORD_TYPE_CONSUMER_GROUP_REGULAR_EXPRESSION = 16
# Types whose value maps topic ids to names (pre-4.1 KIP-848, share early access, unreleased streams).
PARTITION_METADATA_TYPES = frozenset({4, 9, 18})
