"""Delta table schemas of the gold layer (history and metrics) and of the ops inputs it reads.

Each constant states its grain. Timestamps are Spark TIMESTAMPs (UTC) ending in `_at`; durations end
in `_ms` or `_seconds`. Every table carries `cluster`. A group's *incarnation* counts the deletions
(group tombstones) before it, so a group deleted and created again under the same name starts a new
history instead of mixing generation numbers.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _f(name, data_type, nullable=True):
    return StructField(name, data_type, nullable)


# Fields of structs held in arrays are nullable: Delta does not enforce NOT NULL inside arrays.
# Partitions assigned to a member, by topic. KIP-848 assignments name topics by id: `topic` is the
# resolved name where known (else the id), `topic_name_source` says where the name came from:
# partition_metadata | offset_commit | user | cluster | single_subscription | unresolved.
ASSIGNED_PARTITIONS = ArrayType(
    StructType(
        [
            _f("topic", StringType()),
            _f("partitions", ArrayType(IntegerType())),
            _f("topic_id", StringType()),
            _f("topic_name_source", StringType()),
        ]
    )
)


_GROUP_KEY = [
    _f("cluster", StringType(), False),
    _f("group_id", StringType(), False),
    _f("incarnation", IntegerType(), False),
]

# ops: one end-offset (log end offset) snapshot of one partition, e.g. from AdminClient.listOffsets
# (OffsetSpec.latest) taken by a capture job. The lag and status metrics are evaluated at these times.
end_offsets_schema = StructType(
    [
        _f("cluster", StringType(), False),
        _f("topic", StringType(), False),
        _f("partition", IntegerType(), False),
        _f("end_offset", LongType(), False),
        _f("observed_at", TimestampType(), False),
    ]
)

# ops: one topic id -> name pair for KIP-848 assignments (keyed by topic id). Provided by the user or
# listed from the cluster at capture time (`source` = 'user' | 'cluster').
topic_ids_schema = StructType(
    [
        _f("cluster", StringType(), False),
        _f("topic_id", StringType(), False),  # Kafka's base64 Uuid form, as in consumer_group_records
        _f("topic", StringType(), False),
        _f("source", StringType(), False),
    ]
)

# KIP-848 only: one partition a member owned in an epoch, from the current-assignment (type 8) record
# that first held it (`owned_from`) to the member's first record without it or its tombstone
# (`owned_until`, null while held). Pending revocation still counts as owned.
OWNERSHIP = StructType(
    [
        _f("topic_id", StringType()),
        _f("partition", IntegerType()),
        _f("owned_from", TimestampType()),
        _f("owned_until", TimestampType()),
    ]
)

# One member of a generation, as the rebalance left it (classic: the first record of the generation;
# KIP-848: the member's current assignment (type 8) when the epoch ended, before the next target epoch,
# not the target). Topics of KIP-848 members are resolved names where known, else ids.
MEMBER = StructType(
    [
        _f("member_id", StringType()),
        _f("group_instance_id", StringType()),  # static membership (KIP-345)
        _f("client_id", StringType()),
        _f("client_host", StringType()),
        _f("rack_id", StringType()),
        _f("session_timeout_ms", IntegerType()),  # null for KIP-848 members (a broker setting there)
        _f("rebalance_timeout_ms", IntegerType()),
        _f("subscribed_topics", ArrayType(StringType())),
        _f("assigned_partitions", ASSIGNED_PARTITIONS),  # owned: classic, the assignment; KIP-848, see above
        _f("target_partitions", ASSIGNED_PARTITIONS),  # KIP-848: the target (type 7) as of the epoch; classic null
        _f("ownership", ArrayType(OWNERSHIP)),  # KIP-848: when each owned partition was taken and released
    ]
)

STATIC_REPLACEMENT = StructType(
    [
        _f("group_instance_id", StringType()),
        _f("previous_member_id", StringType()),
        _f("member_id", StringType()),
        _f("replaced_at", TimestampType()),
    ]
)

# gold: one generation of a classic group (type 2 records) or one target-assignment epoch of a KIP-848
# group (types 3-8), or one deletion (state 'deleted', generation null). Key: cluster, group_id,
# incarnation, generation. A static member replaced within its session timeout rewrites the same
# generation: it is listed in `static_replacements`, not counted as a rebalance.
generations_schema = StructType(
    [
        *_GROUP_KEY,
        _f("generation", IntegerType()),
        _f("group_protocol", StringType(), False),  # classic | consumer (KIP-848)
        _f("state", StringType(), False),  # stable | empty | deleted
        _f("previous_generation", IntegerType()),
        _f("skipped_generation_count", IntegerType()),  # rounds that never completed (no record written)
        _f("protocol_type", StringType()),  # classic: consumer, connect, ...; KIP-848: consumer
        _f("assignor", StringType()),  # classic: the chosen protocol; KIP-848: the server assignor if named
        _f("leader", StringType()),
        _f("join_completed_at", TimestampType()),  # classic: currentStateTimestamp; KIP-848: group epoch bump
        _f("recorded_at", TimestampType(), False),  # the first record of this generation
        _f("last_recorded_at", TimestampType(), False),
        # when every member held its new assignment: classic, the record itself (SyncGroup hands it out);
        # KIP-848, the last member's current assignment (type 8) reaching this epoch, null if it never did
        _f("reconciled_at", TimestampType()),
        _f("record_count", IntegerType(), False),
        _f("member_count", IntegerType(), False),
        _f("members", ArrayType(MEMBER)),
        _f("static_replacements", ArrayType(STATIC_REPLACEMENT)),
        _f("source_partition", IntegerType()),  # __consumer_offsets partition holding the group
        _f("source_offset", LongType()),  # of the first record: the log order of generations
    ]
)

# gold: one partition assigned to one member in one generation, valid from `assigned_at` until
# `valid_until` (null while current): who owned what, and when. Classic: the generation's record to the
# next generation's. KIP-848: the same, except that a partition taken during the epoch starts at the
# type 8 record that gave it, and one released ends at the record (or tombstone) that let it go.
generation_assignments_schema = StructType(
    [
        *_GROUP_KEY,
        _f("generation", IntegerType(), False),
        _f("topic", StringType(), False),
        _f("partition", IntegerType(), False),
        _f("group_protocol", StringType(), False),
        _f("member_id", StringType(), False),
        _f("member_key", StringType(), False),  # group_instance_id when static, else member_id: the owner
        _f("group_instance_id", StringType()),
        _f("client_id", StringType()),
        _f("client_host", StringType()),
        _f("topic_id", StringType()),  # KIP-848 only
        _f("topic_name_source", StringType()),  # KIP-848 only, see ASSIGNED_PARTITIONS
        _f("assigned_at", TimestampType(), False),
        _f("valid_until", TimestampType()),
    ]
)

MEMBER_REF = StructType(
    [
        _f("member_id", StringType()),
        _f("group_instance_id", StringType()),
        _f("client_id", StringType()),
        _f("client_host", StringType()),
    ]
)

DEPARTURE = StructType(
    [
        _f("member_id", StringType()),
        _f("group_instance_id", StringType()),
        _f("how", StringType()),  # clean | timeout | unknown
        _f("last_seen_at", TimestampType()),  # last record or commit that shows it alive
        _f("silent_ms", LongType()),  # from last_seen_at to the end of the join phase
        _f("session_timeout_ms", IntegerType()),
    ]
)

# gold: one logical rebalance: the generation it produced (`generation`) and the one before it. A
# cooperative revoke round and its assign round are one logical rebalance (`round_count` 2).
rebalances_schema = StructType(
    [
        *_GROUP_KEY,
        _f("generation", IntegerType(), False),
        _f("previous_generation", IntegerType()),
        _f("first_round_generation", IntegerType(), False),
        _f("group_protocol", StringType(), False),
        _f("rebalance_protocol", StringType(), False),  # eager | cooperative | consumer (KIP-848 incremental)
        _f("assignor", StringType()),
        _f("join_completed_at", TimestampType()),  # end of the (first) join phase
        _f("completed_at", TimestampType(), False),  # the record of the final round
        _f("round_count", IntegerType(), False),
        _f("failed_round_count", IntegerType(), False),  # generation numbers skipped inside this rebalance
        _f("member_count_before", IntegerType(), False),
        _f("member_count_after", IntegerType(), False),
        _f("members_joined", ArrayType(MEMBER_REF)),
        _f("members_left", ArrayType(DEPARTURE)),
        _f("static_replacements", ArrayType(STATIC_REPLACEMENT)),
        _f("cause", StringType(), False),
        _f("causes", ArrayType(StringType()), False),
        _f("moved_partition_count", IntegerType(), False),
        _f("newly_assigned_partition_count", IntegerType(), False),
        _f("unassigned_partition_count", IntegerType(), False),
        _f("minimal_moves", IntegerType(), False),
        _f("minimal_moves_method", StringType(), False),  # exact | lower_bound
        _f("stickiness", DoubleType()),  # minimal_moves / moved_partition_count; 1.0 when nothing moved
        _f("skew", IntegerType()),  # max - min partitions per member after the rebalance
        _f("skew_by_topic", MapType(StringType(), IntegerType())),
        _f("estimated_pause_ms", LongType()),  # eager only: gap in the group's commits around the rebalance
        _f("pause_estimate_method", StringType()),  # commit_gap | null
    ]
)

# gold: one partition whose owner changed in one logical rebalance (owner before != owner after).
partition_movements_schema = StructType(
    [
        *_GROUP_KEY,
        _f("generation", IntegerType(), False),
        _f("previous_generation", IntegerType()),
        _f("completed_at", TimestampType(), False),
        _f("topic", StringType(), False),
        _f("partition", IntegerType(), False),
        _f("from_member_id", StringType(), False),
        _f("from_group_instance_id", StringType()),
        _f("from_client_id", StringType()),
        _f("from_client_host", StringType()),
        _f("to_member_id", StringType(), False),
        _f("to_group_instance_id", StringType()),
        _f("to_client_id", StringType()),
        _f("to_client_host", StringType()),
        _f("is_forced", BooleanType(), False),  # the previous owner left or no longer subscribes
    ]
)

# gold: rebalances of one group in one hour or one day (`period` = hour | day), with storm flags.
rebalance_frequency_schema = StructType(
    [
        _f("cluster", StringType(), False),
        _f("group_id", StringType(), False),
        _f("period", StringType(), False),
        _f("period_start", TimestampType(), False),
        _f("rebalance_count", IntegerType(), False),
        _f("moved_partition_count", IntegerType(), False),
        _f("storm_hour_count", IntegerType(), False),  # hours at or above the storm threshold
        _f("is_storm", BooleanType(), False),
    ]
)

# gold: one (group, partition) at one end-offset snapshot, for groups holding a committed offset then.
lag_schema = StructType(
    [
        _f("cluster", StringType(), False),
        _f("group_id", StringType(), False),
        _f("topic", StringType(), False),
        _f("partition", IntegerType(), False),
        _f("observed_at", TimestampType(), False),
        _f("committed_offset", LongType(), False),
        _f("committed_at", TimestampType()),  # when the commit was appended
        _f("end_offset", LongType(), False),
        _f("offset_lag", LongType(), False),  # max(0, end_offset - committed_offset)
        _f("is_committed_ahead", BooleanType(), False),  # committed > end offset (topic recreated, ...)
        _f("time_lag_seconds", DoubleType()),
        _f("time_lag_method", StringType(), False),  # caught_up | interpolated | lower_bound | too_few_points | committed_ahead
        _f("time_lag_uncertainty_seconds", DoubleType()),  # width of the end-offset interval interpolated in
    ]
)

# gold: one (group, topic, UTC day): lag over the day's snapshots. A snapshot's topic lag is the sum of
# its partitions' offset lags and the largest of their time lags.
lag_daily_schema = StructType(
    [
        _f("cluster", StringType(), False),
        _f("group_id", StringType(), False),
        _f("topic", StringType(), False),
        _f("day", DateType(), False),
        _f("snapshot_count", IntegerType(), False),
        _f("max_offset_lag", LongType(), False),
        _f("p95_offset_lag", DoubleType(), False),
        _f("max_time_lag_seconds", DoubleType()),
        _f("p95_time_lag_seconds", DoubleType()),
        _f("has_time_lag_lower_bound", BooleanType(), False),  # some time lag is only a lower bound
    ]
)

# gold: Burrow's evaluation of one (group, partition) at one end-offset snapshot.
consumer_status_schema = StructType(
    [
        _f("cluster", StringType(), False),
        _f("group_id", StringType(), False),
        _f("topic", StringType(), False),
        _f("partition", IntegerType(), False),
        _f("evaluated_at", TimestampType(), False),
        _f("status", StringType(), False),  # OK | WARN | STOP | STALL | REWIND
        _f("current_lag", LongType(), False),  # at evaluation time, not frozen at commit time
        _f("window_slot_count", IntegerType(), False),
        _f("is_window_complete", BooleanType(), False),
        _f("last_committed_offset", LongType(), False),
        _f("last_commit_at", TimestampType(), False),
    ]
)

# gold: Burrow's group roll-up at the end of one evaluation window: OK | WARN | ERR.
group_status_schema = StructType(
    [
        _f("cluster", StringType(), False),
        _f("group_id", StringType(), False),
        _f("evaluated_at", TimestampType(), False),  # end of the window
        _f("status", StringType(), False),
        _f("partition_count", IntegerType(), False),
        _f("error_partition_count", IntegerType(), False),
        _f("complete", DoubleType(), False),  # fraction of partitions with a full window
        _f("total_lag", LongType(), False),
        _f("max_lag", LongType(), False),
        _f("max_lag_topic", StringType()),
        _f("max_lag_partition", IntegerType()),
    ]
)

# gold: one group on one UTC day (from its first record to the evaluation day): activity, lag, status,
# and lifecycle as of the end of the day (stale, empty with offsets about to expire, deleted).
group_daily_schema = StructType(
    [
        _f("cluster", StringType(), False),
        _f("group_id", StringType(), False),
        _f("day", DateType(), False),
        _f("commit_count", LongType(), False),
        _f("rebalance_count", IntegerType(), False),
        _f("moved_partition_count", IntegerType(), False),
        _f("max_offset_lag", LongType()),  # group total over partitions, per snapshot
        _f("p95_offset_lag", DoubleType()),
        _f("max_time_lag_seconds", DoubleType()),
        _f("p95_time_lag_seconds", DoubleType()),
        _f("worst_status", StringType()),  # OK | WARN | ERR
        _f("group_state", StringType()),  # stable | empty | deleted | null (offsets only, no group record)
        _f("last_commit_at", TimestampType()),
        _f("days_since_last_commit", IntegerType()),
        _f("is_stale", BooleanType(), False),
        _f("offsets_expire_at", TimestampType()),  # when the broker may expire the group's offsets
        _f("is_expiring_soon", BooleanType(), False),
        _f("is_deleted", BooleanType(), False),
    ]
)

GOLD_SCHEMAS = {
    "generations": generations_schema,
    "generation_assignments": generation_assignments_schema,
    "rebalances": rebalances_schema,
    "partition_movements": partition_movements_schema,
    "rebalance_frequency": rebalance_frequency_schema,
    "lag": lag_schema,
    "lag_daily": lag_daily_schema,
    "consumer_status": consumer_status_schema,
    "group_status": group_status_schema,
    "group_daily": group_daily_schema,
}
