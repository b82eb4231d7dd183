"""From coordinator appends to what a broker's disk holds for one `__consumer_offsets` partition.

- Batching as the coordinators do it: the 3.9 (Scala) coordinator writes one batch per append with
  baseSequence -1; the 4.x coordinator runtime writes baseSequence 0 and lets appends that arrive
  within its linger time share a batch. Transactional appends and markers always have their own.
- Compaction as the log cleaner leaves it: the log's first segment (rolled at `clean_before_ms`) is
  cleaned. Of each key only its latest record in that segment stays (aborted transactional records
  go; markers and tombstones stay, their batches stamped with a delete horizon, KIP-534). Offsets
  are never renumbered, so gaps appear; a batch keeps its base and last offset; an emptied batch
  goes, unless it is its producer's last (kept empty, as the cleaner keeps producer state).
  The cleaner never passes an open transaction, so the cleaned segment ends before one.
- Segments roll at `segment_bytes` (offsets.topic.segment.bytes, 100 MiB by default), each named
  by the base offset of its first batch.
- The raw-table form: what Spark's Kafka source reads with isolation.level=read_committed (no
  aborted records, no markers, nothing at or after the last stable offset).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.batch_builder import COMMIT, Rec, batch_v2, frame_v2, marker_record
from bench.simulate import Append
from transforms.decoder.log_transactions import TXN_ABORTED, TXN_COMMITTED, TXN_PENDING

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
LINGER_MS = 5  # group.coordinator.append.linger.ms
DELETE_RETENTION_MS = 86_400_000  # delete.retention.ms: the cleaner's delete horizon
CLEANER_LAG_MS = 60_000  # the cleaner runs this long after the segment rolled
MAX_BATCH_RECORDS = 1_000
NO_TIMESTAMP = -1


@dataclass(slots=True)
class Batch:
    base_offset: int
    records: list[tuple[int, int, bytes, bytes | None]]  # offset, timestamp, key, value
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    marker: int | None
    is_scala_coordinator: bool
    last_offset: int = -1
    txn_state: str | None = None
    has_delete_horizon: bool = False
    horizon_or_max_ms: int = NO_TIMESTAMP  # cleaned: the delete horizon, or an emptied batch's max timestamp

    @property
    def max_timestamp(self) -> int:
        return max(record[1] for record in self.records)


@dataclass
class PartitionFiles:
    """What was written for one partition, and what it holds."""

    partition: int
    segments: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    raw_rows: dict[str, list] = field(default_factory=lambda: {"key": [], "value": [], "offset": [], "timestamp": []})


def batches_of(appends: list[Append]) -> list[Batch]:
    batches: list[Batch] = []
    offset = 0
    for append in appends:
        entries = [(key, value) for key, value in append.records]
        if append.marker is not None:
            entries = [(None, None)]  # the marker's record takes one offset
        previous = batches[-1] if batches else None
        can_share = (
            previous is not None
            and append.producer_id == -1
            and previous.producer_id == -1
            and not append.is_scala_coordinator
            and not previous.is_scala_coordinator
            and append.at_ms - previous.records[0][1] <= LINGER_MS
            and len(previous.records) + len(entries) <= MAX_BATCH_RECORDS
        )
        if not can_share:
            previous = Batch(offset, [], append.producer_id, append.producer_epoch, append.is_transactional,
                             append.marker, append.is_scala_coordinator)  # fmt: skip
            batches.append(previous)
        for key, value in entries:
            previous.records.append((offset, append.at_ms, key, value))
            offset += 1
        previous.last_offset = offset - 1
    return [batch for batch in batches if batch.records]


def resolve_transactions(batches: list[Batch]) -> None:
    """Each transactional data batch takes the outcome of the next marker of its producer."""
    open_batches: dict[int, list[Batch]] = {}
    for batch in batches:
        if batch.marker is not None:
            outcome = TXN_COMMITTED if batch.marker == COMMIT else TXN_ABORTED
            for waiting in open_batches.pop(batch.producer_id, []):
                waiting.txn_state = outcome
        elif batch.is_transactional:
            batch.txn_state = TXN_PENDING
            open_batches.setdefault(batch.producer_id, []).append(batch)


def cleanable_end(batches: list[Batch], clean_before_ms: int) -> int:
    """Index of the first batch after the cleaned segment: rolled at clean_before_ms, before any open transaction."""
    end = next((index for index, batch in enumerate(batches) if batch.records[0][1] >= clean_before_ms), len(batches))
    marker_index: dict[int, int] = {}
    ends_at: dict[int, int] = {}  # data batch index -> index of the marker that ends its transaction
    for index in range(len(batches) - 1, -1, -1):
        batch = batches[index]
        if batch.marker is not None:
            marker_index[batch.producer_id] = index
        elif batch.is_transactional:
            ends_at[index] = marker_index.get(batch.producer_id, len(batches))
    for index in sorted(ends_at):
        if index < end and ends_at[index] >= end:
            return index
    return end


def clean(batches: list[Batch], end: int, cleaned_at_ms: int) -> list[Batch]:
    """The cleaned segment: the latest record of each key (aborted ones never count), tombstones kept."""
    latest: dict[bytes, int] = {}
    for batch in batches[:end]:
        if batch.marker is None and batch.txn_state != TXN_ABORTED:
            for offset, _, key, _ in batch.records:
                latest[key] = offset
    last_data_batch = {batch.producer_id: index for index, batch in enumerate(batches) if batch.is_transactional
                       and batch.marker is None}  # fmt: skip
    horizon = cleaned_at_ms + DELETE_RETENTION_MS
    cleaned = []
    for index, batch in enumerate(batches[:end]):
        if batch.marker is not None:
            batch.has_delete_horizon, batch.horizon_or_max_ms = True, horizon
            cleaned.append(batch)
            continue
        kept = [] if batch.txn_state == TXN_ABORTED else [r for r in batch.records if latest.get(r[2]) == r[0]]
        is_producers_last = batch.producer_id != -1 and last_data_batch.get(batch.producer_id) == index
        if kept or is_producers_last:
            batch.has_delete_horizon = any(value is None for _, _, _, value in kept)
            batch.horizon_or_max_ms = horizon if batch.has_delete_horizon else batch.max_timestamp
            batch.records = kept
            cleaned.append(batch)
    return cleaned


def encode(batch: Batch, codec: str, leader_epoch: int, is_cleaned: bool) -> bytes:
    base_sequence = -1 if batch.is_scala_coordinator or batch.marker is not None else 0
    producer = {"producer_id": batch.producer_id, "producer_epoch": batch.producer_epoch}
    last_delta = batch.last_offset - batch.base_offset
    if not batch.records:  # an emptied batch kept for its producer: header only (writeEmptyHeader)
        attributes = batch.is_transactional << 4
        return frame_v2(batch.base_offset, b"", 0, attributes=attributes, last_offset_delta=last_delta,
                        base_timestamp=NO_TIMESTAMP, max_timestamp=batch.horizon_or_max_ms, base_sequence=base_sequence,
                        partition_leader_epoch=leader_epoch, **producer)  # fmt: skip
    base_timestamp = batch.horizon_or_max_ms if batch.has_delete_horizon else batch.records[0][1]
    if batch.marker is not None:
        marker_ms = batch.records[0][1]
        records = [marker_record(batch.marker, timestamp_delta=marker_ms - base_timestamp)]
        return batch_v2(batch.base_offset, records, base_timestamp=base_timestamp, max_timestamp=marker_ms,
                        is_transactional=True, is_control=True, has_delete_horizon=batch.has_delete_horizon,
                        base_sequence=base_sequence, partition_leader_epoch=leader_epoch, **producer)  # fmt: skip
    base = batch.base_offset
    records = [
        Rec(key, value, offset - base, timestamp - base_timestamp) for offset, timestamp, key, value in batch.records
    ]
    return batch_v2(base, records, codec=codec, base_timestamp=base_timestamp, max_timestamp=batch.max_timestamp,
                    is_transactional=batch.is_transactional, has_delete_horizon=batch.has_delete_horizon,
                    base_sequence=base_sequence, partition_leader_epoch=leader_epoch,
                    last_offset_delta=last_delta if is_cleaned else None, **producer)  # fmt: skip


def write_partition(
    appends: list[Append],
    partition: int,
    directory: Path,
    *,
    codec: str,
    clean_before_ms: int,
    segment_bytes: int,
) -> PartitionFiles:
    """Writes `__consumer_offsets-<partition>/<base offset>.log` files; returns what they hold."""
    batches = batches_of(appends)
    resolve_transactions(batches)
    end = cleanable_end(batches, clean_before_ms)
    cleaned = clean(batches, end, clean_before_ms + CLEANER_LAG_MS)
    result = PartitionFiles(partition)
    result.counts["compacted_away"] = sum(len(batch.records) for batch in batches if batch.marker is None) - sum(
        len(batch.records) for batch in cleaned + batches[end:] if batch.marker is None
    )
    leader_epoch = partition % 3
    out = directory / f"__consumer_offsets-{partition}"
    out.mkdir(parents=True, exist_ok=True)
    segments: list[tuple[int, list[bytes]]] = []
    if cleaned:
        segments.append((0, [encode(batch, codec, leader_epoch, True) for batch in cleaned]))
    size = segment_bytes  # forces a new segment for the first head batch
    for batch in batches[end:]:
        encoded = encode(batch, codec, leader_epoch, False)
        if size + len(encoded) > segment_bytes:
            segments.append((batch.base_offset, []))
            size = 0
        segments[-1][1].append(encoded)
        size += len(encoded)
    for base_offset, encoded_batches in segments:
        path = out / f"{base_offset:020d}.log"
        path.write_bytes(b"".join(encoded_batches))
        result.segments.append(str(path))
    _count(result, cleaned + batches[end:], codec)
    return result


def _count(result: PartitionFiles, batches: list[Batch], codec: str) -> None:
    """Record counts by type and state, and the read_committed view for the raw table."""
    counts, rows = result.counts, result.raw_rows
    pending = [batch.base_offset for batch in batches if batch.txn_state == TXN_PENDING]
    last_stable_offset = min(pending, default=None)
    for batch in batches:
        if batch.marker is not None:
            counts[f"marker_{'commit' if batch.marker == COMMIT else 'abort'}"] += 1
            continue
        counts["batches"] += 1
        counts[f"batches_{codec if batch.records else 'none'}"] += 1
        counts["batches_with_delete_horizon"] += batch.has_delete_horizon
        counts["empty_batches"] += not batch.records
        is_visible = batch.txn_state in (None, TXN_COMMITTED)
        for offset, timestamp, key, value in batch.records:
            record_type = int.from_bytes(key[:2], "big")
            counts["records"] += 1
            counts[f"type_{record_type}_{'tombstone' if value is None else 'value'}"] += 1
            if value is not None and record_type == 1:
                counts[f"offset_commit_v{int.from_bytes(value[:2], 'big')}"] += 1
            if batch.txn_state:
                counts[f"txn_{batch.txn_state}"] += 1
            if is_visible and (last_stable_offset is None or offset < last_stable_offset):
                rows["key"].append(key)
                rows["value"].append(value)
                rows["offset"].append(offset)
                rows["timestamp"].append(timestamp)
