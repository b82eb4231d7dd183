"""An encoder for Kafka's log layer: RecordBatch v2 and legacy magic 0/1 messages, byte-exact.

Used by the tests and by the generator (bench/generate.py).

Written imperatively from kafka-record-formats.md section 9 (not from the reader), so round trips
check the reader rather than agree with it. Compression follows what Kafka's Java writers produce:
xerial-framed snappy, `KafkaLZ4BlockOutputStream` frames (with the broken header checksum of
magic 0 when asked), single-member gzip, standard zstd frames.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import cramjam
import crc32c

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TIMESTAMP_MS = 1_700_000_000_000  # 0x18bcfe56800, the base timestamp of section 12.7
ABORT, COMMIT = 0, 1


_ONE_BYTE_VARINTS = tuple(bytes((zigzag,)) for zigzag in range(0x80))


class Rec(NamedTuple):
    """One record of a v2 batch; offset_delta defaults to its index in the batch."""

    key: bytes | None
    value: bytes | None
    offset_delta: int | None = None
    timestamp_delta: int = 0
    headers: tuple[tuple[bytes, bytes | None], ...] = ()


def varint(value: int) -> bytes:
    """Zig-zag varint/varlong, as `ByteUtils.writeVarint` / `writeVarlong` write it."""
    zigzag = (value << 1) ^ (value >> 63)
    if zigzag < 0x80:  # most lengths and deltas: the generator writes tens of millions of them
        return _ONE_BYTE_VARINTS[zigzag]
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _sized(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def record_v2(rec: Rec, offset_delta: int) -> bytes:
    body = b"".join((b"\x00", varint(rec.timestamp_delta), varint(offset_delta), _sized(rec.key), _sized(rec.value)))
    if rec.headers:
        body += varint(len(rec.headers)) + b"".join(_sized(key) + _sized(value) for key, value in rec.headers)
    else:
        body += b"\x00"
    return varint(len(body)) + body


def batch_v2(
    base_offset: int,
    records: Sequence[Rec],
    *,
    codec: str = "none",
    base_timestamp: int = TIMESTAMP_MS,
    max_timestamp: int | None = None,
    is_log_append_time: bool = False,
    is_transactional: bool = False,
    is_control: bool = False,
    has_delete_horizon: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = 0,
    snappy_xerial: bool = True,
    last_offset_delta: int | None = None,
) -> bytes:
    """A v2 batch. `last_offset_delta` defaults to the last record's; the log cleaner keeps the original."""
    deltas = [index if rec.offset_delta is None else rec.offset_delta for index, rec in enumerate(records)]
    body = b"".join(record_v2(rec, delta) for rec, delta in zip(records, deltas, strict=True))
    if codec != "none":
        body = compress(codec, body, snappy_xerial=snappy_xerial)
    if max_timestamp is None:
        max_timestamp = base_timestamp + max((rec.timestamp_delta for rec in records), default=0)
    attributes = CODECS[codec] | is_log_append_time << 3 | is_transactional << 4 | is_control << 5
    return frame_v2(
        base_offset,
        body,
        len(records),
        attributes=attributes | has_delete_horizon << 6,
        last_offset_delta=max(deltas, default=0) if last_offset_delta is None else last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


def frame_v2(
    base_offset: int,
    body: bytes,
    records_count: int,
    *,
    attributes: int = 0,
    last_offset_delta: int = 0,
    base_timestamp: int = TIMESTAMP_MS,
    max_timestamp: int = TIMESTAMP_MS,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = 0,
    magic: int = 2,
) -> bytes:
    """A v2 batch around any records bytes (valid or not), with a correct batchLength and CRC-32C."""
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    after_crc += body
    after_length = struct.pack(">ibI", partition_leader_epoch, magic, crc32c.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", base_offset, len(after_length)) + after_length


def marker_record(control_type: int, coordinator_epoch: int = 0, timestamp_delta: int = 0) -> Rec:
    """A transaction marker: key int16 version 0, int16 type; value int16 version 0, int32 coordinatorEpoch."""
    return Rec(
        struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, coordinator_epoch), timestamp_delta=timestamp_delta
    )


def control_batch(
    base_offset: int,
    producer_id: int,
    producer_epoch: int = 0,
    *,
    control_type: int = COMMIT,
    coordinator_epoch: int = 0,
    base_timestamp: int = TIMESTAMP_MS,
    partition_leader_epoch: int = 0,
) -> bytes:
    """A transaction marker batch."""
    return batch_v2(
        base_offset,
        [marker_record(control_type, coordinator_epoch)],
        base_timestamp=base_timestamp,
        is_transactional=True,
        is_control=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
    )


def message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int,
    timestamp: int = TIMESTAMP_MS,
    codec: str = "none",
    is_log_append_time: bool = False,
) -> bytes:
    """One legacy message with its offset and size: the unit of a magic 0/1 message set."""
    attributes = CODECS[codec] | (is_log_append_time << 3 if magic == 1 else 0)
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    body += (struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key) + (
        struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    )
    crc_and_body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(crc_and_body)) + crc_and_body


