"""RecordBatch magic 2 (Kafka 0.11 and later): one batch's bytes -> its records, or its transaction markers.

The CRC-32C over attributes..end is checked first; compressed records are expanded (see
`transforms.decoder.compression`); record headers are parsed and dropped. A control batch yields the
COMMIT/ABORT `Marker`s that `log_transactions` applies. Reference: kafka-record-formats.md section 9.
"""

from __future__ import annotations

import struct

import crc32c

from transforms.decoder.batch_resync import V2_CRC_START
from transforms.decoder.compression import CODEC_NAMES, decompress
from transforms.decoder.errors import CorruptRecordError
from transforms.decoder.legacy_messages import CREATE_TIME, LOG_APPEND_TIME
from transforms.decoder.log_record import DraftLogRecord, LogRecord
from transforms.decoder.log_transactions import TXN_ABORTED, TXN_COMMITTED, TXN_PENDING, Marker

# RecordBatch v2 header: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount.
_V2_HEADER = struct.Struct(">qiibIHiqqqhii")
_INT16_PAIR = struct.Struct(">hh")

_CODEC_MASK, _LOG_APPEND_TIME, _TRANSACTIONAL, _CONTROL = 0x07, 0x08, 0x10, 0x20
CONTROL_ABORT, CONTROL_COMMIT = 0, 1


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


def v2_batch(data: bytes, pos: int, end: int, partition: int | None, source_file: str | None) -> list:
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
        record = DraftLogRecord(partition, base_offset + offset_delta, timestamp, timestamp_type, key, value,
            producer_id, producer_epoch, is_transactional, txn_state, base_offset, pos, magic, compression,
            source_file, None, None)  # fmt: skip
        record.__class__ = LogRecord
        records.append(record)
    return records


def _v2_records(buf: bytes, pos: int, end: int, count: int) -> list[tuple]:
    """(timestampDelta, offsetDelta, key, value) of `count` records in buf[pos:end]; headers are skipped.

    One-byte varints (the common case) are decoded inline, and the record's length in two bytes (a record
    of 64 bytes or more, as most commits are): this loop runs once per record.
    """
    fields = []
    for index in range(count):
        byte = buf[pos]
        if byte < 0x80:
            length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        elif (high := buf[pos + 1]) < 0x80:
            length = (byte & 0x7F) | (high << 7)
            length, pos = (length >> 1) ^ -(length & 1), pos + 2
        else:
            length, pos = _varint(buf, pos)
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
