"""Where reading resumes after a damaged batch: the next batch whose checksum holds.

A batch's length (and its offset, and v2's leader epoch and magic) lies outside its checksum, so one
flipped bit there sends a reader that trusts it into the middle of other bytes; Kafka's
DumpLogSegments stops at that point. The segment reader instead trusts a failed batch's length only
when the batch's checksum holds (`checksum_holds`), or when following lengths from it lands exactly
on the next batch whose checksum holds (`next_sound_batch`, `lengths_lead_to`): then each damaged
batch on the way is an error item of its own. Otherwise the bytes up to that next sound batch are one
unreadable fragment, and every batch from there on reads as it would in an undamaged file.

A position is a sound batch start when a whole batch frames there (a known magic, a length within
the file) and its checksum holds: CRC-32C over attributes..end for magic 2, CRC-32 over magic..end for
the legacy magic 0 and 1. Legacy messages count deliberately: a segment written before Kafka 0.11, or
under an old message.format.version, holds nothing else, and one damaged message there must not cost
the rest of the file. A false start needs a 32-bit checksum to match by chance, and a v2 candidate
must also have the header bits Kafka always writes as zero (and a legacy one key and value lengths
that fill its size exactly), so in practice it would take a deliberate forgery.

Linear: candidates are found by one regular expression over the header bytes (run in C, so long runs
of zeros or of record bytes cost no Python loop), and only those that also pass the header checks
have their checksum computed. A scan runs once per damaged stretch, not once per batch in it.
"""

from __future__ import annotations

import re
import struct
import zlib

import crc32c

# Every magic starts with int64 offset, int32 length; magic is byte 16 (after the leader epoch or CRC).
FRAMING = struct.Struct(">qi4xb")
LOG_OVERHEAD = 12
V2_HEADER_SIZE = 61
V2_CRC_START = 21  # the CRC-32C covers attributes through the last record
LEGACY_CRC_START = 16  # the CRC-32 covers magic through the end of the value
LEGACY_MIN_SIZE = {0: 14, 1: 22}  # crc, magic, attributes, [timestamp], key length, value length
MIN_LENGTH = {2: V2_HEADER_SIZE - LOG_OVERHEAD, **LEGACY_MIN_SIZE}
_CRC = struct.Struct(">I")
_INT32 = struct.Struct(">i")
# v2 after the CRC: attributes, lastOffsetDelta, two timestamps, producerId, producerEpoch, baseSequence, recordsCount.
_V2_TAIL = struct.Struct(">hiqqqhii")
_V2_LEADER_EPOCH = 12


def _length_at_least(minimum: int) -> bytes:
    """Four bytes of a big-endian int32 in [minimum, 2**31) for minimum < 256: never a run of zeros."""
    return rb"(?:[\x01-\x7f]...|\x00[\x01-\xff]..|\x00\x00[\x01-\xff].|\x00\x00\x00[\x%02x-\xff])" % minimum


def _byte_class(allowed: list[int]) -> bytes:
    return b"[" + b"".join(re.escape(bytes([value])) for value in allowed) + b"]"


# At a candidate: baseOffset >= 0, then either magic 2 with attributes bits 7-15 zero (unused by Kafka)
# and a codec Kafka knows, or magic 0/1 with only the codec (and for v1 the timestamp type) bits set.
_CANDIDATE = re.compile(
    rb"(?=[\x00-\x7f].{7}(?:"
    + _length_at_least(MIN_LENGTH[2])
    + rb".{4}\x02.{4}\x00"
    + _byte_class([value for value in range(0x80) if value & 0x07 <= 4])
    + rb"|"
    + _length_at_least(LEGACY_MIN_SIZE[0])
    + rb".{4}(?:\x00"
    + _byte_class([0, 1, 2, 3])
    + rb"|\x01"
    + _byte_class([0, 1, 2, 3, 8, 9, 10, 11])
    + rb")))",
    re.DOTALL,
)


def checksum_holds(data: bytes, pos: int) -> bool:
    """Whether a whole batch of a known magic frames at `pos` and its checksum matches its bytes."""
    if len(data) - pos < FRAMING.size:
        return False
    _, length, magic = FRAMING.unpack_from(data, pos)
    end = pos + LOG_OVERHEAD + length
    if length < MIN_LENGTH.get(magic, 1 << 31) or end > len(data):
        return False
    if magic == 2:
        (stored,) = _CRC.unpack_from(data, pos + V2_CRC_START - 4)
        return crc32c.crc32c(memoryview(data)[pos + V2_CRC_START : end]) == stored
    (stored,) = _CRC.unpack_from(data, pos + LOG_OVERHEAD)
    return zlib.crc32(memoryview(data)[pos + LEGACY_CRC_START : end]) == stored


def _plausible(data: bytes, pos: int) -> bool:
    """Header checks that cost no checksum: fields Kafka never writes out of range."""
    _, length, magic = FRAMING.unpack_from(data, pos)
    if magic == 2:
        if len(data) - pos < V2_HEADER_SIZE or length < MIN_LENGTH[2]:
            return False
        (leader_epoch,) = _INT32.unpack_from(data, pos + _V2_LEADER_EPOCH)
        _, last_delta, _, _, _, producer_epoch, sequence, count = _V2_TAIL.unpack_from(data, pos + V2_CRC_START)
        return min(leader_epoch, producer_epoch, sequence) >= -1 and 0 <= count <= last_delta + 1
    fields = LOG_OVERHEAD + LEGACY_MIN_SIZE[magic] - 8  # key length after crc, magic, attributes, [timestamp]
    if length < LEGACY_MIN_SIZE[magic] or len(data) - pos < fields + 4:
        return False
    (key_length,) = _INT32.unpack_from(data, pos + fields)
    value_at = pos + fields + 4 + max(key_length, 0)
    if key_length < -1 or len(data) - value_at < 4:
        return False
    (value_length,) = _INT32.unpack_from(data, value_at)
    return value_length >= -1 and value_at + 4 + max(value_length, 0) == pos + LOG_OVERHEAD + length


def next_sound_batch(data: bytes, start: int) -> int | None:
    """The first position >= `start` where a sound batch starts, or None when none does."""
    for match in _CANDIDATE.finditer(data, start):
        pos = match.start()
        if _plausible(data, pos) and checksum_holds(data, pos):
            return pos
    return None


def lengths_lead_to(data: bytes, pos: int, target: int) -> bool:
    """Whether following batch lengths from `pos` lands exactly on `target`, each step a framable length."""
    while pos < target:
        if len(data) - pos < FRAMING.size:
            return False
        _, length, magic = FRAMING.unpack_from(data, pos)
        if length < MIN_LENGTH.get(magic, LEGACY_MIN_SIZE[0]):
            return False
        pos += LOG_OVERHEAD + length
    return pos == target
