"""Delta table schemas of the what-if replay and of over-provisioned groups (gold).

`rebalance_whatif`: one row per logical rebalance of a consumer group (classic groups of protocol type
`consumer`, and KIP-848 `consumer` groups) and per assignor Kafka offers it, replayed through Kafka's own
assignor code (jvm/assignors) from the same members, subscriptions and previous owners.
`generation_capacity`: one row per generation of a classic or KIP-848 group: how many members own
nothing, partitions per member, and the share of members doing work.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from schemas.columns import column

_REBALANCE_KEY = [
    column("cluster", StringType(), False),
    column("group_id", StringType(), False),
    column("incarnation", IntegerType(), False),
    column("generation", IntegerType(), False),  # the generation the rebalance produced (as in `rebalances`)
]

# One partition a replayed assignor gave one member. `member_key`: group_instance_id when static, else member_id.
REPLAYED_PARTITION = StructType(
    [
        column("member_key", StringType()),
        column("topic", StringType()),
        column("partition", IntegerType()),
    ]
)

# gold: one (logical rebalance, assignor). Counts compare the replayed assignment with the owners before the
# rebalance, as `rebalances` counts the real one. `assignor`: range | roundrobin | sticky | cooperative-sticky
# for classic groups (the consumer's assignors), uniform | range for KIP-848 groups (the broker's).
rebalance_whatif_schema = StructType(
    [
        *_REBALANCE_KEY,
        column("previous_generation", IntegerType()),
        column("completed_at", TimestampType(), False),
        column("group_protocol", StringType(), False),  # classic | consumer
        column("actual_assignor", StringType()),  # the assignor the group used (rebalances.assignor)
        column("assignor", StringType(), False),
        column("is_actual_assignor", BooleanType(), False),
        column("is_eager", BooleanType(), False),  # range, roundrobin, sticky: every member revokes all first
        column("round_count", IntegerType(), False),  # cooperative-sticky: 2 when the first round revoked some
        column("member_count", IntegerType(), False),
        column("assigned_partition_count", IntegerType(), False),
        # owned before (KIP-848: targeted) by another member, still in the group or gone
        column("moved_partition_count", IntegerType(), False),
        column("newly_assigned_partition_count", IntegerType(), False),  # no owner before
        column("unassigned_partition_count", IntegerType(), False),  # owned before, nobody's after
        # partitions revoked, so not consumed, during the rebalance: eager, all the remaining members owned
        # (revoked before joining); cooperative-sticky, those its first round revoked; KIP-848, those moved
        column("revoked_partition_count", IntegerType(), False),
        column("minimal_moves", IntegerType(), False),  # of the membership, as in rebalances (same for every assignor)
        column("minimal_moves_method", StringType(), False),  # exact | lower_bound
        column("stickiness", DoubleType(), False),  # minimal_moves / moved_partition_count; 1.0 when nothing moved
        column("skew", IntegerType()),  # max - min partitions per member, idle members counted as 0
        column("idle_member_count", IntegerType(), False),  # members the assignor gave nothing
        # eager assignors only: the stop-the-world pause the rebalance implied, taken from the real
        # rebalance's commit gap (rebalances.estimated_pause_ms) when the group rebalanced eagerly; null otherwise
        column("estimated_pause_ms", LongType()),
        column("actual_moved_partition_count", IntegerType(), False),  # rebalances.moved_partition_count
        column("is_same_as_actual", BooleanType(), False),  # the replayed assignment equals the real one after
        column("assignment", ArrayType(REPLAYED_PARTITION), False),
    ]
)

IDLE_MEMBER = StructType(
    [
        column("member_id", StringType()),
        column("group_instance_id", StringType()),
        column("client_id", StringType()),
        column("client_host", StringType()),
        column("subscribed_topics", ArrayType(StringType())),
        # more_members_than_partitions: its topics' partitions all went to others, fewer than the members;
        # assignor_gave_none: the same with partitions enough for all (a cooperative first round, range over
        # small topics); subscription_matches_nothing: no partition of a topic it subscribes to was assigned;
        # unknown: its subscription was not decoded
        column("reason", StringType()),
    ]
)

# gold: one generation (classic) or epoch (KIP-848) with members. `idle_since`: when the group's current run
# of consecutive generations with an idle member began (null when this one has none).
generation_capacity_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("incarnation", IntegerType(), False),
        column("generation", IntegerType(), False),
        column("group_protocol", StringType(), False),
        column("recorded_at", TimestampType(), False),
        column("valid_until", TimestampType()),  # the next generation's first record; null while current
        column("member_count", IntegerType(), False),
        column("assigned_partition_count", IntegerType(), False),
        column("idle_member_count", IntegerType(), False),
        column("idle_members", ArrayType(IDLE_MEMBER), False),
        column("min_partitions_per_member", IntegerType(), False),
        column("max_partitions_per_member", IntegerType(), False),
        column("avg_partitions_per_member", DoubleType(), False),
        column("capacity_used", DoubleType(), False),  # members owning something / members
        column("idle_since", TimestampType()),
    ]
)

WHATIF_SCHEMAS = {
    "rebalance_whatif": rebalance_whatif_schema,
    "generation_capacity": generation_capacity_schema,
}
