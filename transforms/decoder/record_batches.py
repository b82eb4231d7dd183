"""The log layer: a partition's segment bytes -> one `LogRecord` per data record, in log order.

Frames each batch of a segment and hands it to its reader: RecordBatch magic 2
(`transforms.decoder.v2_batches`, CRC-32C checked) or legacy magic 0/1 message sets
(`transforms.decoder.legacy_messages`, CRC-32 checked, compressed wrappers unpacked); COMMIT/ABORT
markers are applied per producer id across the partition's segments
(`transforms.decoder.log_transactions`), so each transactional record says whether it was committed,
aborted or is still pending. Control records themselves are never yielded. Segments come in as
(path, bytes): finding and reading files is the jobs' (`jobs.segment_files`).
Reference: kafka-record-formats.md section 9.

Bad bytes never raise out of these iterators and are never dropped. A batch that fails a check becomes
one `LogRecord` with `error` set and the batch's bytes in `raw`, and reading goes on with the next
batch. When the failed batch's length cannot be trusted (its checksum fails, its magic is unknown,
its length is out of range), reading resumes at the next batch whose checksum holds
(`transforms.decoder.batch_resync`), and the bytes between are one such item, its reason naming their
range; with no such batch left, the item holds the rest of the file.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator
from os import PathLike

from schemas.coordinator_records import CONSUMER_OFFSETS_TOPIC
from schemas.share_state_records import SHARE_GROUP_STATE_TOPIC
from transforms.decoder.batch_resync import (
    FRAMING,
    LEGACY_MIN_SIZE,
    LOG_OVERHEAD,
    MIN_LENGTH,
    checksum_holds,
    lengths_lead_to,
    next_sound_batch,
)
from transforms.decoder.errors import CorruptRecordError
from transforms.decoder.legacy_messages import legacy_messages
from transforms.decoder.log_record import LogRecord
from transforms.decoder.log_transactions import resolve_transactions
from transforms.decoder.v2_batches import v2_batch

_INT64 = struct.Struct(">q")
# The topics groupscope reads: the group coordinator's and the share coordinator's (a broker's log dir
# holds both). Their names are fixed by Kafka.
COORDINATOR_TOPICS = (CONSUMER_OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC)
_PARTITION_DIRECTORY = re.compile(rf"({'|'.join(COORDINATOR_TOPICS)})-(\d+)")


def topic_partition_from_path(path: str | PathLike[str]) -> tuple[str, int] | None:
    """(topic, N) from a `__consumer_offsets-N` or `__share_group_state-N` directory: the path itself or
    its parent (for a segment file)."""
    parts = str(path).replace("\\", "/").rstrip("/").split("/")
    for name in reversed(parts[-2:]):
        match = _PARTITION_DIRECTORY.fullmatch(name)
        if match:
            return match.group(1), int(match.group(2))
    return None


def partition_from_path(path: str | PathLike[str]) -> int | None:
    """N from a coordinator topic's partition directory (see `topic_partition_from_path`)."""
    found = topic_partition_from_path(path)
    return None if found is None else found[1]


def topic_from_path(path: str | PathLike[str]) -> str:
    """The topic a segment file belongs to, by its directory; a file outside such a directory is taken
    for `__consumer_offsets`, as groupscope always has."""
    found = topic_partition_from_path(path)
    return CONSUMER_OFFSETS_TOPIC if found is None else found[0]


def _legacy_batch(data: bytes, pos: int, end: int, partition: int | None, source_file: str | None) -> list:
    """One outer magic 0/1 message: itself, or the messages inside it when it is a compressed wrapper."""
    messages, magic, timestamp_type, compression = legacy_messages(data, pos, end)
    first_offset, records = messages[0][0], []
    for offset, timestamp, key, value in messages:
        records.append(LogRecord(partition, offset, timestamp, timestamp_type, key, value, -1, -1, False, None,
            first_offset, pos, magic, compression, source_file, None, None))  # fmt: skip
    return records


def _batch_error(reason: str, raw: bytes, partition, source_file, pos: int, offset=None, magic=None) -> LogRecord:
    known = ", ".join(
        f"{name} {value}" for name, value in (("base offset", offset), ("magic", magic)) if value is not None
    )
    message = f"batch at position {pos}" + (f" ({known})" if known else "")
    return LogRecord(partition, offset, None, None, None, None, -1, -1, False, None, offset, pos, magic, None,
        source_file, f"{message}: {reason}", raw)  # fmt: skip


