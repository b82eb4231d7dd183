"""A corpus of damaged `__consumer_offsets` segments, with the fate of every damaged record known.

Every damaged item is a batch of its own at an offset of its own, so the quarantine row it must
become is found by (partition, offset) and its reason checked against the damage done:
- in the log layer (stage `read`): bit flips and wrong CRCs (CRC-32C mismatch), broken compression
  under every codec (valid CRC, bytes the codec cannot expand), unknown magic bytes and magic bytes
  that read as legacy (CRC-32 mismatch), flipped attribute bits and attributes naming an unknown codec,
  a record count beyond the records present, batchLength flipped below the minimum, past the file's
  end or a few bytes short, and at the end of each file a torn tail or a batchLength past the end;
- in the record layer, inside valid batches (stage `key` or `value`): unknown key and value
  versions, truncated keys and values, and string lengths that run past the end.
Undamaged offset commits and group records between them must decode as usual.

A batch whose checksum fails leaves its length in doubt: the reader resumes at the next batch whose
checksum holds. A run of such batches keeps one quarantine row each when all their lengths are intact,
and becomes one row (the bytes up to the next sound batch, keyed by the run's first offset) when any
length in it is damaged: the corpus knows which, from the damage it did, and says so in `expected`.
"""

from __future__ import annotations

import random
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.batch_builder import CODECS, Rec, batch_v2, compress, frame_v2, record_v2
from bench.encoding import i16, i32, string
from bench.records import group_metadata_key, group_metadata_value, offset_commit_key, offset_commit_value

_LENGTH, _MAGIC, _CRC_FIELD, _ATTRIBUTES = 8, 16, 17, 21  # offset 8 + length 4 + leader epoch 4 + magic 1
_CRC_COVERED_FROM = 21
_COMMIT_MS = 1_700_000_000_000


@dataclass(frozen=True)
class Damage:
    kind: str
    stage: str  # the quarantine stage it must reach
    reason: str  # a fragment the quarantine reason must hold


# The reason fragments are the decoder's own wording for each kind of damage.
BIT_FLIP = Damage("bit_flip", "read", "CRC-32C mismatch")
BAD_CRC = Damage("bad_crc", "read", "CRC-32C mismatch")
BROKEN_COMPRESSION = {codec: Damage(f"broken_{codec}", "read", codec) for codec in ("gzip", "snappy", "lz4", "zstd")}
UNKNOWN_MAGIC = Damage("unknown_magic", "read", "unknown magic")
RECORD_COUNT = Damage("record_count_beyond_records", "read", "runs past the batch's end")
LEGACY_MAGIC = Damage("magic_read_as_legacy", "read", "CRC-32 mismatch")
ATTRIBUTES_FLIP = Damage("attributes_bit_flip", "read", "CRC-32C mismatch")
ATTRIBUTES_CODEC = Damage("attributes_unknown_codec", "read", "unknown compression codec")
# Damaged lengths (outside every checksum): the reader cannot trust them and must resynchronise.
LENGTH_BELOW_MINIMUM = Damage("length_below_minimum", "read", "is below the minimum")
LENGTH_PAST_END = Damage("length_past_end", "read", "runs past the")
LENGTH_WITHIN_FILE = Damage("length_within_file", "read", "CRC-32C mismatch")  # checked over the wrong bytes
TORN_TAIL = Damage("torn_tail", "read", "unreadable from here")
BATCH_LENGTH = Damage("batch_length_past_end", "read", "unreadable from here")
KEY_VERSION = Damage("unknown_key_version", "key", "unknown record type")
VALUE_VERSION = Damage("unknown_value_version", "value", "expected version 0-4")
TRUNCATED_KEY = Damage("truncated_key", "key", "key")
TRUNCATED_VALUE = Damage("truncated_value", "value", "OffsetCommitValue")
STRING_LENGTH = Damage("string_length_past_end", "key", "expected a string of")
DAMAGED_LENGTHS = (LENGTH_BELOW_MINIMUM, LENGTH_PAST_END, LENGTH_WITHIN_FILE)
MID_FILE = (
    BIT_FLIP,
    BAD_CRC,
    *BROKEN_COMPRESSION.values(),
    UNKNOWN_MAGIC,
    LEGACY_MAGIC,
    ATTRIBUTES_FLIP,
    ATTRIBUTES_CODEC,
    RECORD_COUNT,
    *DAMAGED_LENGTHS,
    KEY_VERSION,
    VALUE_VERSION,
    TRUNCATED_KEY,
    TRUNCATED_VALUE,
    STRING_LENGTH,
)
TAILS = (TORN_TAIL, BATCH_LENGTH)
# Batches whose checksum fails (or whose magic is unknown): nothing vouches for their length.
UNSOUND = {BIT_FLIP, BAD_CRC, UNKNOWN_MAGIC, LEGACY_MAGIC, ATTRIBUTES_FLIP, *DAMAGED_LENGTHS, *TAILS}
UNFRAMED_LENGTH = {*DAMAGED_LENGTHS, *TAILS}  # lengths that lead nowhere: never to a batch's start


