"""Legacy message sets (magic 0 and 1, Kafka before 0.11): one outer message -> its records.

An outer message is a record itself, or a compressed wrapper whose value holds an inner message set
(gzip, snappy or lz4). Each message carries a CRC-32 over magic through the end of its value, checked
here. Offsets come out absolute and timestamps resolved, ready for `LogRecord`s.
Reference: kafka-record-formats.md section 9.
"""

from __future__ import annotations

import struct
import zlib

from transforms.decoder.batch_resync import LEGACY_CRC_START, LEGACY_MIN_SIZE, LOG_OVERHEAD
from transforms.decoder.compression import CODEC_NAMES, decompress
from transforms.decoder.errors import CorruptRecordError

# Legacy message: offset, size, crc, magic, attributes, then [timestamp] and the key/value lengths.
_HEADER = struct.Struct(">qiIbb")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_CODEC_MASK, _LOG_APPEND_TIME = 0x07, 0x08
CREATE_TIME, LOG_APPEND_TIME = "create_time", "log_append_time"


def legacy_messages(data: bytes, pos: int, end: int) -> tuple[list[tuple], int, str | None, str]:
    """([(offset, timestamp, key, value)], magic, timestamp type, compression) of the message at data[pos:end]."""
    offset, magic, attributes, timestamp, key, value = _legacy_message(data, pos, end)
    codec = attributes & _CODEC_MASK
    is_log_append_time = magic == 1 and bool(attributes & _LOG_APPEND_TIME)
    timestamp_type = None if magic == 0 else LOG_APPEND_TIME if is_log_append_time else CREATE_TIME
    if not codec:
        return [(offset, timestamp, key, value)], magic, timestamp_type, CODEC_NAMES[codec]
    if codec > 3:
        raise CorruptRecordError(
            f"magic {magic} message attributes",
            "compression codec 0-3",
            str(codec),
            message=f"compression codec {codec} in a magic {magic} message (expected 0-3)",
        )
    if value is None:
        raise CorruptRecordError(
            "compressed wrapper message", "a value", "null", message="compressed wrapper message without a value"
        )
    messages = _inner_messages(decompress(codec, value), magic)
    # v1 inner offsets are relative and the wrapper holds the last one's absolute offset; v0 inner
    # offsets are absolute. Kafka uses inner offsets as they are when wrapper - last < 0 (librdkafka's 0).
    base = max(offset - messages[-1][0], 0) if magic == 1 else 0
    records = [
        (base + inner_offset, timestamp if is_log_append_time else inner_timestamp, inner_key, inner_value)
        for inner_offset, _, _, inner_timestamp, inner_key, inner_value in messages
    ]
    return records, magic, timestamp_type, CODEC_NAMES[codec]


def _legacy_message(buf: bytes, pos: int, end: int) -> tuple:
    """One magic 0/1 message in buf[pos:end] -> (offset, magic, attributes, timestamp, key, value)."""
    offset, _, stored_crc, magic, attributes = _HEADER.unpack_from(buf, pos)
    computed_crc = zlib.crc32(memoryview(buf)[pos + LEGACY_CRC_START : end])
    if computed_crc != stored_crc:
        stored, computed = f"0x{stored_crc:08x}", f"0x{computed_crc:08x}"
        message = f"CRC-32 mismatch: stored {stored}, computed {computed}"
        raise CorruptRecordError("message CRC-32", stored, computed, message=message)
    if magic not in LEGACY_MIN_SIZE:
        raise CorruptRecordError(
            "legacy message set",
            "magic 0 or 1",
            str(magic),
            message=f"message with magic {magic} in a legacy message set (expected 0 or 1)",
        )
    cursor, timestamp = pos + _HEADER.size, None
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(buf, cursor)
        cursor += 8
    key, cursor = _legacy_bytes(buf, cursor, end)
    value, cursor = _legacy_bytes(buf, cursor, end)
    if cursor != end:
        message = f"message fields end at byte {cursor}, its size says {end}"
        raise CorruptRecordError("message fields", f"an end at byte {end}", f"byte {cursor}", message=message)
    return offset, magic, attributes, timestamp, key, value


def _legacy_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        message = f"a key/value length at byte {pos} runs past the message's end {end}"
        raise CorruptRecordError(f"key/value length at byte {pos}", "4 bytes", f"{end - pos} bytes", message=message)
    (length,) = _INT32.unpack_from(buf, pos)
    if length < 0:
        return None, pos + 4
    if pos + 4 + length > end:
        message = f"a key/value of {length} bytes at byte {pos} runs past the message's end {end}"
        raise CorruptRecordError(
            f"key/value at byte {pos}", f"{length} bytes", f"{end - pos - 4} bytes", message=message
        )
    return buf[pos + 4 : pos + 4 + length], pos + 4 + length


def _inner_messages(buf: bytes, wrapper_magic: int) -> list[tuple]:
    """The uncompressed message set inside a compressed wrapper."""
    messages, pos = [], 0
    while pos < len(buf):
        if len(buf) - pos < _HEADER.size:
            message = f"inner message header at byte {pos} is cut off ({len(buf) - pos} bytes left)"
            raise CorruptRecordError(
                f"inner message header at byte {pos}", f"{_HEADER.size} bytes", f"{len(buf) - pos}", message=message
            )
        (size,) = _INT32.unpack_from(buf, pos + 8)
        end = pos + LOG_OVERHEAD + size
        if size < LEGACY_MIN_SIZE[0] or end > len(buf):
            message = f"inner message at byte {pos}: size {size} does not fit in {len(buf)} bytes"
            raise CorruptRecordError(
                f"inner message at byte {pos}", f"a size within {len(buf)} bytes", str(size), message=message
            )
        message = _legacy_message(buf, pos, end)
        if message[1] != wrapper_magic:
            reason = f"inner message at byte {pos} has magic {message[1]}, its wrapper {wrapper_magic}"
            raise CorruptRecordError(
                f"inner message at byte {pos}", f"magic {wrapper_magic}", f"magic {message[1]}", message=reason
            )
        if message[2] & _CODEC_MASK:
            raise CorruptRecordError(
                f"inner message at byte {pos}",
                "no compression",
                f"codec {message[2] & _CODEC_MASK}",
                message=f"inner message at byte {pos} is itself compressed",
            )
        messages.append(message)
        pos = end
    if not messages:
        raise CorruptRecordError(
            "compressed wrapper", "messages", "none", message="compressed wrapper holds no messages"
        )
    return messages
