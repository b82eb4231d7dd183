"""The vectorised offset-commit decoder gives exactly the rows of the reference decoder.

The reference is the declarative decoder (schemas/ layouts read by transforms.codec, rows by
transforms.decode_rows). Both run over every real record the project holds (lab captures from
Kafka 4.2.1 and 3.9.2, public fixtures, a generator sample) and over damaged offset commits; the
decoded rows must be equal, column for column. No Spark: the Arrow batches are built here.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from bench.encoding import i16, i32, i64, string, tags, uvarint
from bench.generate import main as generate
from jobs.segment_files import read_paths
from tests.conftest import PUBLIC_FIXTURES, REPO_ROOT
from tests.test_generator import SAMPLE_ARGS
from transforms import silver
from transforms.decode_rows import decode_raw_row
from transforms.offset_commit_batches import decode_offset_commits

INPUT_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("record_id", pa.string()),
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("txn_state", pa.string()),
        ("producer_id", pa.int64()),
        ("read_error", pa.string()),
        ("source_file", pa.string()),
        ("capture_run_id", pa.string()),
        ("record_at_ms", pa.int64()),
    ]
)
DECODED_SCHEMA = silver.to_arrow_schema(silver.decoded_schema)
KEY = i16(1) + string("orders-app") + string("orders") + i32(7)


def raw_input(index: int, key: bytes | None, value: bytes | None, **extra) -> dict:
    return {
        "cluster": "c",
        "record_id": f"c/3/{index}",
        "source_partition": 3,
        "source_offset": index,
        "key": key,
        "value": value,
        "txn_state": extra.get("txn_state"),
        "producer_id": extra.get("producer_id", -1),
        "read_error": extra.get("read_error"),
        "source_file": "/logs/__consumer_offsets-3/00000000000000000000.log",
        "capture_run_id": "run-1",
        "record_at_ms": 1_793_577_600_000 + index,
    }


def reference_rows(inputs: list[dict]) -> dict[str, dict]:
    rows = []
    for raw in inputs:
        raw = dict(raw)
        raw["record_at"] = raw.pop("record_at_ms")
        rows.append(decode_raw_row(raw))
    normalised = pa.RecordBatch.from_pylist(rows, schema=DECODED_SCHEMA).to_pylist()
    return {row["record_id"]: row for row in normalised}


def decoder_rows(inputs: list[dict], batch_size: int = 1_000) -> dict[str, dict]:
    batches = [
        pa.RecordBatch.from_pylist(inputs[start : start + batch_size], schema=INPUT_SCHEMA)
        for start in range(0, len(inputs), batch_size)
    ]
    rows = [row for batch in silver._decode_batches(iter(batches), silver.ALL_RECORDS) for row in batch.to_pylist()]
    assert len(rows) == len(inputs)
    return {row["record_id"]: row for row in rows}


def assert_same_rows(inputs: list[dict]) -> None:
    expected, actual = reference_rows(inputs), decoder_rows(inputs)
    assert actual.keys() == expected.keys()
    differ = [(key, actual[key], expected[key]) for key in expected if actual[key] != expected[key]]
    assert not differ, f"{len(differ)} of {len(expected)} rows differ; first: {differ[0]}"


def taken_by_fast_path(inputs: list[dict]) -> int:
    batch = pa.RecordBatch.from_pylist(inputs, schema=INPUT_SCHEMA)
    return decode_offset_commits(batch, DECODED_SCHEMA)[0].num_rows


def inputs_from(paths: list) -> list[dict]:
    inputs = []
    for index, record in enumerate(read_paths([str(path) for path in paths])):
        # As bronze holds them: bytes that never framed as a record are in `value`, with the read error.
        extra = {"txn_state": record.txn_state, "producer_id": record.producer_id, "read_error": record.error}
        inputs.append(raw_input(index, record.key, record.raw if record.error else record.value, **extra))
    return inputs


@pytest.fixture(scope="module")
def real_inputs(tmp_path_factory) -> list[dict]:
    sample = tmp_path_factory.mktemp("sample") / "generated"
    generate([str(sample), *SAMPLE_ARGS])
    captures = sorted((REPO_ROOT / "tests" / "captures").glob("kafka-*/*/segments"))
    return inputs_from([*captures, PUBLIC_FIXTURES, sample / "segments"])


def test_every_real_record_decodes_as_the_reference_decodes_it(real_inputs):
    assert_same_rows(real_inputs)


def test_the_fast_path_takes_the_real_offset_commits(real_inputs):
    commits = [raw for raw in real_inputs if raw["key"] and raw["key"][:2] == b"\x00\x01"]
    assert len(commits) > 5_000
    assert taken_by_fast_path(commits) == len(commits)
    others = [raw for raw in real_inputs if raw["key"] and raw["key"][:2] != b"\x00\x01"]
    assert taken_by_fast_path(others) == 0


def v3(offset=42, epoch=5, metadata=b"", commit=1_700_000_000_000) -> bytes:
    return i16(3) + i64(offset) + i32(epoch) + i16(len(metadata)) + metadata + i64(commit)


def v4(offset=42, epoch=5, metadata=b"", commit=1_700_000_000_000, tag_section=b"\x00") -> bytes:
    return i16(4) + i64(offset) + i32(epoch) + uvarint(len(metadata) + 1) + metadata + i64(commit) + tag_section


def legacy(version: int, metadata=b"m", expire=None) -> bytes:
    tail = i64(1_700_000_000_000) + (i64(expire) if expire is not None else b"")
    return i16(version) + i64(9) + i16(len(metadata)) + metadata + tail


TOPIC_ID = bytes(range(16))
VALID = [
    (KEY, v3()),
    (KEY, v3(metadata="λ-worker".encode())),
    (KEY, v4()),
    (KEY, v4(metadata=b"x" * 126)),  # the longest one-byte varint length
    (KEY, v4(metadata=b"x" * 127)),  # a two-byte length: the reference decoder reads it
    (KEY, v4(tag_section=tags({0: TOPIC_ID}))),  # a topic id
    (KEY, v4(tag_section=tags({0: bytes(16)}))),  # the all-zero topic id (the default)
    (KEY, v4(tag_section=tags({5: b"abc"}))),  # an unknown tag, skipped
    (KEY, legacy(0)),
    (KEY, legacy(1, expire=1_700_086_400_000)),
    (KEY, legacy(1, expire=-1)),
    (KEY, legacy(2, metadata=b"")),
    (KEY, None),  # tombstone
    (i16(0) + KEY[2:], legacy(0)),  # type 0 (Kafka 0.8.2)
    (i16(1) + string("") + string("") + i32(0), v3()),  # empty group and topic
    (i16(1) + string("grüße") + string("t") + i32(-1), v3(offset=-1, epoch=-1)),
]
DAMAGED = [
    (KEY[:-1], v3()),  # key one byte short
    (KEY + b"\x00", v3()),  # trailing key byte
    (i16(1) + i16(-1) + KEY[4:], v3()),  # negative group length
    (i16(1) + i16(200) + KEY[4:], v3()),  # group length past the end
    (i16(1) + i16(2) + b"\xc3\x28" + string("t") + i32(0), v3()),  # invalid UTF-8 group
    (KEY, v3(metadata=b"\xff\xfe")),  # invalid UTF-8 metadata
    (KEY, v3()[:-1]),  # value one byte short
    (KEY, v3() + b"\x00"),  # trailing value byte
    (KEY, v4()[:-1]),  # v4 without its tag section
    (KEY, v4(tag_section=b"\x01\x00\x10" + TOPIC_ID[:8])),  # a cut topic id
    (KEY, i16(4) + i64(1) + i32(0) + b"\x00" + i64(0) + b"\x00"),  # v4 null metadata
    (KEY, i16(5) + v3()[2:]),  # unknown version
    (KEY, i16(-1) + v3()[2:]),  # negative version
    (KEY, b"\x00"),  # one byte
    (KEY, b""),  # empty value
    (None, v3()),  # no key
    (b"\x00", v3()),  # one-byte key
    (i16(2) + string("g"), v3()),  # a group key with an offset value
    (i16(99) + string("g"), v3()),  # unknown type
    (KEY, struct.pack(">hqih", 3, 1, 1, -1) + i64(0)),  # negative metadata length
]


# Of VALID, the fast path leaves to the reference decoder the two-byte metadata length, the three
# tag sections and the type-0 key; it takes no DAMAGED record.
FAST_PATH_TAKES = {"valid": len(VALID) - 5, "damaged": 0}


@pytest.mark.parametrize("records", [VALID, DAMAGED], ids=["valid", "damaged"])
def test_hand_made_offset_commits_decode_as_the_reference_decodes_them(request, records):
    inputs = [raw_input(index, key, value) for index, (key, value) in enumerate(records)]
    assert taken_by_fast_path(inputs) == FAST_PATH_TAKES[request.node.callspec.id]
    inputs.append(raw_input(len(inputs), KEY, v3(), read_error="batch at position 0: CRC-32C mismatch"))
    inputs.append(raw_input(len(inputs), KEY, v3(), txn_state="aborted", producer_id=4000))
    assert_same_rows(inputs)


def test_batches_of_any_size_and_mix_decode_the_same(real_inputs):
    mixed = real_inputs[:3_000] + [raw_input(10**6 + i, key, value) for i, (key, value) in enumerate(DAMAGED)]
    assert decoder_rows(mixed, batch_size=7) == decoder_rows(mixed, batch_size=10_000) == reference_rows(mixed)
