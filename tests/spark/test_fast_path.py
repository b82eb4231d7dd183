"""The decoder's fast path (jvm/decoder, in the JVM) decodes offset commits exactly as the reference
decoder does.

The reference is the declarative decoder (schemas/ layouts read by transforms.decoder.layout_reader, rows by
transforms.decoder.decode_rows). The silver decoder (common offset commits by the fast path, the rest by the
reference) runs over every real record the project holds (lab captures from Kafka 3.9.2 to 4.4.0,
public fixtures, a generator sample) and over hand-made and damaged offset commits; each decoded row
must equal the reference decoder's, column for column.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from pyspark.errors import IllegalArgumentException
from pyspark.sql.types import StructType

from bench.encoding import i16, i32, i64, string, tags, uvarint
from bench.generate import main as generate
from jobs.segment_files import read_paths
from schemas.bronze import raw_records_schema
from schemas.coordinator_records import OFFSET_COMMIT_VALUE
from schemas.layouts import VersionRange
from tests.conftest import PUBLIC_FIXTURES, REPO_ROOT
from tests.generated_sample import SAMPLE_ARGS
from transforms import silver
from transforms.decoder.decode_rows import decode_raw_row

DECODED_ARROW = silver.to_arrow_schema(silver.decoded_schema)
KEY = i16(1) + string("orders-app") + string("orders") + i32(7)
AT_MS = 1_793_577_600_000


def raw_row(index: int, key: bytes | None, value: bytes | None, **extra) -> dict:
    """A bronze row (the columns the decoder reads), record_at in epoch ms."""
    return {
        "cluster": "c",
        "record_id": f"c/3/{index}",
        "source_partition": 3,
        "source_offset": index,
        "record_at_ms": AT_MS + index,
        "key": key,
        "value": value,
        "txn_state": extra.get("txn_state"),
        "producer_id": extra.get("producer_id", -1),
        "read_error": extra.get("read_error"),
        "source_file": "/logs/__consumer_offsets-3/00000000000000000000.log",
        "capture_run_id": "run-1",
    }


def bronze(spark, rows: list[dict]):
    def as_bronze(row: dict) -> dict:
        at = datetime.fromtimestamp(row["record_at_ms"] / 1000, UTC)
        return {**{field.name: None for field in raw_records_schema.fields}, **row, "record_at": at,
                "source_kind": "segment"}  # fmt: skip

    return spark.createDataFrame(
        [tuple(as_bronze(row)[field.name] for field in raw_records_schema.fields) for row in rows], raw_records_schema
    )


def reference_rows(rows: list[dict]) -> dict[str, dict]:
    decoded = []
    for row in rows:
        raw = {**row, "record_at": row["record_at_ms"]}
        del raw["record_at_ms"]
        decoded.append(decode_raw_row(raw))
    normalised = pa.RecordBatch.from_pylist(decoded, schema=DECODED_ARROW).to_pylist()
    return {row["record_id"]: row for row in normalised}


def _plain(value: object) -> object:
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def silver_rows(spark, rows: list[dict]) -> dict[str, dict]:
    decoded = silver.decode_raw_records(bronze(spark, rows)).collect()
    assert len(decoded) == len(rows)
    return {row.record_id: _plain(row.asDict(recursive=True)) for row in decoded}


def assert_same_rows(spark, rows: list[dict]) -> None:
    expected, actual = reference_rows(rows), silver_rows(spark, rows)
    assert actual.keys() == expected.keys()
    differ = [(key, actual[key], expected[key]) for key in expected if actual[key] != expected[key]]
    assert not differ, f"{len(differ)} of {len(expected)} rows differ; first: {differ[0]}"


def taken_by_the_fast_path(spark, rows: list[dict]) -> int:
    return silver.decode_common_offset_commits(bronze(spark, rows)).count()


def rows_from(paths: list) -> list[dict]:
    rows = []
    for index, record in enumerate(read_paths([str(path) for path in paths])):
        # As bronze holds them: bytes that never framed as a record are in `value`, with the read error.
        extra = {"txn_state": record.txn_state, "producer_id": record.producer_id, "read_error": record.error}
        rows.append(raw_row(index, record.key, record.raw if record.error else record.value, **extra))
    return rows


@pytest.fixture(scope="module")
def real_rows(tmp_path_factory) -> list[dict]:
    sample = tmp_path_factory.mktemp("sample") / "generated"
    generate([str(sample), *SAMPLE_ARGS])
    captures = sorted((REPO_ROOT / "tests" / "captures").glob("kafka-*/*/segments"))
    return rows_from([*captures, PUBLIC_FIXTURES, sample / "segments"])


def test_every_real_record_decodes_as_the_reference_decodes_it(spark, real_rows):
    assert_same_rows(spark, real_rows)


def test_the_fast_path_takes_the_real_offset_commits_but_pending_ones(spark, real_rows):
    """A pending transaction's commits go with the others: the decode job writes those in a file apart,
    which the marker that resolves them rewrites on a later night."""
    commits = [row for row in real_rows if row["key"] and row["key"][:2] == b"\x00\x01"]
    pending = [row for row in commits if row["txn_state"] == "pending"]
    assert len(commits) > 5_000 and pending
    assert taken_by_the_fast_path(spark, commits) == len(commits) - len(pending)
    assert taken_by_the_fast_path(spark, pending) == 0
    others = [row for row in real_rows if row["key"] and row["key"][:2] != b"\x00\x01"]
    assert taken_by_the_fast_path(spark, others) == 0


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
    (KEY, v4(tag_section=tags({0: TOPIC_ID, 5: b"abc"}))),  # a topic id and an unknown tag
    (KEY, legacy(0)),
    (KEY, legacy(1, expire=1_700_086_400_000)),
    (KEY, legacy(1, expire=-1)),
    (KEY, legacy(2, metadata=b"")),
    (KEY, None),  # tombstone
    (i16(0) + KEY[2:], legacy(0)),  # type 0 (Kafka 0.8.2)
    (i16(1) + string("") + string("") + i32(0), v3()),  # empty group and topic
    (i16(1) + string("grüße") + string("t") + i32(-1), v3(offset=-1, epoch=-1)),
    (i16(1) + string("g") + string("🛒-orders") + i32(0), v3()),  # a four-byte UTF-8 character
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
    (KEY, v4(tag_section=tags({0: TOPIC_ID}) + b"\x00")),  # a byte after the topic id
    (KEY, v4(tag_section=b"\x01\x00\x08" + TOPIC_ID[:8])),  # a topic id of 8 bytes
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
    (KEY, i16(0) + i64(1)),  # v0 cut before its metadata length
    (KEY, i16(3) + i64(1) + i32(0)),  # v3 cut before its metadata length
    (KEY, i16(4) + i64(1) + i32(0)),  # v4 cut before its metadata length
    (i16(1) + i16(3) + b"\xed\xa0\x80" + string("t") + i32(0), v3()),  # a UTF-8-encoded surrogate
    (i16(1) + i16(2) + b"\xc0\x80" + string("t") + i32(0), v3()),  # an overlong NUL
    (i16(1) + i16(1) + b"\xe2" + string("t") + i32(0), v3()),  # a cut multi-byte character
]


# Of VALID, the fast path leaves to the reference decoder the two-byte metadata length, the two tag
# sections with an unknown tag and the type-0 key; it takes the topic ids (Java clients committing by
# id write one) and no DAMAGED record.
TAKEN = {"valid": len(VALID) - 4, "damaged": 0}


@pytest.mark.parametrize("records", [VALID, DAMAGED], ids=["valid", "damaged"])
def test_hand_made_offset_commits_decode_as_the_reference_decodes_them(spark, request, records):
    rows = [raw_row(index, key, value) for index, (key, value) in enumerate(records)]
    assert taken_by_the_fast_path(spark, rows) == TAKEN[request.node.callspec.id]
    rows.append(raw_row(len(rows), KEY, v3(), read_error="batch at position 0: CRC-32C mismatch"))
    rows.append(raw_row(len(rows), KEY, v3(), txn_state="aborted", producer_id=4000))
    assert_same_rows(spark, rows)


# --- The Java class and the Python declarations change together --------------------------------------

FAST_PATH = OFFSET_COMMIT_VALUE.fast_path
# One well-formed value per OffsetCommitValue version: a version claimed for the fast path needs one here.
VALUE_OF_VERSION = {0: legacy(0), 1: legacy(1, expire=-1), 2: legacy(2), 3: v3(), 4: v4()}


def register_as(spark, name: str, return_type: StructType, versions: str) -> None:
    java_class = spark._jvm.groupscope.CommonOffsetCommits
    java_class.register(spark._jsparkSession, name, return_type.json(), versions)


def test_the_session_registers_the_class_the_offset_commit_declaration_names(spark):
    assert FAST_PATH.java_class == "groupscope.CommonOffsetCommits"
    assert spark.catalog.functionExists(silver.FAST_PATH_FUNCTION)


def test_the_java_class_refuses_columns_other_than_those_silver_expects(spark):
    names = silver.COMMON_OFFSET_COMMIT_COLUMNS
    swapped = StructType([silver.FAST_PATH_TYPE[name] for name in (names[1], names[0], *names[2:])])
    with pytest.raises(IllegalArgumentException, match="returns the columns"):
        register_as(spark, "groupscope_test_swapped", swapped, FAST_PATH.versions)
    with pytest.raises(IllegalArgumentException, match="returns the columns"):
        register_as(spark, "groupscope_test_short", StructType(silver.FAST_PATH_TYPE.fields[:-1]), FAST_PATH.versions)


def test_the_java_class_refuses_versions_other_than_those_the_declaration_claims(spark):
    with pytest.raises(IllegalArgumentException, match="the declaration's fast path claims 0-5"):
        register_as(spark, "groupscope_test_versions", silver.FAST_PATH_TYPE, "0-5")


def test_the_fast_path_decodes_exactly_the_versions_the_declaration_claims(spark):
    claimed = VersionRange.parse(FAST_PATH.versions)
    assert claimed.high is not None and claimed.high in VersionRange.parse(OFFSET_COMMIT_VALUE.valid_versions)
    versions = range(claimed.high + 2)  # and the next one, laid out as the highest
    assert [version for version in versions if version in claimed and version not in VALUE_OF_VERSION] == []
    values = {version: VALUE_OF_VERSION.get(version, i16(version) + v4()[2:]) for version in versions}
    rows = [raw_row(version, KEY, value) for version, value in values.items()]
    taken = {row.value_version for row in silver.decode_common_offset_commits(bronze(spark, rows)).collect()}
    assert taken == {version for version in versions if version in claimed}
