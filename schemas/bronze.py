"""Delta table schema of the bronze layer: `raw_records`, every Kafka record as captured.

Every bronze and silver table starts with RECORD_ORIGIN: `cluster` and `record_id`, the natural key of
the raw record a row came from: "<cluster>/<source_partition>/<source_offset>" for a `__consumer_offsets`
record, "<cluster>/<source_topic>/<source_partition>/<source_offset>" for another topic's, or
"<cluster>/<source_file>@<byte position>" for bytes that could not be framed as a record at all.
Timestamps are Spark TIMESTAMPs (UTC) ending in `_at`.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from schemas.columns import column

RECORD_ORIGIN = [
    column("cluster", StringType(), False),
    column("record_id", StringType(), False),
    column("source_partition", IntegerType()),
    column("source_offset", LongType()),
    column("record_at", TimestampType()),
]

# bronze: one Kafka record as captured (key/value bytes untouched), or one unreadable fragment of a
# segment file (read_error set, the bytes in `value`). Append-only; never loses a record.
raw_records_schema = StructType(
    [
        *RECORD_ORIGIN,
        column("timestamp_type", StringType()),
        column("key", BinaryType()),
        column("value", BinaryType()),  # null = tombstone
        column("producer_id", LongType()),
        column("producer_epoch", IntegerType()),
        column("is_transactional", BooleanType()),
        column("txn_state", StringType()),  # committed | aborted | pending; null when not transactional
        column("batch_base_offset", LongType()),
        column("batch_position", LongType()),
        column("source_kind", StringType(), False),  # segment | raw_table | kafka
        column("source_file", StringType()),
        column("read_error", StringType()),
        column("capture_run_id", StringType(), False),
        # __consumer_offsets | __share_group_state. Last, where Delta adds it to a table written before
        # it existed; those tables' rows hold null, which means __consumer_offsets (all they could hold).
        column("source_topic", StringType()),
    ]
)
