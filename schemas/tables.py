"""Delta table schemas of the bronze and silver layers, and the decoder's intermediate row.

Each constant states its grain. Timestamps are Spark TIMESTAMPs (UTC) ending in `_at`; durations end
in `_ms`. Every table carries `cluster` and `record_id`, the natural key of the raw record it came
from: "<cluster>/<source_partition>/<source_offset>" for a Kafka record, or
"<cluster>/<source_file>@<byte position>" for bytes that could not be framed as a record at all.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _f(name, data_type, nullable=True):
    return StructField(name, data_type, nullable)


TOPIC_PARTITIONS = ArrayType(StructType([_f("topic", StringType()), _f("partitions", ArrayType(IntegerType()))]))
TOPIC_ID_PARTITIONS = ArrayType(StructType([_f("topic_id", StringType()), _f("partitions", ArrayType(IntegerType()))]))

_RECORD_ORIGIN = [
    _f("cluster", StringType(), False),
    _f("record_id", StringType(), False),
    _f("source_partition", IntegerType()),
    _f("source_offset", LongType()),
    _f("record_at", TimestampType()),
]

# bronze: one Kafka record as captured (key/value bytes untouched), or one unreadable fragment of a
# segment file (read_error set, the bytes in `value`). Append-only; never loses a record.
raw_records_schema = StructType(
    [
        *_RECORD_ORIGIN,
        _f("timestamp_type", StringType()),
        _f("key", BinaryType()),
        _f("value", BinaryType()),  # null = tombstone
        _f("producer_id", LongType()),
        _f("producer_epoch", IntegerType()),
        _f("is_transactional", BooleanType()),
        _f("txn_state", StringType()),  # committed | aborted | pending; null when not transactional
        _f("batch_base_offset", LongType()),
        _f("batch_position", LongType()),
        _f("source_kind", StringType(), False),  # segment | raw_table | kafka
        _f("source_file", StringType()),
        _f("read_error", StringType()),
        _f("capture_run_id", StringType(), False),
    ]
)

# silver: one offset commit or offset tombstone (record types 0 and 1). Aborted transactional commits
# are kept for audit with txn_state = 'aborted'; everything downstream counts only committed ones.
offset_commits_schema = StructType(
    [
        *_RECORD_ORIGIN,
        _f("group_id", StringType(), False),
        _f("topic", StringType(), False),
        _f("partition", IntegerType(), False),
        _f("is_tombstone", BooleanType(), False),
        _f("committed_offset", LongType()),
        _f("leader_epoch", IntegerType()),  # null before value v3; -1 when the client sent none
        _f("metadata", StringType()),
        _f("committed_at", TimestampType()),  # the broker's clock when it handled the commit
        _f("expires_at", TimestampType()),  # v1 values only (commit with explicit retention)
        _f("topic_id", StringType()),  # v4 values, Kafka's base64 Uuid form
        _f("record_type", IntegerType(), False),
        _f("value_version", IntegerType()),
        _f("producer_id", LongType()),
        _f("txn_state", StringType()),
    ]
)

# silver: one classic group record (type 2): a completed rebalance, an Empty transition, a static
# member replacement, or a tombstone (group deleted).
group_metadata_schema = StructType(
    [
        *_RECORD_ORIGIN,
        _f("group_id", StringType(), False),
        _f("is_tombstone", BooleanType(), False),
        _f("value_version", IntegerType()),
        _f("protocol_type", StringType()),
        _f("generation", IntegerType()),
        _f("protocol", StringType()),  # the chosen assignor, e.g. range, cooperative-sticky
        _f("leader", StringType()),
        _f("state_changed_at", TimestampType()),  # currentStateTimestamp (v2+)
        _f("member_count", IntegerType()),
    ]
)

# silver: one member in one classic group record.
group_members_schema = StructType(
    [
        *_RECORD_ORIGIN,
        _f("group_id", StringType(), False),
        _f("generation", IntegerType(), False),
        _f("member_index", IntegerType(), False),
        _f("member_id", StringType(), False),
        _f("group_instance_id", StringType()),
        _f("client_id", StringType()),
        _f("client_host", StringType()),
        _f("rebalance_timeout_ms", IntegerType()),
        _f("session_timeout_ms", IntegerType()),
        _f("protocol_type", StringType()),
        _f("protocol", StringType()),
        _f("subscription_version", IntegerType()),
        _f("subscribed_topics", ArrayType(StringType())),
        _f("owned_partitions", TOPIC_PARTITIONS),
        _f("subscription_generation_id", IntegerType()),
        _f("rack_id", StringType()),
        _f("assignor_generation", IntegerType()),  # from sticky / cooperative-sticky user data
        _f("assignment_version", IntegerType()),
        _f("assigned_partitions", TOPIC_PARTITIONS),
        _f("subscription_user_data", BinaryType()),
        _f("assignment_user_data", BinaryType()),
        _f("payload_json", StringType()),  # decoded payloads of other protocol types (Connect), as JSON
        _f("payload_error", StringType()),  # why the subscription/assignment bytes could not be read
    ]
)

# silver: one (member, topic, partition) assigned in one classic group record.
member_assignments_schema = StructType(
    [
        *_RECORD_ORIGIN,
        _f("group_id", StringType(), False),
        _f("generation", IntegerType(), False),
        _f("member_id", StringType(), False),
        _f("topic", StringType(), False),
        _f("partition", IntegerType(), False),
    ]
)

# silver: one record of the modern group protocols: KIP-848 consumer groups (types 3-8, 16), share
# groups (9-15) and streams groups (17-24). Common fields are typed; value_json holds every field.
consumer_group_records_schema = StructType(
    [
        *_RECORD_ORIGIN,
        _f("record_type", IntegerType(), False),
        _f("record_type_name", StringType(), False),
        _f("group_id", StringType(), False),
        _f("member_id", StringType()),
        _f("regular_expression", StringType()),
        _f("is_tombstone", BooleanType(), False),
        _f("value_version", IntegerType()),
        _f("group_epoch", IntegerType()),
        _f("metadata_hash", LongType()),
        _f("assignment_epoch", IntegerType()),
        _f("assignment_at", TimestampType()),
        _f("member_epoch", IntegerType()),
        _f("previous_member_epoch", IntegerType()),
        _f("member_state", IntegerType()),
        _f("instance_id", StringType()),
        _f("rack_id", StringType()),
        _f("client_id", StringType()),
        _f("client_host", StringType()),
        _f("subscribed_topic_names", ArrayType(StringType())),
        _f("subscribed_topic_regex", StringType()),
        _f("rebalance_timeout_ms", IntegerType()),
        _f("server_assignor", StringType()),
        _f("assigned_partitions", TOPIC_ID_PARTITIONS),  # types 7, 8, 13, 14: target or current assignment
        _f("partitions_pending_revocation", TOPIC_ID_PARTITIONS),
        _f(
            "topic_names",
            ArrayType(
                StructType(
                    [  # types 4, 9: topic id -> name map
                        _f("topic_id", StringType()),
                        _f("topic_name", StringType()),
                        _f("num_partitions", IntegerType()),
                    ]
                )
            ),
        ),
        _f("resolved_topics", ArrayType(StringType())),  # type 16
        _f("value_json", StringType()),
    ]
)

# silver: one record that could not be decoded, with its raw bytes and the reason.
quarantine_schema = StructType(
    [
        *_RECORD_ORIGIN,
        _f("stage", StringType(), False),  # read | key | value
        _f("reason", StringType(), False),
        _f("record_type", IntegerType()),
        _f("key", BinaryType()),
        _f("value", BinaryType()),
        _f("source_file", StringType()),
        _f("capture_run_id", StringType()),
    ]
)

# ops: one run of a job, with the counts that prove nothing was lost.
job_runs_schema = StructType(
    [
        _f("run_id", StringType(), False),
        _f("job", StringType(), False),
        _f("cluster", StringType()),
        _f("started_at", TimestampType(), False),
        _f("finished_at", TimestampType()),
        _f("outcome", StringType(), False),  # succeeded | failed | refused (another run held the lock)
        _f("inputs", ArrayType(StringType())),
        _f("raw_count", LongType()),
        _f("decoded_count", LongType()),
        _f("quarantined_count", LongType()),
        _f("counts_json", StringType()),  # per-table and per-stage counts
        _f("message", StringType()),
        _f("duration_seconds", DoubleType()),
        _f("run_date", DateType()),  # --run-date, when given
    ]
)
