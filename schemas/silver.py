"""Delta table schemas of the silver layer: typed rows decoded from bronze, and the quarantine.

Each constant states its grain. Every table starts with schemas.bronze.RECORD_ORIGIN (`cluster`,
`record_id` and where the raw record sat). Timestamps are Spark TIMESTAMPs (UTC) ending in `_at`;
durations end in `_ms`.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from schemas.bronze import RECORD_ORIGIN
from schemas.columns import column

TOPIC_PARTITIONS = ArrayType(
    StructType([column("topic", StringType()), column("partitions", ArrayType(IntegerType()))])
)
TOPIC_ID_PARTITIONS = ArrayType(
    StructType([column("topic_id", StringType()), column("partitions", ArrayType(IntegerType()))])
)


# silver: one offset commit or offset tombstone (record types 0 and 1). Aborted transactional commits
# are kept for audit with txn_state = 'aborted'; everything downstream counts only committed ones.
offset_commits_schema = StructType(
    [
        *RECORD_ORIGIN,
        column("group_id", StringType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
        column("is_tombstone", BooleanType(), False),
        column("committed_offset", LongType()),
        column("leader_epoch", IntegerType()),  # null before value v3; -1 when the client sent none
        column("metadata", StringType()),
        column("committed_at", TimestampType()),  # the broker's clock when it handled the commit
        column("expires_at", TimestampType()),  # v1 values only (commit with explicit retention)
        column("topic_id", StringType()),  # v4 values, Kafka's base64 Uuid form
        column("record_type", IntegerType(), False),
        column("value_version", IntegerType()),
        column("producer_id", LongType()),
        column("txn_state", StringType()),
    ]
)

# silver: one classic group record (type 2): a completed rebalance, an Empty transition, a static
# member replacement, or a tombstone (group deleted).
group_metadata_schema = StructType(
    [
        *RECORD_ORIGIN,
        column("group_id", StringType(), False),
        column("is_tombstone", BooleanType(), False),
        column("value_version", IntegerType()),
        column("protocol_type", StringType()),
        column("generation", IntegerType()),
        column("protocol", StringType()),  # the chosen assignor, e.g. range, cooperative-sticky
        column("leader", StringType()),
        column("state_changed_at", TimestampType()),  # currentStateTimestamp (v2+)
        column("member_count", IntegerType()),
    ]
)

# silver: one member in one classic group record.
group_members_schema = StructType(
    [
        *RECORD_ORIGIN,
        column("group_id", StringType(), False),
        column("generation", IntegerType(), False),
        column("member_index", IntegerType(), False),
        column("member_id", StringType(), False),
        column("group_instance_id", StringType()),
        column("client_id", StringType()),
        column("client_host", StringType()),
        column("rebalance_timeout_ms", IntegerType()),
        column("session_timeout_ms", IntegerType()),
        column("protocol_type", StringType()),
        column("protocol", StringType()),
        column("subscription_version", IntegerType()),
        column("subscribed_topics", ArrayType(StringType())),
        column("owned_partitions", TOPIC_PARTITIONS),
        column("subscription_generation_id", IntegerType()),
        column("rack_id", StringType()),
        column("assignor_generation", IntegerType()),  # from sticky / cooperative-sticky user data
        column("assignment_version", IntegerType()),
        column("assigned_partitions", TOPIC_PARTITIONS),
        column("subscription_user_data", BinaryType()),
        column("assignment_user_data", BinaryType()),
        column("payload_json", StringType()),  # decoded payloads of other protocol types (Connect), as JSON
        column("payload_error", StringType()),  # why the subscription/assignment bytes could not be read
    ]
)

# silver: one (member, topic, partition) assigned in one classic group record.
member_assignments_schema = StructType(
    [
        *RECORD_ORIGIN,
        column("group_id", StringType(), False),
        column("generation", IntegerType(), False),
        column("member_id", StringType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
    ]
)

# silver: one record of the modern group protocols: KIP-848 consumer groups (types 3-8, 16), share
# groups (9-15) and streams groups (17-24). Common fields are typed; value_json holds every field.
consumer_group_records_schema = StructType(
    [
        *RECORD_ORIGIN,
        column("record_type", IntegerType(), False),
        column("record_type_name", StringType(), False),
        column("group_id", StringType(), False),
        column("member_id", StringType()),
        column("regular_expression", StringType()),
        column("is_tombstone", BooleanType(), False),
        column("value_version", IntegerType()),
        column("group_epoch", IntegerType()),
        column("metadata_hash", LongType()),
        column("assignment_epoch", IntegerType()),
        column("assignment_at", TimestampType()),
        column("member_epoch", IntegerType()),
        column("previous_member_epoch", IntegerType()),
        column("member_state", IntegerType()),
        column("instance_id", StringType()),
        column("rack_id", StringType()),
        column("client_id", StringType()),
        column("client_host", StringType()),
        column("subscribed_topic_names", ArrayType(StringType())),
        column("subscribed_topic_regex", StringType()),
        column("rebalance_timeout_ms", IntegerType()),
        column("server_assignor", StringType()),
        column("assigned_partitions", TOPIC_ID_PARTITIONS),  # types 7, 8, 13, 14: target or current assignment
        column("partitions_pending_revocation", TOPIC_ID_PARTITIONS),
        column(
            "topic_names",
            ArrayType(
                StructType(
                    [  # types 4, 9: topic id -> name map
                        column("topic_id", StringType()),
                        column("topic_name", StringType()),
                        column("num_partitions", IntegerType()),
                    ]
                )
            ),
        ),
        column("resolved_topics", ArrayType(StringType())),  # type 16
        column("value_json", StringType()),
    ]
)

# silver: one record of `__share_group_state` (KIP-932): a share-partition's delivery state as the share
# coordinator wrote it. record_type 0 ShareSnapshot (the whole state), 1 ShareUpdate (the batches that
# changed since), either as a tombstone (is_tombstone; value columns null) when the state was deleted.
# Key: (cluster, group_id, topic_id, partition) in log order (source_partition, source_offset).
share_group_state_schema = StructType(
    [
        *RECORD_ORIGIN,
        column("group_id", StringType(), False),
        column("topic_id", StringType(), False),  # the consumed topic, Kafka's base64 Uuid form
        column("partition", IntegerType(), False),
        column("record_type", IntegerType(), False),
        column("record_type_name", StringType(), False),  # share_snapshot | share_update
        column("is_tombstone", BooleanType(), False),
        column("value_version", IntegerType()),
        column("snapshot_epoch", IntegerType()),
        column("state_epoch", IntegerType()),  # snapshots only
        column("leader_epoch", IntegerType()),
        column("start_offset", LongType()),  # updates: -1 when the start offset did not move
        column("delivery_complete_count", IntegerType()),  # KIP-1226 (4.2+); -1 when not written
        column("state_created_at", TimestampType()),  # snapshots only
        column("state_written_at", TimestampType()),  # snapshots only
        column(
            "state_batches",
            ArrayType(
                StructType(
                    [  # the offsets first_offset..last_offset, both included, in one delivery state
                        column("first_offset", LongType()),
                        column("last_offset", LongType()),
                        column("delivery_state", IntegerType()),  # 0 available, 2 acknowledged, 4 archived
                        column("delivery_count", IntegerType()),
                    ]
                )
            ),
        ),
    ]
)

# silver: one record that could not be decoded, with its raw bytes and the reason.
quarantine_schema = StructType(
    [
        *RECORD_ORIGIN,
        column("stage", StringType(), False),  # read | key | value
        column("reason", StringType(), False),
        column("record_type", IntegerType()),
        column("key", BinaryType()),
        column("value", BinaryType()),
        column("source_file", StringType()),
        column("capture_run_id", StringType()),
    ]
)