@dataclass(frozen=True)
class Expected:
    """The quarantine row a damaged item (or a run of them) must become."""

    stage: str
    reasons: tuple[str, ...]  # fragments the reason must hold
    raw_size: int | None  # stage read: the bytes kept, exactly


@dataclass
class Corpus:
    root: Path
    damaged: dict[tuple[int, int], Damage] = field(default_factory=dict)  # (partition, offset) -> damage
    intact: set[tuple[int, int]] = field(default_factory=set)
    expected: dict[tuple[int, int], Expected] = field(default_factory=dict)  # the quarantine rows

    def kinds(self) -> Counter:
        return Counter(damage.kind for damage in self.damaged.values())


def _commit(rng: random.Random, index: int) -> tuple[bytes, bytes]:
    key = offset_commit_key(f"group-{index % 97}", f"topic-{index % 13}", index % 24)
    return key, offset_commit_value(rng.choice((3, 4)), rng.randrange(1 << 40), rng.randrange(50), b"", _COMMIT_MS)


def _group(index: int) -> tuple[bytes, bytes]:
    key = group_metadata_key(f"group-{index % 97}")
    return key, group_metadata_value("consumer", index % 1000 + 1, "range", None, _COMMIT_MS, [])


def _flip(data: bytes, rng: random.Random, start: int) -> bytes:
    damaged = bytearray(data)
    damaged[rng.randrange(start, len(damaged))] ^= 1 << rng.randrange(8)
    return bytes(damaged)


def _damaged_batch(damage: Damage, offset: int, rng: random.Random, index: int) -> bytes:
    key, value = _commit(rng, index)
    if damage is BIT_FLIP:
        return _flip(batch_v2(offset, [Rec(key, value)]), rng, _CRC_COVERED_FROM)
    if damage is BAD_CRC:
        batch = bytearray(batch_v2(offset, [Rec(key, value)]))
        crc = struct.unpack_from(">I", batch, _CRC_FIELD)[0]
        struct.pack_into(">I", batch, _CRC_FIELD, crc ^ (rng.randrange(1, 1 << 32)))
        return bytes(batch)
    if damage.kind.startswith("broken_"):
        codec = damage.reason
        records = b"".join(record_v2(Rec(key, value), delta) for delta in range(3))
        compressed = compress(codec, records)
        return frame_v2(offset, compressed[: rng.randrange(1, len(compressed) - 1)], 3, attributes=CODECS[codec],
                        last_offset_delta=2)  # fmt: skip
    if damage is UNKNOWN_MAGIC:
        return frame_v2(offset, record_v2(Rec(key, value), 0), 1, magic=rng.randrange(3, 128))
    if damage is ATTRIBUTES_CODEC:  # a writer's bug: the checksum holds over attributes Kafka never writes
        return frame_v2(offset, record_v2(Rec(key, value), 0), 1, attributes=rng.randrange(5, 8))
    if damage in (LEGACY_MAGIC, ATTRIBUTES_FLIP, *DAMAGED_LENGTHS):
        return _damaged_header(damage, batch_v2(offset, [Rec(key, value)]), rng)
    if damage is RECORD_COUNT:
        return frame_v2(offset, record_v2(Rec(key, value), 0), rng.randrange(2, 1000))
    if damage is KEY_VERSION:
        key = i16(rng.randrange(1000, 32767)) + key[2:]
    elif damage is VALUE_VERSION:
        value = i16(rng.randrange(100, 32767)) + value[2:]
    elif damage is TRUNCATED_KEY:
        key = key[: rng.randrange(0, len(key))]
    elif damage is TRUNCATED_VALUE:
        value = value[: rng.randrange(1, len(value))]
    elif damage is STRING_LENGTH:
        group = f"group-{index % 97}"
        key = i16(1) + struct.pack(">h", len(group) + rng.randrange(1, 30000)) + group.encode() + string("t") + i32(0)
    return batch_v2(offset, [Rec(key, value)])


