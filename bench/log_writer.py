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

The log is written as the simulation hands its appends on: what stays in memory is the part before the
cleaned segment rolled (none of the window with `--cleaned-fraction 0`) and the batches of transactions
still open, so a partition's size is bounded by the disk, not by memory.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

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


# Receives each read_committed record as (key, value, offset, timestamp), in log order.
RawRowSink = Callable[[bytes, bytes | None, int, int], None]


def batches_of(appends: Iterable[Append]) -> Iterator[Batch]:
    """The batches of the appends, each handed on once no later append can join it."""
    batch: Batch | None = None
    offset = 0
    for append in appends:
        entries = [(key, value) for key, value in append.records]
        if append.marker is not None:
            entries = [(None, None)]  # the marker's record takes one offset
        can_share = (
            batch is not None
            and append.producer_id == -1
            and batch.producer_id == -1
            and not append.is_scala_coordinator
            and not batch.is_scala_coordinator
            and append.at_ms - batch.records[0][1] <= LINGER_MS
            and len(batch.records) + len(entries) <= MAX_BATCH_RECORDS
        )
        if not can_share:
            if batch is not None and batch.records:
                yield batch
            batch = Batch(offset, [], append.producer_id, append.producer_epoch, append.is_transactional,
                          append.marker, append.is_scala_coordinator)  # fmt: skip
        for key, value in entries:
            batch.records.append((offset, append.at_ms, key, value))
            offset += 1
        batch.last_offset = offset - 1
    if batch is not None and batch.records:
        yield batch


class _Transactions:
    """Gives each transactional data batch the outcome of the next marker of its producer, as markers come."""

    def __init__(self) -> None:
        self.open: dict[int, list[Batch]] = {}

    def see(self, batch: Batch) -> None:
        if batch.marker is not None:
            outcome = TXN_COMMITTED if batch.marker == COMMIT else TXN_ABORTED
            for waiting in self.open.pop(batch.producer_id, []):
                waiting.txn_state = outcome
        elif batch.is_transactional:
            batch.txn_state = TXN_PENDING
            self.open.setdefault(batch.producer_id, []).append(batch)


def cleanable_end(prefix: list[Batch]) -> int:
    """Index of the first batch after the cleaned segment, given the batches before the segment rolled: the
    cleaner never passes a transaction still open when it rolled (its marker comes later, or never)."""
    return next(
        (index for index, batch in enumerate(prefix) if batch.marker is None and batch.txn_state == TXN_PENDING),
        len(prefix),
    )


def clean(prefix: list[Batch], cleaned_at_ms: int) -> list[Batch]:
    """The cleaned segment: the latest record of each key (aborted ones never count), tombstones kept.
    An emptied transactional batch stays while it may be its producer's last (`_producers_last`)."""
    latest: dict[bytes, int] = {}
    for batch in prefix:
        if batch.marker is None and batch.txn_state != TXN_ABORTED:
            for offset, _, key, _ in batch.records:
                latest[key] = offset
    last_data_batch = {batch.producer_id: index for index, batch in enumerate(prefix) if batch.is_transactional
                       and batch.marker is None}  # fmt: skip
    horizon = cleaned_at_ms + DELETE_RETENTION_MS
    cleaned = []
    for index, batch in enumerate(prefix):
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
    appends: Iterable[Append],
    partition: int,
    directory: Path,
    raw_rows: RawRowSink,
    *,
    codec: str,
    clean_before_ms: int,
    segment_bytes: int,
) -> PartitionFiles:
    """Writes `__consumer_offsets-<partition>/<base offset>.log` files as the appends come, and hands the
    read_committed records to `raw_rows`; returns what the files hold. Memory holds the batches before
    the cleaned segment rolled (the cleaned share of the window) and the open transactions, not the log."""
    out = directory / f"__consumer_offsets-{partition}"
    out.mkdir(parents=True, exist_ok=True)
    result = PartitionFiles(partition)
    leader_epoch = partition % 3
    transactions = _Transactions()
    tally = _Tally(result.counts, codec, raw_rows)
    prefix: list[Batch] | None = []
    cleaned: list[Batch] = []
    head_producers: set[int] = set()
    with _HeadSegments(out, segment_bytes) as head:

        def write_head(batch: Batch) -> None:
            if batch.is_transactional and batch.marker is None:
                head_producers.add(batch.producer_id)
            head.write(batch.base_offset, encode(batch, codec, leader_epoch, False))
            tally.add(batch)

        def roll_cleaned_segment() -> None:
            nonlocal prefix, cleaned
            end = cleanable_end(prefix)
            before = _data_records(prefix[:end])  # cleaning empties batches in place
            cleaned = clean(prefix[:end], clean_before_ms + CLEANER_LAG_MS)
            result.counts["compacted_away"] = before - _data_records(cleaned)
            for batch in cleaned:  # before the head's: the raw rows follow the log
                tally.rows_of(batch)
            for batch in prefix[end:]:
                write_head(batch)
            prefix = None

        for batch in batches_of(appends):
            if prefix is not None and batch.records[0][1] >= clean_before_ms:
                roll_cleaned_segment()  # before this batch's marker, if it is one, closes a transaction
            transactions.see(batch)
            if prefix is not None:
                prefix.append(batch)
            else:
                write_head(batch)
        if prefix is not None:
            roll_cleaned_segment()
        tally.finish()
    # An emptied batch of the cleaned segment stays only as its producer's last: none of its came after.
    cleaned = [batch for batch in cleaned if batch.records or batch.producer_id not in head_producers]
    if cleaned:
        path = out / f"{0:020d}.log"
        path.write_bytes(b"".join(encode(batch, codec, leader_epoch, True) for batch in cleaned))
        result.segments.append(str(path))
        tally.count(cleaned)
    result.segments.extend(head.paths)
    return result


