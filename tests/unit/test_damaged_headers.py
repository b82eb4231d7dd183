"""Real broker segments with one batch header damaged: only that batch is lost, every other record reads.

The segments are the lab captures (tests/captures/kafka-*/*/segments: real Kafka 3.9.2, 4.2.1, 4.3.1 and 4.4.0
broker output). Each batch in turn gets bits of its batchLength, magic or attributes flipped; the
segment reader must then return exactly one error item holding that batch's bytes, and every record
of every other batch, before and after it, as the undamaged file gives it. `jobs.dump` prints the same.
No Spark; a few seconds over every batch of every capture.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import struct
from pathlib import Path

import pytest

from jobs.dump import dump_lines, main
from transforms.bronze import raw_batch
from transforms.decoder.record_batches import LogRecord, read_segment_bytes

CAPTURES = Path(__file__).parent.parent / "captures"
SEGMENTS = sorted(
    path for path in CAPTURES.glob("kafka-*/*/segments/__consumer_offsets-*/*.log") if path.stat().st_size
)
_LENGTH, _MAGIC, _ATTRIBUTES = 8, 16, 21  # field positions in a v2 batch header
_CONTROL = 0x20
# (field, bit) pairs flipped in each batch. Length: low bits (a few bytes off, still inside the file),
# middle bits (past the file's end) and the sign bit; magic 2 becomes 3, 0 (read as legacy), 6, 130;
# attributes: the codec, timestamp-type, transactional and an unused bit.
DAMAGES = [
    *((_LENGTH, bit) for bit in (0, 1, 4, 9, 14, 22, 30, 31)),
    *((_MAGIC, bit) for bit in (0, 1, 2, 7)),
    *((_ATTRIBUTES, bit) for bit in (8, 10, 11, 12, 1)),
]


def batch_starts(data: bytes) -> list[int]:
    """Batch positions of an undamaged segment, by its length fields, and the file's end last."""
    starts = [0]
    while starts[-1] < len(data):
        starts.append(starts[-1] + 12 + struct.unpack_from(">i", data, starts[-1] + _LENGTH)[0])
    assert starts[-1] == len(data)
    return starts


def flipped(data: bytes, position: int, bit: int) -> bytes:
    damaged = bytearray(data)
    damaged[position + bit // 8] ^= 1 << (bit % 8)
    return bytes(damaged)


def read(data: bytes, segment: Path) -> list[LogRecord]:
    return list(read_segment_bytes(data, partition=0, source_file=str(segment)))


def test_the_captures_are_real_v2_segments_with_many_batches():
    assert len(SEGMENTS) >= 20
    assert {path.parts[-5] for path in SEGMENTS} >= {"kafka-4.2.1", "kafka-3.9.2"}
    assert sum(len(batch_starts(path.read_bytes())) - 1 for path in SEGMENTS) >= 300


@pytest.mark.parametrize("segment", SEGMENTS, ids=lambda path: str(path.relative_to(CAPTURES)))
def test_a_damaged_header_loses_only_its_own_batch(segment):
    data = segment.read_bytes()
    whole = read(data, segment)
    assert whole and all(item.error is None for item in whole)
    starts = batch_starts(data)
    for start, end in itertools.pairwise(starts):
        is_control = bool(data[start + _ATTRIBUTES + 1] & _CONTROL)
        expected = [item for item in whole if item.batch_position != start]
        if is_control:  # without its marker, the transaction it ended stays pending
            expected = [dataclasses.replace(item, txn_state=None) for item in expected]
        for field, bit in DAMAGES:
            damaged = flipped(data, start + field, bit)
            items = read(damaged, segment)
            (error,) = [item for item in items if item.error is not None]
            assert (error.batch_position, error.raw) == (start, damaged[start:end]), (start, field, bit, error.error)
            assert error.offset == struct.unpack_from(">q", data, start)[0]  # the base offset, undamaged
            others = [item for item in items if item.error is None]
            if is_control:
                others = [dataclasses.replace(item, txn_state=None) for item in others]
            assert others == expected, (start, field, bit)


def test_dump_prints_every_record_after_a_damaged_length(tmp_path, capsys):
    """The biggest capture, its first batch's length flipped: dump's lines are the undamaged ones
    but that batch's, which become one error line naming its byte range."""
    segment = max(SEGMENTS, key=lambda path: path.stat().st_size)
    data = segment.read_bytes()
    starts = batch_starts(data)
    damaged_file = tmp_path / segment.parent.name / segment.name
    damaged_file.parent.mkdir()
    damaged_file.write_bytes(flipped(data, _LENGTH, 30))
    clean = list(dump_lines([str(segment)]))
    lines = list(dump_lines([str(damaged_file)]))
    first_batch = [item.offset for item in read(data, segment) if item.batch_position == 0]
    assert len(clean) - len(first_batch) >= 20
    assert lines[1:] == [line for line in clean if line["offset"] not in first_batch]
    assert lines[0]["offset"] == 0 and f"bytes 0 to {starts[1]} ({starts[1]} bytes)" in lines[0]["error"]
    assert main([str(damaged_file), "--fail-on-error"]) == 1
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == lines


def test_a_fragment_is_keyed_by_its_file_position_uniquely_and_the_same_every_read():
    segment = max(SEGMENTS, key=lambda path: path.stat().st_size)
    data = segment.read_bytes()
    starts = batch_starts(data)
    damaged = flipped(flipped(data, starts[1] + _LENGTH, 30), starts[3] + _MAGIC, 0)  # two batches, apart
    source_file = "file:" + str(segment)
    ids = [raw_batch(list(read_segment_bytes(damaged, partition=8, source_file=source_file)), "c", "run")
           .to_pydict()["record_id"] for _ in range(2)]  # fmt: skip
    assert ids[0] == ids[1] and len(set(ids[0])) == len(ids[0])
    assert [i for i in ids[0] if "@" in i] == [f"c/{source_file}@{starts[1]}", f"c/{source_file}@{starts[3]}"]
