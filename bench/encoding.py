"""A tiny, independent encoder for Kafka's primitive encodings, used by the tests and the generator.

Written imperatively, not from our declarations, so round trips check the interpreter rather than
agree with it."""

from __future__ import annotations

import struct


def i8(value: int) -> bytes:
    return struct.pack(">b", value)


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def string(value: str | None) -> bytes:
    if value is None:
        return i16(-1)
    raw = value.encode()
    return i16(len(raw)) + raw


def compact_string(value: str | None) -> bytes:
    if value is None:
        return uvarint(0)
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def blob(value: bytes | None) -> bytes:
    return i32(-1) if value is None else i32(len(value)) + value


def compact_blob(value: bytes | None) -> bytes:
    return uvarint(0) if value is None else uvarint(len(value) + 1) + value


def array(items: list | None, encode) -> bytes:
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(encode(item) for item in items)


def compact_array(items: list | None, encode) -> bytes:
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(encode(item) for item in items)


def tags(fields: dict[int, bytes] | None = None) -> bytes:
    fields = fields or {}
    return uvarint(len(fields)) + b"".join(
        uvarint(tag) + uvarint(len(data)) + data for tag, data in sorted(fields.items())
    )


def topic_partitions(topic: str, partitions: list[int]) -> bytes:
    return string(topic) + array(partitions, i32)
