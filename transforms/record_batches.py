"""The log layer: segment bytes -> records, as a broker's log files hold them.

RecordBatch magic 2 (CRC-32C checked) and legacy magic 0/1 message sets (CRC-32 checked, compressed
wrappers unpacked), every codec Kafka uses, and transaction markers applied per producer so that
each transactional record says whether it was committed, aborted, or is still pending.
Reference: kafka-record-formats.md section 9.

Bad bytes never raise out of these iterators and are never dropped: a batch that fails a check
becomes one `LogRecord` with `error` and the batch's bytes in `raw`; bytes that cannot even be
framed (a length running past the end, a truncated tail) become one such item holding the rest of
the file, and reading of that file stops there.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import crc32c

from transforms.compression import CODEC_NAMES, CompressionError, decompress

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # through recordsCount; 61 bytes
_LOG_OVERHEAD = 12  # baseOffset int64 + length int32, common to every magic
_V2_MIN_LENGTH = _V2_HEADER.size - _LOG_OVERHEAD
_LEGACY_HEADER = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_LEGACY_MIN_SIZE = 14  # crc, magic, attributes, key length, value length
_INT16_PAIR = struct.Struct(">hh")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_PARTITION_DIRECTORY = re.compile(r"^__consumer_offsets-(\d+)$")

CONTROL_ABORT, CONTROL_COMMIT = 0, 1
TXN_COMMITTED, TXN_ABORTED, TXN_PENDING = "committed", "aborted", "pending"
CREATE_TIME, LOG_APPEND_TIME = "create_time", "log_append_time"


@dataclass(frozen=True, slots=True)
class LogRecord:
    partition: int | None
    offset: int | None
    timestamp_ms: int | None
    timestamp_type: str | None
    key: bytes | None
    value: bytes | None  # None = tombstone
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    txn_state: str | None  # committed / aborted / pending for transactional records
    batch_base_offset: int | None
    batch_position: int | None
    magic: int | None
    compression: str | None
    source_file: str | None
    error: str | None = None  # set: not a record, but bytes that failed a check, held in `raw`
    raw: bytes | None = None


@dataclass(frozen=True, slots=True)
class _Marker:
    producer_id: int
    is_commit: bool


class CorruptRecordError(ValueError):
    pass


def partition_from_path(path: str) -> int | None:
    parent = path.replace("\\", "/").rstrip("/").split("/")[-2:-1]
    match = _PARTITION_DIRECTORY.match(parent[0]) if parent else None
    return int(match.group(1)) if match else None


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag varint (int32 or int64) as the record layer writes it."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("varint runs past the end of the records")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def _error_item(message: str, raw: bytes, partition, source_file, position, base_offset=None, magic=None) -> LogRecord:
    return LogRecord(
        partition,
        base_offset,
        None,
        None,
        None,
        None,
        -1,
        -1,
        False,
        None,
        base_offset,
        position,
        magic,
        None,
        source_file,
        message,
        raw,
    )


def _v2_records(records: bytes, count: int, header: tuple, template: dict) -> Iterator[LogRecord | _Marker]:
    base_offset, _, _, _, _, attributes, _, base_timestamp, max_timestamp, producer_id, _, _, _ = header
    is_log_append_time = bool(attributes & 0x08)
    is_control = bool(attributes & 0x20)
    pos = 0
    for _ in range(count):
        length, pos = _varint(records, pos)
        end = pos + length
        if length < 0 or end > len(records):
            raise CorruptRecordError(f"record length {length} overruns the batch")
        timestamp_delta, pos = _varint(records, pos + 1)  # skip the unused attributes byte
        offset_delta, pos = _varint(records, pos)
        key_length, pos = _varint(records, pos)
        key = None if key_length < 0 else records[pos : pos + key_length]
        pos += max(key_length, 0)
        value_length, pos = _varint(records, pos)
        value = None if value_length < 0 else records[pos : pos + value_length]
        pos += max(value_length, 0)
        header_count, pos = _varint(records, pos)
        for _ in range(header_count):
            header_key_length, pos = _varint(records, pos)
            pos += max(header_key_length, 0)
            header_value_length, pos = _varint(records, pos)
            pos += max(header_value_length, 0)
        if pos != end:
            raise CorruptRecordError(f"record at offset delta {offset_delta} ends at {pos}, its length says {end}")
        if is_control:
            if key is None or len(key) < 4:
                raise CorruptRecordError("control record without a 4-byte key")
            _, control_type = _INT16_PAIR.unpack_from(key)
            if control_type in (CONTROL_ABORT, CONTROL_COMMIT):
                yield _Marker(producer_id, control_type == CONTROL_COMMIT)
            continue
        timestamp = max_timestamp if is_log_append_time else base_timestamp + timestamp_delta
        yield LogRecord(offset=base_offset + offset_delta, timestamp_ms=timestamp, key=key, value=value, **template)


def _read_v2_batch(data: bytes, pos: int, end: int, partition, source_file) -> list[LogRecord | _Marker]:
    header = _V2_HEADER.unpack_from(data, pos)
    base_offset, _, _, magic, stored_crc, attributes, _, _, _, producer_id, producer_epoch, _, count = header
    computed_crc = crc32c.crc32c(data[pos + 21 : end])
    if computed_crc != stored_crc:
        raise CorruptRecordError(f"CRC-32C mismatch: stored 0x{stored_crc:08x}, computed 0x{computed_crc:08x}")
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    codec = attributes & 0x07
    records = data[pos + _V2_HEADER.size : end]
    if codec:
        records = decompress(codec, records)
    template = {
        "partition": partition,
        "timestamp_type": LOG_APPEND_TIME if attributes & 0x08 else CREATE_TIME,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "is_transactional": bool(attributes & 0x10),
        "txn_state": None,
        "batch_base_offset": base_offset,
        "batch_position": pos,
        "magic": magic,
        "compression": CODEC_NAMES.get(codec),
        "source_file": source_file,
    }
    return list(_v2_records(records, count, header, template))


def _legacy_messages(data: bytes, partition, source_file, position_base: int | None) -> Iterator[tuple]:
    """(offset, timestamp, timestamp_type, key, value, magic, codec, position) per message of a message set."""
    pos = 0
    while pos < len(data):
        if len(data) - pos < _LEGACY_HEADER.size:
            raise CorruptRecordError(f"truncated legacy message header at byte {pos}")
        offset, size, stored_crc, magic, attributes = _LEGACY_HEADER.unpack_from(data, pos)
        end = pos + _LOG_OVERHEAD + size
        if size < _LEGACY_MIN_SIZE or end > len(data):
            raise CorruptRecordError(f"legacy message size {size} at byte {pos} overruns {len(data)} bytes")
        computed_crc = zlib.crc32(data[pos + 16 : end])
        if computed_crc != stored_crc:
            raise CorruptRecordError(f"CRC-32 mismatch: stored 0x{stored_crc:08x}, computed 0x{computed_crc:08x}")
        if magic not in (0, 1):
            raise CorruptRecordError(f"legacy message with magic {magic}")
        cursor = pos + 18
        timestamp = None
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(data, cursor)
            cursor += 8
        key, cursor = _legacy_bytes(data, cursor, end)
        value, cursor = _legacy_bytes(data, cursor, end)
        timestamp_type = (LOG_APPEND_TIME if attributes & 0x08 else CREATE_TIME) if magic == 1 else None
        yield (
            offset,
            timestamp,
            timestamp_type,
            key,
            value,
            magic,
            attributes & 0x07,
            (pos if position_base is None else position_base),
        )
        pos = end


def _legacy_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    (length,) = _INT32.unpack_from(data, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"legacy key/value of {length} bytes overruns its message")
    return data[pos : pos + length], pos + length


def _read_legacy_set(data: bytes, pos: int, end: int, partition, source_file) -> list[LogRecord]:
    out = []
    for offset, timestamp, timestamp_type, key, value, magic, codec, position in _legacy_messages(
        data[pos:end], partition, source_file, None
    ):
        shared = {
            "producer_id": -1,
            "producer_epoch": -1,
            "is_transactional": False,
            "txn_state": None,
            "batch_base_offset": offset,
            "batch_position": pos + position,
            "magic": magic,
            "compression": CODEC_NAMES.get(codec),
            "source_file": source_file,
            "partition": partition,
        }
        if not codec:
            out.append(
                LogRecord(
                    offset=offset, timestamp_ms=timestamp, timestamp_type=timestamp_type, key=key, value=value, **shared
                )
            )
            continue
        inner = list(_legacy_messages(decompress(codec, value or b""), partition, source_file, position))
        last_inner = inner[-1][0] if inner else 0
        for inner_offset, inner_timestamp, inner_type, inner_key, inner_value, _, _, _ in inner:
            # v1 wrappers carry relative inner offsets; the wrapper's offset is that of the last one.
            absolute = offset - last_inner + inner_offset if magic == 1 and offset else inner_offset
            if timestamp_type == LOG_APPEND_TIME:
                inner_timestamp, inner_type = timestamp, LOG_APPEND_TIME
            out.append(
                LogRecord(
                    offset=absolute,
                    timestamp_ms=inner_timestamp,
                    timestamp_type=inner_type,
                    key=inner_key,
                    value=inner_value,
                    **shared,
                )
            )
    return out


def read_segment_bytes(
    data: bytes, *, partition: int | None = None, source_file: str | None = None
) -> Iterator[LogRecord | _Marker]:
    """Records and transaction markers of one segment, in log order; transactions not yet resolved."""
    pos, size = 0, len(data)
    while pos < size:
        if size - pos < _LOG_OVERHEAD + 5:
            yield _error_item(
                f"truncated batch header at byte {pos} ({size - pos} bytes left)",
                data[pos:],
                partition,
                source_file,
                pos,
            )
            return
        base_offset, length = struct.unpack_from(">qi", data, pos)
        magic = data[pos + 16]
        end = pos + _LOG_OVERHEAD + length
        minimum = _V2_MIN_LENGTH if magic == 2 else _LEGACY_MIN_SIZE
        if length < minimum or end > size:
            yield _error_item(
                f"batch at byte {pos} (base offset {base_offset}, magic {magic}) declares "
                f"{length} bytes; {size - pos - _LOG_OVERHEAD} remain: unreadable from here",
                data[pos:],
                partition,
                source_file,
                pos,
                base_offset,
                magic,
            )
            return
        try:
            if magic == 2:
                items = _read_v2_batch(data, pos, end, partition, source_file)
            elif magic in (0, 1):
                items = _read_legacy_set(data, pos, end, partition, source_file)
            else:
                raise CorruptRecordError(f"unknown magic {magic}")
        except (CorruptRecordError, CompressionError, struct.error) as error:
            yield _error_item(
                f"batch at byte {pos} (base offset {base_offset}, magic {magic}): {error}",
                data[pos:end],
                partition,
                source_file,
                pos,
                base_offset,
                magic,
            )
        else:
            yield from items
        pos = end


def resolve_transactions(items: Iterable[LogRecord | _Marker]) -> Iterator[LogRecord]:
    """Applies COMMIT/ABORT markers per producer id; records still open at the end are pending.

    Output stays in log order: records wait only while an earlier transactional record is open.
    """
    waiting: deque[list] = deque()  # [record, state]; state None = still open
    open_by_producer: dict[int, list[list]] = {}
    for item in items:
        if isinstance(item, _Marker):
            for entry in open_by_producer.pop(item.producer_id, ()):
                entry[1] = TXN_COMMITTED if item.is_commit else TXN_ABORTED
        elif item.is_transactional and item.error is None:
            entry = [item, None]
            open_by_producer.setdefault(item.producer_id, []).append(entry)
            waiting.append(entry)
            continue
        elif not waiting:
            yield item
            continue
        else:
            waiting.append([item, False])
        while waiting and waiting[0][1] is not None:
            record, state = waiting.popleft()
            yield replace(record, txn_state=state) if state else record
    for record, state in waiting:
        yield replace(record, txn_state=state if state is not None else TXN_PENDING) if state is not False else record


def read_partition_segments(segments: Iterable[tuple[str, bytes]]) -> Iterator[LogRecord]:
    """All segments of ONE partition, in base-offset order (their 20-digit file names), resolved."""
    ordered = sorted(segments, key=lambda segment: segment[0].replace("\\", "/").rsplit("/", 1)[-1])

    def items() -> Iterator[LogRecord | _Marker]:
        for path, data in ordered:
            yield from read_segment_bytes(data, partition=partition_from_path(path), source_file=path)

    return resolve_transactions(items())
