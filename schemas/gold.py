"""Delta table schemas of the gold layer: history (generations, rebalances, movements) and metrics.

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
    StructType,
    TimestampType,
)

from schemas.columns import column
from schemas.streams_gold import STREAMS_SCHEMAS
from schemas.whatif import WHATIF_SCHEMAS

# Fields of structs held in arrays are nullable: Delta does not enforce NOT NULL inside arrays.
# Partitions assigned to a member, by topic. KIP-848 and share assignments name topics by id: `topic` is
# the resolved name where known (else the id), `topic_name_source` says where the name came from:
# partition_metadata | share_partition_metadata | offset_commit | user | cluster | single_subscription |
# unresolved. A streams group's (KIP-1071) entries are its active tasks: `topic` (and `topic_id`) the
# subtopology id, `topic_name_source` 'subtopology'; standby and warm-up tasks are not held here.
ASSIGNED_PARTITIONS = ArrayType(
    StructType(
        [
            column("topic", StringType()),
            column("partitions", ArrayType(IntegerType())),
            column("topic_id", StringType()),
            column("topic_name_source", StringType()),
        ]
    )
)


_GROUP_KEY = [
    column("cluster", StringType(), False),
    column("group_id", StringType(), False),
    column("incarnation", IntegerType(), False),
]

# KIP-848 and share only: one partition a member owned in an epoch, from the current-assignment (type 8, 14) record
# that first held it (`owned_from`) to the member's first record without it or its tombstone
# (`owned_until`, null while held). Pending revocation still counts as owned.
OWNERSHIP = StructType(
    [
        column("topic_id", StringType()),
        column("partition", IntegerType()),
        column("owned_from", TimestampType()),
        column("owned_until", TimestampType()),
    ]
)

# One member of a generation, as the rebalance left it (classic: the first record of the generation;
# KIP-848: the member's current assignment (type 8) when the epoch ended, before the next target epoch,
# not the target). Topics of KIP-848 members are resolved names where known, else ids.
MEMBER = StructType(
    [
        column("member_id", StringType()),
        column("group_instance_id", StringType()),  # static membership (KIP-345)
        column("client_id", StringType()),
        column("client_host", StringType()),
        column("rack_id", StringType()),
        column("session_timeout_ms", IntegerType()),  # null for KIP-848 members (a broker setting there)
        column("rebalance_timeout_ms", IntegerType()),
        column("subscribed_topics", ArrayType(StringType())),
        column("assigned_partitions", ASSIGNED_PARTITIONS),  # owned: classic, the assignment; KIP-848, see above
        column("target_partitions", ASSIGNED_PARTITIONS),  # KIP-848: the target (type 7) as of the epoch; classic null
        column("ownership", ArrayType(OWNERSHIP)),  # KIP-848: when each owned partition was taken and released
    ]
)

STATIC_REPLACEMENT = StructType(
    [
        column("group_instance_id", StringType()),
        column("previous_member_id", StringType()),
        column("member_id", StringType()),
        column("replaced_at", TimestampType()),
    ]
)

# gold: one generation of a classic group (type 2 records) or one target-assignment epoch of a KIP-848
# group (types 3-8), of a share group (KIP-932, types 10-14) or of a streams group (KIP-1071, types 17,
# 19-22), or one deletion (state 'deleted', generation null). Key: cluster, group_id, incarnation,
# generation. A static member replaced within its session timeout rewrites the same generation: it is
# listed in `static_replacements`, not counted as a rebalance.
generations_schema = StructType(
    [
        *_GROUP_KEY,
        column("generation", IntegerType()),
        column("group_protocol", StringType(), False),  # classic | consumer (KIP-848) | share | streams
        column("state", StringType(), False),  # stable | empty | deleted
        column("previous_generation", IntegerType()),
        column("skipped_generation_count", IntegerType()),  # rounds that never completed (no record written)
        column("protocol_type", StringType()),  # classic: consumer, connect, ...; KIP-848: consumer; share
        column("assignor", StringType()),  # classic: the chosen protocol; KIP-848: the server assignor if named
        column("leader", StringType()),
        column("join_completed_at", TimestampType()),  # classic: currentStateTimestamp; KIP-848: group epoch bump
        column("recorded_at", TimestampType(), False),  # the first record of this generation
        column("last_recorded_at", TimestampType(), False),
        # when every member held its new assignment: classic, the record itself (SyncGroup hands it out);
        # KIP-848, the last member's current assignment (type 8) reaching this epoch, null if it never did
        column("reconciled_at", TimestampType()),
        column("record_count", IntegerType(), False),
        column("member_count", IntegerType(), False),
        column("members", ArrayType(MEMBER)),
        column("static_replacements", ArrayType(STATIC_REPLACEMENT)),
        column("source_partition", IntegerType()),  # __consumer_offsets partition holding the group
        column("source_offset", LongType()),  # of the first record: the log order of generations
    ]
)

# gold: one partition assigned to one member in one generation, valid from `assigned_at` until
# `valid_until` (null while current): who owned what, and when. Classic: the generation's record to the
# next generation's. KIP-848: the same, except that a partition taken during the epoch starts at the
# type 8 record that gave it, and one released ends at the record (or tombstone) that let it go.
generation_assignments_schema = StructType(
    [
        *_GROUP_KEY,
        column("generation", IntegerType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
        column("group_protocol", StringType(), False),
        column("member_id", StringType(), False),
        column("member_key", StringType(), False),  # group_instance_id when static, else member_id: the owner
        column("group_instance_id", StringType()),
        column("client_id", StringType()),
        column("client_host", StringType()),
        column("topic_id", StringType()),  # KIP-848 only
        column("topic_name_source", StringType()),  # KIP-848 only, see ASSIGNED_PARTITIONS
        column("assigned_at", TimestampType(), False),
        column("valid_until", TimestampType()),
    ]
)

MEMBER_REF = StructType(
    [
        column("member_id", StringType()),
        column("group_instance_id", StringType()),
        column("client_id", StringType()),
        column("client_host", StringType()),
    ]
)

DEPARTURE = StructType(
    [
        column("member_id", StringType()),
        column("group_instance_id", StringType()),
        column("how", StringType()),  # clean | timeout | unknown
        column("last_seen_at", TimestampType()),  # last record or commit that shows it alive
        column("silent_ms", LongType()),  # from last_seen_at to the end of the join phase
        column("session_timeout_ms", IntegerType()),
    ]
)

# gold: one logical rebalance: the generation it produced (`generation`) and the one before it. A
# cooperative revoke round and its assign round are one logical rebalance (`round_count` 2).
rebalances_schema = StructType(
    [
        *_GROUP_KEY,
        column("generation", IntegerType(), False),
        column("previous_generation", IntegerType()),
        column("first_round_generation", IntegerType(), False),
        column("group_protocol", StringType(), False),
        column("rebalance_protocol", StringType(), False),  # eager | cooperative | consumer | share | streams
        column("assignor", StringType()),
        column("join_completed_at", TimestampType()),  # end of the (first) join phase
        column("completed_at", TimestampType(), False),  # the record of the final round
        column("round_count", IntegerType(), False),
        column("failed_round_count", IntegerType(), False),  # generation numbers skipped inside this rebalance
        column("member_count_before", IntegerType(), False),
        column("member_count_after", IntegerType(), False),
        column("members_joined", ArrayType(MEMBER_REF)),
        column("members_left", ArrayType(DEPARTURE)),
        column("static_replacements", ArrayType(STATIC_REPLACEMENT)),
        column("cause", StringType(), False),
        column("causes", ArrayType(StringType()), False),
        column("moved_partition_count", IntegerType(), False),
        column("newly_assigned_partition_count", IntegerType(), False),
        column("unassigned_partition_count", IntegerType(), False),
        column("minimal_moves", IntegerType(), False),
        column("minimal_moves_method", StringType(), False),  # exact | lower_bound
        column("stickiness", DoubleType()),  # minimal_moves / moved_partition_count; 1.0 when nothing moved
        column("skew", IntegerType()),  # max - min partitions per member after the rebalance
        column("skew_by_topic", MapType(StringType(), IntegerType())),
        column("estimated_pause_ms", LongType()),  # eager only: gap in the group's commits around the rebalance
        # commit_gap | no_commit_in_generation | null (the pause waits for a commit after the rebalance)
        column("pause_estimate_method", StringType()),
        # streams groups only: standby replicas that changed member (active tasks are the partition counts)
        column("moved_standby_task_count", IntegerType()),
    ]
)

# gold: one partition whose owner changed in one logical rebalance (owner before != owner after).
partition_movements_schema = StructType(
    [
        *_GROUP_KEY,
        column("generation", IntegerType(), False),
        column("previous_generation", IntegerType()),
        column("completed_at", TimestampType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
        column("from_member_id", StringType(), False),
        column("from_group_instance_id", StringType()),
        column("from_client_id", StringType()),
        column("from_client_host", StringType()),
        column("to_member_id", StringType(), False),
        column("to_group_instance_id", StringType()),
        column("to_client_id", StringType()),
        column("to_client_host", StringType()),
        column("is_forced", BooleanType(), False),  # the previous owner left or no longer subscribes
    ]
)

# gold: rebalances of one group in one hour or one day (`period` = hour | day), with storm flags.
rebalance_frequency_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("period", StringType(), False),
        column("period_start", TimestampType(), False),
        column("rebalance_count", IntegerType(), False),
        column("moved_partition_count", IntegerType(), False),
        column("storm_hour_count", IntegerType(), False),  # hours at or above the storm threshold
        column("is_storm", BooleanType(), False),
    ]
)

# gold: one (group, partition) at one end-offset snapshot, for groups holding a committed offset then.
lag_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
        column("observed_at", TimestampType(), False),
        column("committed_offset", LongType(), False),
        column("committed_at", TimestampType()),  # when the commit was appended
        column("end_offset", LongType(), False),
        column("offset_lag", LongType(), False),  # max(0, end_offset - committed_offset)
        column("is_committed_ahead", BooleanType(), False),  # committed > end offset (topic recreated, ...)
        column("time_lag_seconds", DoubleType()),
        column(
            "time_lag_method", StringType(), False
        ),  # caught_up | interpolated | lower_bound | too_few_points | committed_ahead
        column("time_lag_uncertainty_seconds", DoubleType()),  # width of the end-offset interval interpolated in
    ]
)

# gold: one (group, topic, UTC day): lag over the day's snapshots. A snapshot's topic lag is the sum of
# its partitions' offset lags and the largest of their time lags.
lag_daily_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("topic", StringType(), False),
        column("day", DateType(), False),
        column("snapshot_count", IntegerType(), False),
        column("max_offset_lag", LongType(), False),
        column("p95_offset_lag", DoubleType(), False),
        column("max_time_lag_seconds", DoubleType()),
        column("p95_time_lag_seconds", DoubleType()),
        column("has_time_lag_lower_bound", BooleanType(), False),  # some time lag is only a lower bound
    ]
)

# gold: Burrow's evaluation of one (group, partition) at one end-offset snapshot.
consumer_status_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
        column("evaluated_at", TimestampType(), False),
        column("status", StringType(), False),  # OK | WARN | STOP | STALL | REWIND
        column("current_lag", LongType(), False),  # at evaluation time, not frozen at commit time
        column("window_slot_count", IntegerType(), False),
        column("is_window_complete", BooleanType(), False),
        column("last_committed_offset", LongType(), False),
        column("last_commit_at", TimestampType(), False),
    ]
)

# gold: Burrow's group roll-up at the end of one evaluation window: OK | WARN | ERR.
group_status_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("evaluated_at", TimestampType(), False),  # end of the window
        column("status", StringType(), False),
        column("partition_count", IntegerType(), False),
        column("error_partition_count", IntegerType(), False),
        column("complete", DoubleType(), False),  # fraction of partitions with a full window
        column("total_lag", LongType(), False),
        column("max_lag", LongType(), False),
        column("max_lag_topic", StringType()),
        column("max_lag_partition", IntegerType()),
    ]
)

# gold: one group on one UTC day (from its first record to the evaluation day): activity, lag, status,
# and lifecycle as of the end of the day (stale, empty with offsets about to expire, deleted).
group_daily_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("day", DateType(), False),
        column("commit_count", LongType(), False),
        column("rebalance_count", IntegerType(), False),
        column("moved_partition_count", IntegerType(), False),
        column("max_offset_lag", LongType()),  # group total over partitions, per snapshot
        column("p95_offset_lag", DoubleType()),
        column("max_time_lag_seconds", DoubleType()),
        column("p95_time_lag_seconds", DoubleType()),
        column("worst_status", StringType()),  # OK | WARN | ERR
        column("group_state", StringType()),  # stable | empty | deleted | null (offsets only, no group record)
        column("last_commit_at", TimestampType()),
        column("days_since_last_commit", IntegerType()),
        column("is_stale", BooleanType(), False),
        column("offsets_expire_at", TimestampType()),  # when the broker may expire the group's offsets
        column("is_expiring_soon", BooleanType(), False),
        column("is_deleted", BooleanType(), False),
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
    **WHATIF_SCHEMAS,
    **STREAMS_SCHEMAS,
}
