"""Compaction loss, counted: the offsets a read_committed capture did not get back, read again one record
batch at a time to tell transaction markers and aborted records (not loss) from what the log cleaner
removed (loss). Used by the capture job; see docs/capture.md.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.kafka_security import (
    KafkaConnection,
    KafkaUnavailable,
    call_kafka,
    client_properties,
    close_quietly,
    java_properties,
)
from schemas.coordinator_records import CONSUMER_OFFSETS_TOPIC
from transforms.bronze import missing_offset_ranges, partition_spans

GAP_KINDS = ("compaction_gaps", "transaction_markers", "aborted_records", "gaps_unclassified")


class GapProbe:
    """Reads offsets a read_committed capture did not get back with read_uncommitted, one record batch per
    fetch (fetch sizes of one byte: a broker always returns the first batch whole, and only it).

    Per batch, after a seek: records returned inside the gap were hidden by read_committed (aborted
    transactional records); a batch that returns nothing yet moves the position is a control batch (a
    transaction marker, one offset); offsets the fetches step over without any batch were removed by the
    log cleaner. A cleaner-kept empty batch also reads as a marker, and an aborted transaction the cleaner
    already removed reads as removed (see docs/capture.md).
    """

    def __init__(self, spark: SparkSession, connection: KafkaConnection, topic: str, max_batches: int):
        self.spark, self.connection, self.topic = spark, connection, topic
        self.batches_left = max_batches
        self._consumer = None

    def _consumer_for(self, partition: int):
        jvm = self.spark._jvm
        if self._consumer is None:
            deserializer = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
            settings = client_properties(self.connection, "groupscope-gap-probe") | {
                "isolation.level": "read_uncommitted",
                "max.partition.fetch.bytes": "1",
                "fetch.max.bytes": "1",
                "enable.auto.commit": "false",
                "auto.offset.reset": "none",
                "key.deserializer": deserializer,
                "value.deserializer": deserializer,
            }
            properties = java_properties(self.spark, settings)
            self._consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(properties)
        partition_ref = jvm.org.apache.kafka.common.TopicPartition(self.topic, partition)
        self._consumer.assign(jvm.java.util.Collections.singletonList(partition_ref))
        return self._consumer, partition_ref

    def _next_batch(self, consumer, partition_ref, position: int) -> tuple[list[int], int]:
        """Offsets of the records of the next batch at or after `position`, and the position after it."""
        poll_for = self.spark._jvm.java.time.Duration.ofMillis(500)
        deadline = time.monotonic() + self.connection.timeout_s
        while True:
            action = f"reading back offsets from {position} of {self.topic}-{partition_ref.partition()}"
            records = call_kafka(self.connection, action, lambda: consumer.poll(poll_for))
            offsets = [record.offset() for record in records.records(partition_ref)]
            next_position = consumer.position(partition_ref)
            if offsets or next_position != position:
                return offsets, next_position
            if time.monotonic() > deadline:
                raise KafkaUnavailable(
                    self.connection.redact(f"{self.connection.describe()}: {action}: no answer within the timeout")
                )

    def classify(self, partition: int, start: int, end: int) -> Counter:
        """Counts of GAP_KINDS for the offsets [start, end) of one partition."""
        kinds: Counter = Counter()
        consumer, partition_ref = self._consumer_for(partition)
        consumer.seek(partition_ref, start)
        position = start
        while position < end:
            if self.batches_left <= 0:
                kinds["gaps_unclassified"] += end - position
                break
            returned, next_position = self._next_batch(consumer, partition_ref, position)
            self.batches_left -= 1
            stop = min(next_position, end)
            if returned:
                hidden = sum(1 for offset in returned if position <= offset < stop)
                kinds["aborted_records"] += hidden
                kinds["compaction_gaps"] += stop - position - hidden
            else:
                is_marker = next_position - 1 < end
                kinds["transaction_markers"] += int(is_marker)
                kinds["compaction_gaps"] += stop - position - int(is_marker)
            position = next_position
        return kinds

    def close(self) -> None:
        if self._consumer is not None:
            close_quietly(self.spark, self._consumer)


@dataclass
class GapAccount:
    """What one run found in the offsets it did not capture."""

    kinds: Counter
    gaps_before_first_capture: int = 0
    compacted_partitions: frozenset[int] = frozenset()


def account_for_gaps(
    spark: SparkSession,
    table: str,
    cluster: str,
    batch_rows: DataFrame,
    probe: GapProbe,
    account: GapAccount,
    is_first_capture: bool,
) -> None:
    """Adds one micro-batch's missing offsets to `account`. Spans are counted first (one small aggregate);
    missing offsets are read back only after the cluster's first capture: before it, they are history
    the cleaner (or a transaction) took before groupscope started, and can be many."""
    held = (
        spark.table(table)
        .where((F.col("cluster") == F.lit(cluster)) & F.col("source_offset").isNotNull())
        # Only the group coordinator's log (null: rows of earlier versions): __share_group_state's
        # partitions and offsets, ingested from segments, are another log's.
        .where(F.coalesce(F.col("source_topic"), F.lit(CONSUMER_OFFSETS_TOPIC)) == F.lit(CONSUMER_OFFSETS_TOPIC))
        .select("source_partition", "source_offset")
    )
    spans = partition_spans(batch_rows.select("source_partition", "source_offset"), held).collect()
    incomplete = [span for span in spans if span["last_offset"] - span["first_offset"] + 1 > span["held_count"]]
    if is_first_capture:
        account.gaps_before_first_capture += sum(
            span["last_offset"] - span["first_offset"] + 1 - span["held_count"] for span in incomplete
        )
        return
    if not incomplete:
        return
    to_probe = [(span["source_partition"], span["first_offset"], span["last_offset"]) for span in incomplete]
    probe_spans = spark.createDataFrame(to_probe, "source_partition int, first_offset long, last_offset long")
    gaps = missing_offset_ranges(probe_spans, held).orderBy("source_partition", "start_offset")
    compacted = set(account.compacted_partitions)
    for gap in gaps.toLocalIterator():
        kinds = probe.classify(gap["source_partition"], gap["start_offset"], gap["end_offset"])
        if kinds["compaction_gaps"]:
            compacted.add(gap["source_partition"])
        account.kinds.update(kinds)
    account.compacted_partitions = frozenset(compacted)
