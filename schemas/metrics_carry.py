"""Delta table schema of the state the metrics step carries from one run to the next.

The metrics step's outputs (lag, consumer_status, ...) are evaluated at end-offset snapshots and look
back a bounded way from each: to the latest offset record before it, and to Burrow's window of the last
`status_intervals` slots. A night that continues from the tables needs exactly that much of each group
partition's past, and this table holds it (transforms/gold/metrics_carry.py says why it suffices).
It is a function of silver alone: a from-scratch run and any series of nights give the same rows.
"""

from __future__ import annotations

from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from schemas.columns import column

# Where a record is in the log: what lives (commits between tombstones) are counted along.
LOG_POSITION = StructType([StructField("source_partition", IntegerType()), StructField("source_offset", LongType())])

# ops: one visible offset record (commit or tombstone) in the last `status_intervals` + 1 non-empty
# min-distance buckets of its group partition, or, once it had a tombstone, any record evaluated since.
# Key: cluster, group_id, topic, partition, source_partition, source_offset. The record columns are
# those of silver offset_commits; the last three are the group partition's, on each of its rows.
metrics_carry_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
        column("source_partition", IntegerType()),
        column("source_offset", LongType()),
        column("record_at", TimestampType()),  # null for records without a timestamp (magic 0): before all
        column("is_tombstone", BooleanType(), False),
        column("committed_offset", LongType()),
        column("committed_at", TimestampType()),
        column("expires_at", TimestampType()),
        column("has_tombstone", BooleanType(), False),  # the group partition had a tombstone at any time
        # Declared after the first version of this table (Delta adds columns last, nullable):
        column("holds_every_record", BooleanType()),  # the carry holds all its visible records
        column("last_position", LOG_POSITION),  # the latest log position of any of its visible records
    ]
)
