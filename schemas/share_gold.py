"""Delta table schemas of the share-group backlog (KIP-932): the share-partition state over time and
`share_lag` at each end-offset snapshot. Kept apart from schemas/gold.py, which holds the consumer-group
history and metrics.

Offsets and epochs keep Kafka's values, -1 included where Kafka holds -1 (a state not initialised, a
count not written); `share_lag` alone turns into null what `kafka-share-groups --describe` prints as '-'.
"""

from __future__ import annotations

from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructType, TimestampType

from schemas.columns import column
from schemas.silver import share_group_state_schema

# Delivery states of a batch (Kafka's RecordState ids) that complete a record; any other is in flight.
DELIVERY_ACKNOWLEDGED = 2
DELIVERY_ARCHIVED = 4

STATE_BATCHES = share_group_state_schema["state_batches"].dataType  # as silver holds them

# Counts over the state batches at or after the start offset: delivered and not complete (in flight),
# acknowledged, archived (rejected, or over the delivery count limit); and the most
# deliveries any of them had.
STATE_COUNTS = [
    column("in_flight_count", LongType(), False),
    column("acknowledged_count", LongType(), False),
    column("archived_count", LongType(), False),
    column("max_delivery_count", IntegerType()),
]

# gold: one record of `__share_group_state` with the share-partition state in force once the share
# coordinator replayed it: a ShareSnapshot replaces the state, a ShareUpdate moves the start offset and
# leader epoch (unless -1), sets the delivery-complete count and merges its batches into the state's, a
# tombstone deletes it (is_deleted; the state columns null). Key: (cluster, group_id, topic_id,
# partition, source_offset); one __share_group_state partition holds all of a key's records.
share_partition_state_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("topic_id", StringType(), False),
        column("partition", IntegerType(), False),
        column("source_partition", IntegerType(), False),
        column("source_offset", LongType(), False),
        column("record_id", StringType(), False),
        column("recorded_at", TimestampType()),  # the state record's timestamp
        column("record_type_name", StringType(), False),  # share_snapshot | share_update
        column("is_deleted", BooleanType(), False),
        column("snapshot_epoch", IntegerType()),
        column("state_epoch", IntegerType()),
        column("leader_epoch", IntegerType()),
        column("start_offset", LongType()),  # -1: not initialised yet
        column("delivery_complete_count", IntegerType()),  # -1: not written (before KIP-1226)
        column("state_batches", STATE_BATCHES),
        column("in_flight_count", LongType()),
        column("acknowledged_count", LongType()),
        column("archived_count", LongType()),
        column("max_delivery_count", IntegerType()),
    ]
)

# gold: one (share group, topic, partition) at one end-offset snapshot, with the share-partition state
# in force then (the latest state record at or before observed_at); none where the state was deleted or
# not yet written. start_offset and lag are what `kafka-share-groups --describe --offsets` prints as
# START-OFFSET and LAG, null where it prints '-': the broker's lag is end offset - start offset -
# delivery-complete count, none when the state is not initialised or the count not written, and the
# admin client drops a negative one.
share_lag_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
        column("observed_at", TimestampType(), False),
        column("topic_id", StringType(), False),
        column("end_offset", LongType(), False),
        column("start_offset", LongType()),
        column("lag", LongType()),
        column("delivery_complete_count", IntegerType()),
        column("state_epoch", IntegerType()),
        column("leader_epoch", IntegerType()),
        *STATE_COUNTS,
        column("state_recorded_at", TimestampType(), False),
        column("state_record_id", StringType(), False),
        # Status: since when the partition has had a backlog at every snapshot with this start offset
        # (null without one), and whether that is longer than [share] stuck_after_minutes; whether a record
        # was delivered more than [share] redelivery_limit times.
        column("backlog_since", TimestampType()),
        column("is_start_offset_stuck", BooleanType(), False),
        column("is_redelivery_storm", BooleanType(), False),
    ]
)

SHARE_SCHEMAS = {"share_partition_state": share_partition_state_schema, "share_lag": share_lag_schema}