def _segment_batches(data: bytes, partition: int | None, source_file: str | None, start: int = 0) -> Iterator[list]:
    """Per batch, in file order from position `start` (a batch boundary): its records, its transaction
    markers, or one error item."""
    pos, size = start, len(data)
    resume = None  # after damage: (next sound batch or the file's end, whether lengths lead there)
    while pos < size:
        # log.preallocate=true leaves a zero-filled tail after the last batch: no data, not damage.
        # (Shorter zero runs are kept as errors: they may be a torn header of a batch at offset 0.)
        # Only a zero batchLength (never a real batch's) is worth scanning the rest of the file for.
        is_zero_length = data[pos + 8 : pos + LOG_OVERHEAD] == b"\0\0\0\0"
        if size - pos >= LOG_OVERHEAD and is_zero_length and data.count(0, pos) == size - pos:
            return
        base_offset, magic, end, reason = _frame(data, pos)
        if reason is None:
            try:
                if magic == 2:
                    yield v2_batch(data, pos, end, partition, source_file)
                elif magic in LEGACY_MIN_SIZE:
                    yield _legacy_batch(data, pos, end, partition, source_file)
                else:
                    message = "unknown magic, expected 0, 1 or 2"
                    raise CorruptRecordError("magic", "0, 1 or 2", str(magic), message=message)
                pos = end
                continue
            except (CorruptRecordError, IndexError, struct.error) as error:
                reason = "a field runs past the end of its batch" if isinstance(error, IndexError) else str(error)
            if checksum_holds(data, pos):  # the checksum vouches for the length: only this batch is lost
                yield [_batch_error(reason, data[pos:end], partition, source_file, pos, base_offset, magic)]
                pos = end
                continue
        if resume is None or resume[0] <= pos:
            target = next_sound_batch(data, pos + 1)
            target = size if target is None else target
            resume = (target, lengths_lead_to(data, pos, target))
        target, is_chained = resume
        if is_chained:  # the lengths lead to the next sound batch: this batch's own is right
            stop = end
        elif target < size:
            stop = target
            reason += (
                f"; reading resumes at the next batch whose checksum holds, at position {target}:"
                f" bytes {pos} to {target} ({target - pos} bytes) are kept as one unreadable fragment"
            )
        else:
            stop = size
            reason += (
                f": unreadable from here; the rest of the file, bytes {pos} to {size} ({size - pos} bytes), is kept"
            )
        yield [_batch_error(reason, data[pos:stop], partition, source_file, pos, base_offset, magic)]
        pos = stop


def _frame(data: bytes, pos: int) -> tuple[int | None, int | None, int, str | None]:
    """(base offset, magic, end, None) of the batch at `pos`, or what is known and why it cannot frame."""
    size = len(data)
    if size - pos < FRAMING.size:
        offset = _INT64.unpack_from(data, pos)[0] if size - pos >= 8 else None
        reason = f"truncated header ({size - pos} bytes; offset, length and magic need {FRAMING.size})"
        return offset, None, size, reason
    base_offset, length, magic = FRAMING.unpack_from(data, pos)
    minimum, available = MIN_LENGTH.get(magic, LEGACY_MIN_SIZE[0]), size - pos - LOG_OVERHEAD
    if length < minimum or length > available:
        problem = f"is below the minimum {minimum}" if length < minimum else f"runs past the {available} bytes left"
        return base_offset, magic, size, f"batchLength {length} {problem}"
    return base_offset, magic, pos + LOG_OVERHEAD + length, None


def read_segment_bytes(
    data: bytes, *, partition: int | None = None, source_file: str | None = None
) -> Iterator[LogRecord]:
    """The records of one segment's bytes, its transactions resolved within the segment alone."""
    return resolve_transactions(_segment_batches(bytes(data), partition, source_file))


def read_partition(segments: Iterable[tuple[str, bytes] | tuple[str, bytes, int]]) -> Iterator[LogRecord]:
    """The segments of ONE partition, as (path, bytes) in log order, transactions resolved across them.
    A third item, a batch boundary, reads the segment from there on (what an earlier run left unread).

    Each segment's bytes are taken when its turn comes, so a lazy iterable keeps one file in memory;
    only records waiting on an open transaction are held. The path names the partition (its
    `__consumer_offsets-N` directory) and the records' `source_file`.
    """
    batches = (
        batch
        for path, data, *start in segments
        for batch in _segment_batches(bytes(data), partition_from_path(path), path, *start)
    )
    return resolve_transactions(batches)