def _damaged_header(damage: Damage, batch: bytes, rng: random.Random) -> bytes:
    damaged = bytearray(batch)
    if damage is LEGACY_MAGIC:
        damaged[_MAGIC] = rng.randrange(2)
    elif damage is ATTRIBUTES_FLIP:
        damaged[_ATTRIBUTES + rng.randrange(2)] ^= 1 << rng.randrange(8)
    else:
        (length,) = struct.unpack_from(">i", damaged, _LENGTH)
        if damage is LENGTH_BELOW_MINIMUM:
            length ^= -(1 << 31)  # the sign bit
        elif damage is LENGTH_PAST_END:
            length ^= 1 << rng.randrange(24, 31)  # 16 MiB or more: past any file of the corpus
        else:  # a set low bit cleared: up to 32 bytes short, never a whole batch (61 bytes or more)
            length ^= 1 << rng.choice([bit for bit in range(6) if length >> bit & 1])
        struct.pack_into(">i", damaged, _LENGTH, length)
    return bytes(damaged)


def _damaged_tail(damage: Damage, offset: int, rng: random.Random, index: int) -> bytes:
    batch = batch_v2(offset, [Rec(*_commit(rng, index))])
    if damage is TORN_TAIL:
        return batch[: rng.randrange(8, len(batch))]  # the offset survives: the quarantine row keeps it
    damaged = bytearray(batch)
    struct.pack_into(">i", damaged, 8, len(batch) + rng.randrange(1, 1 << 20))
    return bytes(damaged)


def write_corpus(root: Path, *, partitions: int = 20, files: int = 5, damaged_per_file: int = 100,
                 intact_per_file: int = 20, seed: int = 848) -> Corpus:  # fmt: skip
    """Writes `partitions` x `files` segment files; each ends in a damaged tail."""
    rng = random.Random(seed)
    corpus = Corpus(root)
    index = 0
    for partition in range(partitions):
        directory = root / f"__consumer_offsets-{partition}"
        directory.mkdir(parents=True)
        offset = 0
        for _ in range(files):
            base = offset
            items = [*(rng.choice(MID_FILE) for _ in range(damaged_per_file)), *([None] * intact_per_file)]
            rng.shuffle(items)
            chunks = []  # (offset, damage or None, bytes)
            for damage in items:
                index += 1
                if damage is None:
                    key, value = _commit(rng, index) if index % 4 else _group(index)
                    chunks.append((offset, None, batch_v2(offset, [Rec(key, value)])))
                    corpus.intact.add((partition, offset))
                else:
                    chunks.append((offset, damage, _damaged_batch(damage, offset, rng, index)))
                offset += 3  # room for the three records of a compressed batch
            tail = rng.choice(TAILS)
            chunks.append((offset, tail, _damaged_tail(tail, offset, rng, index)))
            offset += 1
            corpus.damaged.update(((partition, at), damage) for at, damage, _ in chunks if damage is not None)
            corpus.expected.update(_expected_rows(partition, chunks))
            (directory / f"{base:020d}.log").write_bytes(b"".join(chunk for _, _, chunk in chunks))
    return corpus


def _expected_rows(partition: int, chunks: list[tuple]) -> dict[tuple[int, int], Expected]:
    """The quarantine rows of one file: a run of unsound batches with a damaged length is one row."""
    rows, run = {}, []
    for at, damage, chunk in [*chunks, (None, None, b"")]:  # a sentinel ends the last run
        if damage in UNSOUND:
            run.append((at, damage, chunk))
            continue
        if any(damaged in UNFRAMED_LENGTH for _, damaged, _ in run):
            (head, first, _), size = run[0], sum(len(bad) for *_, bad in run)
            resumed = "unreadable fragment" if at is not None else "unreadable from here"
            rows[(partition, head)] = Expected("read", (first.reason, resumed, f"({size} bytes)"), size)
        else:
            rows.update(((partition, head), Expected("read", (bad.reason,), len(raw))) for head, bad, raw in run)
        run = []
        if damage is not None:
            size = len(chunk) if damage.stage == "read" else None
            rows[(partition, at)] = Expected(damage.stage, (damage.reason,), size)
    return rows
