"""The log layer: segment files -> one `LogRecord` per data record, in log order.

RecordBatch magic 2 (CRC-32C checked) and legacy magic 0/1 message sets (CRC-32 checked, compressed
wrappers unpacked), every codec Kafka uses (see `transforms.decoder.compression`), and COMMIT/ABORT markers
applied per producer id within a partition, so each transactional record says whether it was
committed, aborted or is still pending. Control records themselves are never yielded.
Reference: kafka-record-formats.md section 9.

Bad bytes never raise out of these iterators and are never dropped. A batch that fails a check becomes
one `LogRecord` with `error` set and the batch's bytes in `raw`, and reading goes on with the next
batch. When the failed batch's length cannot be trusted (its checksum fails, its magic is unknown,
its length is out of range), reading resumes at the next batch whose checksum holds
(`transforms.decoder.batch_resync`), and the bytes between are one such item, its reason naming their range;
with no such batch left, the item holds the rest of the file. Legacy message sets are read by
`transforms.decoder.legacy_messages`, transactions resolved by `transforms.decoder.log_transactions`.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, make_dataclass
from pathlib import Path

import crc32c

from transforms.decoder.batch_resync import (
    FRAMING,
    LEGACY_MIN_SIZE,
    LOG_OVERHEAD,
    MIN_LENGTH,
    V2_CRC_START,
    checksum_holds,
    lengths_lead_to,
    next_sound_batch,
)
from transforms.decoder.compression import CODEC_NAMES, decompress
from transforms.decoder.errors import CorruptRecordError
from transforms.decoder.legacy_messages import CREATE_TIME, LOG_APPEND_TIME, legacy_messages
from transforms.decoder.log_transactions import TXN_ABORTED, TXN_COMMITTED, TXN_PENDING, Marker, resolve_transactions

# RecordBatch v2 header: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount.
_V2_HEADER = struct.Struct(">qiibIHiqqqhii")
_INT16_PAIR = struct.Struct(">hh")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

_CODEC_MASK, _LOG_APPEND_TIME, _TRANSACTIONAL, _CONTROL = 0x07, 0x08, 0x10, 0x20
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
_PARTITION_DIRECTORY = re.compile(r"__consumer_offsets-(\d+)")
_SEGMENT_NAME = re.compile(r"(\d{20})\.log")


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One data record of a segment, or (with `error` set) bytes that failed a check."""

    partition: int | None  # __consumer_offsets partition, from the directory name, else None
    offset: int | None  # absolute offset; for an error item the batch's base offset as read, if any
    timestamp_ms: int | None  # LogAppendTime batches: the batch's maxTimestamp; magic 0: None
    timestamp_type: str | None  # create_time | log_append_time; None for magic 0 and error items
    key: bytes | None
    value: bytes | None  # None = tombstone
    producer_id: int  # -1 when none
    producer_epoch: int
    is_transactional: bool
    txn_state: str | None  # committed | aborted | pending for transactional records, else None
    batch_base_offset: int | None  # legacy: the first (inner) offset of the message
    batch_position: int | None  # byte position of the batch in its file
    magic: int | None
    compression: str | None  # none | gzip | snappy | lz4 | zstd
    source_file: str | None
    error: str | None  # set: not a record; what was expected, what was found, where
    raw: bytes | None  # error items: the batch, or the damaged bytes up to the next sound batch; None otherwise


# A frozen dataclass's __init__ sets each field through object.__setattr__: 17 calls, which cost more
# than decoding the record. The hot path builds this plain twin (same slots, same order) and re-classes
# it, several times faster; the object then IS a LogRecord (type, ==, hash, repr, replace, pickle).
_DraftLogRecord = make_dataclass("_DraftLogRecord", LogRecord.__slots__, slots=True, eq=False, repr=False)