def wrapper(
    first_offset: int,
    inner: Sequence[tuple[bytes | None, bytes | None, int]],
    *,
    magic: int,
    codec: str,
    timestamp: int = TIMESTAMP_MS,
    is_log_append_time: bool = False,
    wrapper_offset: int | None = None,
) -> bytes:
    """A compressed wrapper of (key, value, timestamp) messages at first_offset, first_offset + 1, ...

    v1 inner offsets are relative (0..n-1), v0 ones absolute; either way the wrapper carries the
    absolute offset of the last inner message, unless wrapper_offset says otherwise (librdkafka: 0).
    """
    base = 0 if magic == 1 else first_offset
    inner_set = b"".join(
        message(base + index, key, value, magic=magic, timestamp=inner_timestamp)
        for index, (key, value, inner_timestamp) in enumerate(inner)
    )
    compressed = compress(codec, inner_set, lz4_broken_checksum=magic == 0)
    last = first_offset + len(inner) - 1 if wrapper_offset is None else wrapper_offset
    return message(
        last, None, compressed, magic=magic, timestamp=timestamp, codec=codec, is_log_append_time=is_log_append_time
    )


def compress(codec: str, data: bytes, *, snappy_xerial: bool = True, lz4_broken_checksum: bool = False) -> bytes:
    if codec == "gzip":
        return gzip.compress(data, mtime=0)
    if codec == "snappy":
        return xerial_snappy(data) if snappy_xerial else bytes(cramjam.snappy.compress_raw(data))
    if codec == "lz4":
        return kafka_lz4_frame(data, broken_checksum=lz4_broken_checksum)
    if codec == "zstd":
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown codec {codec}")


def xerial_snappy(data: bytes, block_size: int = 32 * 1024) -> bytes:
    """`SnappyOutputStream`: magic, int32 version 1, int32 compatible version 1, then int32 length + block."""
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for start in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + block_size]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def kafka_lz4_frame(data: bytes, *, broken_checksum: bool = False, block_size: int = 64 * 1024) -> bytes:
    """`KafkaLZ4BlockOutputStream`: FLG v1 + independent blocks, BD 64 KB, no checksums but the header's.

    The header checksum is byte 1 of xxh32(FLG, BD); Kafka's magic-0 writer hashed the magic too.
    """
    magic, descriptor = b"\x04\x22\x4d\x18", bytes((0x60, 0x40))
    checksum = (xxh32_short(magic + descriptor if broken_checksum else descriptor) >> 8) & 0xFF
    out = bytearray(magic + descriptor + bytes((checksum,)))
    for start in range(0, len(data), block_size):
        chunk = data[start : start + block_size]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):  # incompressible: stored raw, flagged by the high bit
            out += struct.pack("<I", len(chunk) | 0x80000000) + chunk
        else:
            out += struct.pack("<I", len(block)) + block
    return bytes(out + struct.pack("<I", 0))  # end mark


def xxh32_short(data: bytes) -> int:
    """xxHash32, seed 0, for inputs under 16 bytes (the xxHash spec's short-input path)."""
    primes = (2654435761, 2246822519, 3266489917, 668265263, 374761393)
    mask = 0xFFFFFFFF

    def rotl(value: int, bits: int) -> int:
        return ((value << bits) | (value >> (32 - bits))) & mask

    acc = (primes[4] + len(data)) & mask
    whole = len(data) // 4 * 4
    for start in range(0, whole, 4):
        acc = rotl((acc + int.from_bytes(data[start : start + 4], "little") * primes[2]) & mask, 17)
        acc = acc * primes[3] & mask
    for byte in data[whole:]:
        acc = rotl((acc + byte * primes[4]) & mask, 11) * primes[0] & mask
    acc = (acc ^ acc >> 15) * primes[1] & mask
    acc = (acc ^ acc >> 13) * primes[2] & mask
    return acc ^ acc >> 16