def _data_records(batches: list[Batch]) -> int:
    return sum(len(batch.records) for batch in batches if batch.marker is None)


class _HeadSegments:
    """The segments after the cleaned one, rolled at `segment_bytes`, each named by its first batch's base offset."""

    def __init__(self, out: Path, segment_bytes: int) -> None:
        self.out, self.segment_bytes = out, segment_bytes
        self.paths: list[str] = []
        self._file: BinaryIO | None = None
        self._size = segment_bytes  # forces a new segment for the first batch

    def write(self, base_offset: int, encoded: bytes) -> None:
        if self._size + len(encoded) > self.segment_bytes:
            self._close()
            path = self.out / f"{base_offset:020d}.log"
            self._file = open(path, "wb")  # noqa: SIM115 - closed on roll or exit
            self.paths.append(str(path))
            self._size = 0
        self._file.write(encoded)
        self._size += len(encoded)

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> _HeadSegments:
        return self

    def __exit__(self, *_) -> None:
        self._close()


class _Tally:
    """Record counts by type and state, and the read_committed view for the raw table, taken in log order
    as each batch's transaction is resolved: what is at or after the last stable offset (the first batch
    still pending at the end) is counted but never read."""

    def __init__(self, counts: Counter, codec: str, raw_rows: RawRowSink) -> None:
        self.counts, self.codec, self.raw_rows = counts, codec, raw_rows
        self.waiting: deque[Batch] = deque()

    def add(self, batch: Batch) -> None:
        self.waiting.append(batch)
        while self.waiting and self.waiting[0].txn_state != TXN_PENDING:
            resolved = self.waiting.popleft()
            self.rows_of(resolved)
            self.count([resolved])

    def finish(self) -> None:
        self.count(self.waiting)
        self.waiting.clear()

    def rows_of(self, batch: Batch) -> None:
        if batch.marker is None and batch.txn_state in (None, TXN_COMMITTED):
            for offset, timestamp, key, value in batch.records:
                self.raw_rows(key, value, offset, timestamp)

    def count(self, batches: Iterable[Batch]) -> None:
        counts = self.counts
        for batch in batches:
            if batch.marker is not None:
                counts[f"marker_{'commit' if batch.marker == COMMIT else 'abort'}"] += 1
                continue
            counts["batches"] += 1
            counts[f"batches_{self.codec if batch.records else 'none'}"] += 1
            counts["batches_with_delete_horizon"] += batch.has_delete_horizon
            counts["empty_batches"] += not batch.records
            for _, _, key, value in batch.records:
                record_type = int.from_bytes(key[:2], "big")
                counts["records"] += 1
                counts[f"type_{record_type}_{'tombstone' if value is None else 'value'}"] += 1
                if value is not None and record_type == 1:
                    counts[f"offset_commit_v{int.from_bytes(value[:2], 'big')}"] += 1
                if batch.txn_state:
                    counts[f"txn_{batch.txn_state}"] += 1