def partition_from_path(path: str | Path) -> int | None:
    """N from a `__consumer_offsets-N` directory: the path itself or its parent (for a segment file)."""
    parts = str(path).replace("\\", "/").rstrip("/").split("/")
    for name in reversed(parts[-2:]):
        match = _PARTITION_DIRECTORY.fullmatch(name)
        if match:
            return int(match.group(1))
    return None


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag varint/varlong of the record layer -> (value, next position)."""
    result, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            message = f"varint ending at byte {pos} is longer than 10 bytes"
            raise CorruptRecordError(f"varint ending at byte {pos}", "at most 10 bytes", "more", message=message)


def _v2_batch(data: bytes, pos: int, end: int, partition: int | None, source_file: str | None) -> list:
    """The records of one RecordBatch (magic 2), or the transaction markers of a control batch."""
    (base_offset, _, _, magic, stored_crc, attributes, _, base_timestamp, max_timestamp, producer_id, producer_epoch,
     _, count) = _V2_HEADER.unpack_from(data, pos)  # fmt: skip
    computed_crc = crc32c.crc32c(memoryview(data)[pos + V2_CRC_START : end])
    if computed_crc != stored_crc:
        stored, computed = f"0x{stored_crc:08x}", f"0x{computed_crc:08x}"
        message = f"CRC-32C mismatch: stored {stored}, computed {computed}"
        raise CorruptRecordError("batch CRC-32C", stored, computed, message=message)
    if count < 0:
        message = f"recordsCount is {count}, expected 0 or more"
        raise CorruptRecordError("recordsCount", "0 or more", str(count), message=message)
    codec = attributes & _CODEC_MASK
    if codec > 4:
        message = f"unknown compression codec {codec} in attributes 0x{attributes:04x}"
        raise CorruptRecordError(f"attributes 0x{attributes:04x}", "compression codec 0-4", str(codec), message=message)
    start, stop = pos + _V2_HEADER.size, end
    if codec:
        buf = decompress(codec, data[start:stop])
        try:
            fields = _v2_records(buf, 0, len(buf), count)
        except (CorruptRecordError, IndexError, struct.error) as error:
            # A payload cut short can still expand without complaint (to nothing, or to part of the
            # records): say that the compressed bytes are what is wrong, not just where reading stopped.
            reason = "a field runs past the end" if isinstance(error, IndexError) else str(error)
            where = f"{CODEC_NAMES[codec]} payload of {stop - start} bytes"
            message = f"{where} expands to {len(buf)} bytes, which do not hold its {count} records ({reason})"
            raise CorruptRecordError(where, f"{count} records", reason, message=message) from None
    else:
        fields = _v2_records(data, start, stop, count)
    if attributes & _CONTROL:
        return _markers(fields, producer_id)
    is_log_append_time, is_transactional = bool(attributes & _LOG_APPEND_TIME), bool(attributes & _TRANSACTIONAL)
    timestamp_type = LOG_APPEND_TIME if is_log_append_time else CREATE_TIME
    compression, txn_state = CODEC_NAMES[codec], TXN_PENDING if is_transactional else None
    records = []
    for timestamp_delta, offset_delta, key, value in fields:
        timestamp = max_timestamp if is_log_append_time else base_timestamp + timestamp_delta
        record = _DraftLogRecord(partition, base_offset + offset_delta, timestamp, timestamp_type, key, value,
            producer_id, producer_epoch, is_transactional, txn_state, base_offset, pos, magic, compression,
            source_file, None, None)  # fmt: skip
        record.__class__ = LogRecord
        records.append(record)
    return records


def _v2_records(buf: bytes, pos: int, end: int, count: int) -> list[tuple]:
    """(timestampDelta, offsetDelta, key, value) of `count` records in buf[pos:end]; headers are skipped.

    One-byte varints (the common case) are decoded inline: this loop runs once per record.
    """
    fields = []
    for index in range(count):
        byte = buf[pos]
        length, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else _varint(buf, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            message = f"record {index} of {count}: length {length} runs past the batch's end"
            raise CorruptRecordError(
                f"record {index} of {count}", f"a length within {end - pos} bytes", str(length), message=message
            )
        byte = buf[pos + 1]  # after the unused attributes byte
        timestamp_delta, pos = ((byte >> 1) ^ -(byte & 1), pos + 2) if byte < 0x80 else _varint(buf, pos + 1)
        byte = buf[pos]
        offset_delta, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else _varint(buf, pos)
        byte = buf[pos]
        length, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else _varint(buf, pos)
        if length >= 0:
            key, pos = buf[pos : pos + length], pos + length
        else:
            key = None
        byte = buf[pos]
        length, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else _varint(buf, pos)
        if length >= 0:
            value, pos = buf[pos : pos + length], pos + length
        else:
            value = None
        if buf[pos]:  # headers, parsed and ignored
            pos = _skip_headers(buf, pos)
        else:
            pos += 1
        if pos != record_end:
            message = f"record {index} of {count}: fields end at byte {pos}, its length says {record_end}"
            raise CorruptRecordError(
                f"record {index} of {count}", f"fields ending at byte {record_end}", f"byte {pos}", message=message
            )
        fields.append((timestamp_delta, offset_delta, key, value))
    if pos != end:
        message = f"{end - pos} bytes left over after the {count} records the batch declares"
        raise CorruptRecordError("batch records", f"{count} records", f"{end - pos} more bytes", message=message)
    return fields


def _skip_headers(buf: bytes, pos: int) -> int:
    count, pos = _varint(buf, pos)
    for _ in range(count):
        key_length, pos = _varint(buf, pos)
        value_length, pos = _varint(buf, pos + max(key_length, 0))
        pos += max(value_length, 0)
    return pos


def _markers(fields: list[tuple], producer_id: int) -> list[Marker]:
    """Control records: key = int16 version, int16 type. Only COMMIT and ABORT end a transaction."""
    markers = []
    for _, _, key, _ in fields:
        if key is None or len(key) < 4:
            where, expected = f"control record key {key!r}", "int16 version, int16 type"
            raise CorruptRecordError(where, expected, "fewer bytes", message=f"{where}: expected {expected}")
        _, control_type = _INT16_PAIR.unpack_from(key)
        if control_type in (CONTROL_ABORT, CONTROL_COMMIT):
            markers.append(Marker(producer_id, TXN_COMMITTED if control_type == CONTROL_COMMIT else TXN_ABORTED))
    return markers


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


def _segment_batches(data: bytes, partition: int | None, source_file: str | None) -> Iterator[list]:
    """Per batch, in file order: its records, its transaction markers, or one error item."""
    pos, size = 0, len(data)
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
                    yield _v2_batch(data, pos, end, partition, source_file)
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


def _segment_order(path: str) -> tuple:
    """Segment files sort by the base offset in their 20-digit names; other names after them, by path."""
    match = _SEGMENT_NAME.fullmatch(path.replace("\\", "/").rsplit("/", 1)[-1])
    return (0, int(match.group(1)), path) if match else (1, 0, path)


def read_partition(
    files: Sequence[str | Path], read_bytes: Callable[[str], bytes] = lambda path: Path(path).read_bytes()
) -> Iterator[LogRecord]:
    """The segment files of ONE partition, in base-offset order, transactions resolved across them.

    Files are read one at a time; only records waiting on an open transaction are held in memory.
    """
    return _read_ordered((path, read_bytes(path)) for path in sorted(map(str, files), key=_segment_order))


def _read_ordered(segments: Iterable[tuple[str, bytes]]) -> Iterator[LogRecord]:
    batches = (
        batch for path, data in segments for batch in _segment_batches(bytes(data), partition_from_path(path), path)
    )
    return resolve_transactions(batches)


def read_paths(paths: Sequence[str | Path]) -> Iterator[LogRecord]:
    """Segment files, or directories searched recursively for *.log; one `read_partition` per directory.

    A directory holding `__consumer_offsets-N` directories (a broker's log dir, a backup) is read
    through those only, so other topics' logs beside them are skipped; a directory without any is
    read whole. Files named explicitly are always read. Partitions come out in partition order.
    A path that does not exist raises FileNotFoundError: a mistake in the call, not bad bytes.
    """
    by_directory: dict[str, set[str]] = {}
    for path in map(Path, paths):
        if path.is_file():
            files = [path]
        elif path.is_dir():
            roots = [path] if partition_from_path(path) is not None else []
            roots += [found for found in path.rglob("__consumer_offsets-*") if found.is_dir()]
            files = [file for root in (roots or [path]) for file in root.rglob("*.log") if file.is_file()]
        else:
            raise FileNotFoundError(f"no such file or directory: {path}")
        for file in files:
            by_directory.setdefault(str(file.parent), set()).add(str(file))
    for directory in sorted(by_directory, key=_directory_order):
        yield from read_partition(sorted(by_directory[directory]))


def _directory_order(directory: str) -> tuple:
    partition = partition_from_path(directory)
    return (partition is None, partition or 0, directory)
