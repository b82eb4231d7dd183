"""The codecs Kafka uses inside record batches: gzip, snappy (xerial framing), lz4 (frame), zstd.

cramjam does the work; Kafka's framing quirks are handled here (kafka-record-formats.md section 9.1):
snappy streams written by Java clients use xerial's `SnappyOutputStream` framing, and lz4 data in
magic-0 message sets carries a frame-descriptor checksum computed over the wrong bytes.
"""

from __future__ import annotations

import struct

import cramjam

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, int32 version, int32 compatible version
_INT32 = struct.Struct(">i")
_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"


class CompressionError(ValueError):
    pass


def _xerial_snappy(data: bytes) -> bytes:
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError(f"xerial snappy: truncated block length at byte {pos}")
        (size,) = _INT32.unpack_from(data, pos)
        if size < 0 or pos + 4 + size > len(data):
            raise CompressionError(f"xerial snappy: block of {size} bytes at byte {pos} overruns {len(data)} bytes")
        out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return bytes(out)


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, for the 2-3 bytes of an lz4 frame descriptor only."""
    prime1, prime2, prime3, prime4, prime5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(value: int, bits: int) -> int:
        return ((value << bits) | (value >> (32 - bits))) & mask

    accumulator = (seed + prime5 + len(data)) & mask
    pos = 0
    while pos + 4 <= len(data):
        accumulator = rotl((accumulator + int.from_bytes(data[pos : pos + 4], "little") * prime3) & mask, 17)
        accumulator = (accumulator * prime4) & mask
        pos += 4
    for byte in data[pos:]:
        accumulator = (rotl((accumulator + byte * prime5) & mask, 11) * prime1) & mask
    accumulator ^= accumulator >> 15
    accumulator = (accumulator * prime2) & mask
    accumulator ^= accumulator >> 13
    accumulator = (accumulator * prime3) & mask
    return accumulator ^ (accumulator >> 16)


def _lz4_with_repaired_descriptor_checksum(data: bytes) -> bytes:
    """Kafka's magic-0 writer hashed the frame magic with the descriptor; recompute it over FLG..BD(..size)."""
    if len(data) < 7 or data[:4] != _LZ4_FRAME_MAGIC:
        return data
    flags = data[4]
    descriptor_end = 6 + (8 if flags & 0x08 else 0)
    if len(data) <= descriptor_end:
        return data
    checksum = (_xxh32(data[4:descriptor_end]) >> 8) & 0xFF
    return data[:descriptor_end] + bytes([checksum]) + data[descriptor_end + 1 :]


def decompress(codec: int, data: bytes) -> bytes:
    try:
        if codec == 1:
            return bytes(cramjam.gzip.decompress(data))
        if codec == 2:
            return _xerial_snappy(data) if data[:8] == XERIAL_MAGIC else bytes(cramjam.snappy.decompress_raw(data))
        if codec == 3:
            try:
                return bytes(cramjam.lz4.decompress(data))
            except Exception:  # cramjam raises its own DecompressionError; retry with Kafka's old checksum fixed
                return bytes(cramjam.lz4.decompress(_lz4_with_repaired_descriptor_checksum(data)))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(data))
    except CompressionError:
        raise
    except Exception as error:
        raise CompressionError(
            f"{CODEC_NAMES[codec]} payload of {len(data)} bytes does not decompress: {error}"
        ) from None
    raise CompressionError(f"unknown compression codec {codec} (known: 0-4)")
