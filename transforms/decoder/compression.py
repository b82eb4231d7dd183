"""The codecs Kafka uses inside record batches: gzip, snappy, lz4 and zstd, through cramjam.

Grain: one compressed payload in, its uncompressed bytes out. Kafka's framing quirks live here
(kafka-record-formats.md section 9.1):
- snappy from Java clients is xerial-framed (`SnappyOutputStream`); librdkafka and old clients may
  write one raw snappy block instead, recognised by the absence of the xerial magic.
- lz4 is an LZ4 frame, but Kafka's magic-0 writer (`useBrokenFlagDescriptorChecksum`) hashed the
  frame magic into the header checksum byte. cramjam rejects such frames
  ("ERROR_headerChecksum_invalid"), so a frame whose checksum byte equals Kafka's broken value is
  repaired before decoding. The batch CRC has already vouched for these bytes.

Every failure is a `CorruptRecordError`, the decoder's one error type for bad bytes.
"""

from __future__ import annotations

import struct

import cramjam

from transforms.decoder.errors import CorruptRecordError

CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")  # by the codec id in attribute bits 0-2
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, int32 version, int32 compatible version
_INT32 = struct.Struct(">i")
_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLAGS_KAFKA_NEVER_SETS = 0x08 | 0x01  # content size, dictionary id
_XXH_PRIME_1, _XXH_PRIME_2, _XXH_PRIME_3 = 2654435761, 2246822519, 3266489917
_XXH_PRIME_4, _XXH_PRIME_5, _MASK_32 = 668265263, 374761393, 0xFFFFFFFF


def decompress(codec: int, payload: bytes) -> bytes:
    """The uncompressed bytes of one batch's records (or one legacy wrapper's inner message set)."""
    try:
        if codec == 1:
            return bytes(cramjam.gzip.decompress(payload))
        if codec == 2:
            return _snappy(payload)
        if codec == 3:
            return _lz4(payload)
        if codec == 4:
            return bytes(cramjam.zstd.decompress(payload))
    except CorruptRecordError:
        raise
    except Exception as error:  # cramjam.DecompressionError, and whatever a codec library raises on garbage
        where = f"{CODEC_NAMES[codec]} payload of {len(payload)} bytes"
        raise CorruptRecordError(
            where, "bytes that decompress", str(error), message=f"{where} does not decompress: {error}"
        ) from None
    raise CorruptRecordError(
        "compression codec", "1-4", str(codec), message=f"unknown compression codec {codec} (expected 1-4)"
    )


def _snappy(payload: bytes) -> bytes:
    if payload[:8] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(payload))
    blocks = []
    pos, size = _XERIAL_HEADER_SIZE, len(payload)
    if size < pos:
        raise CorruptRecordError(
            "xerial snappy header",
            f"{pos} bytes",
            f"{size} bytes",
            message=f"xerial snappy: the {pos}-byte header is cut off ({size} bytes)",
        )
    while pos < size:
        if pos + 4 > size:
            raise CorruptRecordError(
                f"xerial snappy block length at byte {pos}",
                "4 bytes",
                f"{size - pos} bytes left",
                message=f"xerial snappy: block length at byte {pos} is cut off ({size - pos} bytes left)",
            )
        (length,) = _INT32.unpack_from(payload, pos)
        if length < 0 or pos + 4 + length > size:
            raise CorruptRecordError(
                f"xerial snappy block at byte {pos}",
                f"a length within the {size}-byte payload",
                str(length),
                message=f"xerial snappy: block of {length} bytes at byte {pos} overruns the {size}-byte payload",
            )
        blocks.append(bytes(cramjam.snappy.decompress_raw(payload[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    return b"".join(blocks)


def _lz4(payload: bytes) -> bytes:
    try:
        return bytes(cramjam.lz4.decompress(payload))
    except cramjam.DecompressionError:
        repaired = _repair_kafka_v0_header_checksum(payload)
        if repaired is None:
            raise
        return bytes(cramjam.lz4.decompress(repaired))


def _repair_kafka_v0_header_checksum(frame: bytes) -> bytes | None:
    """The frame with a correct header checksum, if its stored one is the value Kafka's magic-0 writer put there.

    The LZ4 frame spec hashes the descriptor, FLG and BD here (Kafka's writer sets neither the content
    size nor the dictionary id flag); Kafka's old writer hashed the 4 magic bytes too. Either way the
    checksum byte is (xxh32 >> 8) & 0xFF.
    """
    if len(frame) < 7 or frame[:4] != _LZ4_FRAME_MAGIC or frame[4] & _LZ4_FLAGS_KAFKA_NEVER_SETS:
        return None
    if frame[6] != (_xxh32_short(frame[:6]) >> 8) & 0xFF:
        return None
    return frame[:6] + bytes(((_xxh32_short(frame[4:6]) >> 8) & 0xFF,)) + frame[7:]


def _xxh32_short(data: bytes) -> int:
    """xxHash32 with seed 0 for inputs under 16 bytes (an lz4 frame descriptor), per the xxHash spec."""
    accumulator = (_XXH_PRIME_5 + len(data)) & _MASK_32
    pos = 0
    while pos + 4 <= len(data):
        lane = int.from_bytes(data[pos : pos + 4], "little")
        accumulator = _rotate_left((accumulator + lane * _XXH_PRIME_3) & _MASK_32, 17) * _XXH_PRIME_4 & _MASK_32
        pos += 4
    for byte in data[pos:]:
        accumulator = _rotate_left((accumulator + byte * _XXH_PRIME_5) & _MASK_32, 11) * _XXH_PRIME_1 & _MASK_32
    accumulator = (accumulator ^ (accumulator >> 15)) * _XXH_PRIME_2 & _MASK_32
    accumulator = (accumulator ^ (accumulator >> 13)) * _XXH_PRIME_3 & _MASK_32
    return accumulator ^ (accumulator >> 16)


def _rotate_left(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK_32
