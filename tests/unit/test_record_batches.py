"""The log-segment reader: byte-exact batches of every magic and codec, transactions, and bad bytes.

Batches come from the worked examples of kafka-record-formats.md section 12.7, from the test-only
encoder in tests/batch_builder.py, and from the real segments in the public fixtures (checked
against kafka-python's independent decoder where it is installed). No Spark; milliseconds.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import struct
from pathlib import Path

import cramjam
import pytest

from bench import batch_builder as bb
from bench.batch_builder import Rec
from jobs.segment_files import read_partition_files, read_paths
from tests.conftest import PUBLIC_FIXTURES
from transforms.bronze import raw_batch
from transforms.decoder.compression import decompress
from transforms.decoder.errors import CorruptRecordError
from transforms.decoder.record_batches import LogRecord, partition_from_path, read_segment_bytes, topic_from_path

h = bytes.fromhex

# Section 12.7: OffsetCommitKey (group my-group, topic orders, partition 3) + OffsetCommitValue v3.
KEY = h("000100086d792d67726f757000066f726465727300000003")
VALUE = h("0003000000000000002a0000000500000000018bcfe56800")
DATA_BATCH = h(
    "00000000000000640000006800000007020a99b9f40000000000000000018bcfe568000000018bcfe56800ffffffffffffffff"
    "ffffffffffff000000016c00000030000100086d792d67726f757000066f726465727300000003300003000000000000002a00"
    "00000500000000018bcfe5680000"
)
TOMBSTONE_BATCH = h(
    "00000000000000660000005000000007020d4c82850000000000000000018bcfe56be80000018bcfe56be8ffffffffffffffff"
    "ffffffffffff000000013c00000030000100086d792d67726f757000066f7264657273000000030100"
)
COMMIT_BATCH = h(
    "0000000000000065000000420000000702e98356b30030000000000000018bcfe569f40000018bcfe569f40000000000000fa0"
    "0000ffffffff000000012000000008000000010c00000000000700"
)
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def good(items: list[LogRecord]) -> list[LogRecord]:
    return [item for item in items if item.error is None]


def errors(items: list[LogRecord]) -> list[LogRecord]:
    return [item for item in items if item.error is not None]


def expected(offset: int, key: bytes | None, value: bytes | None, **fields) -> LogRecord:
    """A good record with the defaults of an uncompressed, non-transactional v2 batch at position 0."""
    defaults = dict(
        partition=None,
        timestamp_ms=bb.TIMESTAMP_MS,
        timestamp_type="create_time",
        producer_id=-1,
        producer_epoch=-1,
        is_transactional=False,
        txn_state=None,
        batch_base_offset=offset,
        batch_position=0,
        magic=2,
        compression="none",
        source_file=None,
        error=None,
        raw=None,
    )
    return LogRecord(offset=offset, key=key, value=value, **{**defaults, **fields})


# --- Section 12.7, byte-exact --------------------------------------------------------------------


def test_worked_examples_decode_field_by_field_at_their_positions():
    segment = DATA_BATCH + COMMIT_BATCH + TOMBSTONE_BATCH
    items = list(read_segment_bytes(segment, partition=3, source_file="seg.log"))
    common = dict(partition=3, source_file="seg.log")
    assert items == [
        expected(100, KEY, VALUE, **common),
        expected(102, KEY, None, timestamp_ms=0x18BCFE56BE8, batch_position=116 + 78, **common),
    ]
    assert (len(DATA_BATCH), len(COMMIT_BATCH), len(TOMBSTONE_BATCH)) == (116, 78, 92)


def test_builder_reproduces_the_worked_examples_byte_for_byte():
    assert bb.batch_v2(100, [Rec(KEY, VALUE)], partition_leader_epoch=7) == DATA_BATCH
    assert bb.batch_v2(102, [Rec(KEY, None)], base_timestamp=0x18BCFE56BE8, partition_leader_epoch=7) == TOMBSTONE_BATCH
    commit = bb.control_batch(101, 4000, 0, coordinator_epoch=7, base_timestamp=0x18BCFE569F4, partition_leader_epoch=7)
    assert commit == COMMIT_BATCH


def test_commit_marker_alone_yields_nothing():
    assert list(read_segment_bytes(COMMIT_BATCH)) == []


def test_records_are_ordinary_frozen_log_records():
    (record,) = read_segment_bytes(DATA_BATCH)
    assert type(record) is LogRecord
    assert record == expected(100, KEY, VALUE) and hash(record) == hash(expected(100, KEY, VALUE))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.offset = 1  # type: ignore[misc]
    assert dataclasses.replace(record, txn_state="committed").txn_state == "committed"


# --- RecordBatch v2 -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_v2_every_codec(codec):
    records = [
        Rec(b"k0", b"v0"),
        Rec(b"k1", None, timestamp_delta=5),
        Rec(None, b"v2" * 40, timestamp_delta=-3, headers=((b"h", b"x"), (b"n", None))),
    ]
    batch = bb.batch_v2(40, records, codec=codec)
    items = list(read_segment_bytes(batch, partition=1))
    common = dict(partition=1, batch_base_offset=40, compression=codec, timestamp_ms=bb.TIMESTAMP_MS)
    assert items == [
        expected(40, b"k0", b"v0", **common),
        expected(41, b"k1", None, **{**common, "timestamp_ms": bb.TIMESTAMP_MS + 5}),
        expected(42, None, b"v2" * 40, **{**common, "timestamp_ms": bb.TIMESTAMP_MS - 3}),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_v2_large_batch_spans_several_codec_blocks(codec):
    # 2,000 records of ~100 bytes: over xerial's 32 KB and lz4's 64 KB blocks; varints of 2-3 bytes.
    records = [Rec(b"key-%05d" % i, bytes([i % 251]) * (i % 200), timestamp_delta=i * 1000) for i in range(2000)]
    items = list(read_segment_bytes(bb.batch_v2(7, records, codec=codec)))
    assert [(item.offset, item.key, item.value, item.timestamp_ms) for item in items] == [
        (7 + i, rec.key, rec.value, bb.TIMESTAMP_MS + rec.timestamp_delta) for i, rec in enumerate(records)
    ]


def test_v2_snappy_without_xerial_framing_is_one_raw_block():
    batch = bb.batch_v2(0, [Rec(b"k", b"v" * 300)], codec="snappy", snappy_xerial=False)
    assert [item.value for item in read_segment_bytes(batch)] == [b"v" * 300]


def test_v2_log_append_time_gives_every_record_the_max_timestamp():
    records = [Rec(b"a", b"1", timestamp_delta=0), Rec(b"b", b"2", timestamp_delta=9)]
    batch = bb.batch_v2(0, records, is_log_append_time=True, max_timestamp=bb.TIMESTAMP_MS + 60_000)
    items = list(read_segment_bytes(batch))
    assert {(item.timestamp_ms, item.timestamp_type) for item in items} == {
        (bb.TIMESTAMP_MS + 60_000, "log_append_time")
    }


def test_v2_delete_horizon_keeps_record_timestamps_relative_to_the_base():
    batch = bb.batch_v2(0, [Rec(b"a", None, timestamp_delta=250)], has_delete_horizon=True)
    assert [item.timestamp_ms for item in read_segment_bytes(batch)] == [bb.TIMESTAMP_MS + 250]


def test_v2_empty_batch_yields_nothing_and_the_next_batch_still_reads():
    segment = bb.batch_v2(10, []) + bb.batch_v2(11, [Rec(b"k", b"v")])
    assert [(item.offset, item.batch_position) for item in read_segment_bytes(segment)] == [(11, 61)]
    assert list(read_segment_bytes(b"")) == []


def test_v2_offsets_after_compaction_need_not_be_contiguous():
    records = [Rec(b"a", b"1", offset_delta=0), Rec(b"b", b"2", offset_delta=3), Rec(b"c", None, offset_delta=7)]
    assert [item.offset for item in read_segment_bytes(bb.batch_v2(500, records))] == [500, 503, 507]


def test_v2_control_batches_of_other_types_are_not_records():
    leader_change = bb.control_batch(5, 42, control_type=2)
    segment = leader_change + bb.batch_v2(6, [Rec(b"k", b"v")])
    assert [item.offset for item in read_segment_bytes(segment)] == [6]


# --- Legacy message sets, magic 0 and 1 ----------------------------------------------------------


def test_legacy_uncompressed_v0_and_v1():
    messages = [
        bb.message(0, b"k0", b"v0", magic=0),
        bb.message(1, b"k1", None, magic=1, timestamp=bb.TIMESTAMP_MS + 1),
        bb.message(2, None, b"v2", magic=1, is_log_append_time=True, timestamp=bb.TIMESTAMP_MS + 2),
    ]
    assert [len(message) for message in messages] == [12 + 18, 12 + 24, 12 + 24]
    assert list(read_segment_bytes(b"".join(messages))) == [
        expected(0, b"k0", b"v0", magic=0, timestamp_ms=None, timestamp_type=None),
        expected(1, b"k1", None, magic=1, timestamp_ms=bb.TIMESTAMP_MS + 1, batch_position=30),
        expected(2, None, b"v2", magic=1, timestamp_ms=bb.TIMESTAMP_MS + 2, timestamp_type="log_append_time",
                 batch_position=30 + 36),
    ]  # fmt: skip


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_compressed_wrappers(codec, magic):
    inner = [(b"k0", b"v0", bb.TIMESTAMP_MS + 10), (b"k1", None, bb.TIMESTAMP_MS + 20), (None, b"v2" * 50, 0)]
    before = bb.message(99, b"before", b"x", magic=magic)
    segment = before + bb.wrapper(100, inner, magic=magic, codec=codec)
    items = list(read_segment_bytes(segment))
    assert [(item.offset, item.key, item.value) for item in items] == [
        (99, b"before", b"x"),
        (100, b"k0", b"v0"),
        (101, b"k1", None),
        (102, None, b"v2" * 50),
    ]
    wrapped = items[1:]
    assert {(item.compression, item.magic, item.batch_base_offset, item.batch_position) for item in wrapped} == {
        (codec, magic, 100, len(before))
    }
    timestamps = [item.timestamp_ms for item in wrapped]
    assert timestamps == ([None] * 3 if magic == 0 else [bb.TIMESTAMP_MS + 10, bb.TIMESTAMP_MS + 20, 0])


def test_legacy_v1_inner_offsets_are_relative_to_the_wrapper():
    inner_set = b"".join(bb.message(relative, b"k", b"%d" % relative, magic=1) for relative in (0, 1, 2))
    wrapper = bb.message(1002, None, bb.compress("gzip", inner_set), magic=1, codec="gzip")
    assert [item.offset for item in read_segment_bytes(wrapper)] == [1000, 1001, 1002]


def test_legacy_v0_inner_offsets_are_absolute():
    inner_set = b"".join(bb.message(absolute, b"k", b"v", magic=0) for absolute in (500, 501, 503))
    wrapper = bb.message(503, None, bb.compress("gzip", inner_set), magic=0, codec="gzip")
    assert [item.offset for item in read_segment_bytes(wrapper)] == [500, 501, 503]


def test_legacy_v1_wrapper_offset_zero_from_librdkafka_keeps_inner_offsets():
    wrapper = bb.wrapper(0, [(b"a", b"1", 0), (b"b", b"2", 0)], magic=1, codec="gzip", wrapper_offset=0)
    assert [item.offset for item in read_segment_bytes(wrapper)] == [0, 1]


def test_legacy_log_append_time_wrapper_overrides_inner_timestamps():
    inner = [(b"a", b"1", 111), (b"b", b"2", 222)]
    wrapper = bb.wrapper(0, inner, magic=1, codec="snappy", timestamp=bb.TIMESTAMP_MS + 7, is_log_append_time=True)
    assert [(item.timestamp_ms, item.timestamp_type) for item in read_segment_bytes(wrapper)] == [
        (bb.TIMESTAMP_MS + 7, "log_append_time")
    ] * 2


def test_lz4_frames_with_kafkas_magic_v0_header_checksum_still_decompress():
    payload = b"consumer offsets " * 50
    broken = bb.kafka_lz4_frame(payload, broken_checksum=True)
    correct = bb.kafka_lz4_frame(payload)
    assert broken != correct and broken[:6] == correct[:6] and broken[7:] == correct[7:]
    with pytest.raises(cramjam.DecompressionError, match="headerChecksum"):
        cramjam.lz4.decompress(broken)  # why the repair exists: cramjam alone refuses Kafka's v0 frames
    assert bytes(cramjam.lz4.decompress(correct)) == payload  # and the builder's own checksum is right
    assert decompress(3, broken) == decompress(3, correct) == payload


def test_lz4_frame_with_any_other_bad_header_checksum_is_corrupt():
    frame = bytearray(bb.kafka_lz4_frame(b"abc" * 10))
    frame[6] ^= 0x5A
    with pytest.raises(CorruptRecordError, match="lz4 payload of"):
        decompress(3, bytes(frame))


# --- Transactions ---------------------------------------------------------------------------------


def txn_batch(offset: int, producer_id: int, key: bytes) -> bytes:
    return bb.batch_v2(
        offset, [Rec(key, b"v")], is_transactional=True, producer_id=producer_id, producer_epoch=1, base_sequence=0
    )


def write_partition(directory: Path, segments: dict[int, bytes]) -> list[Path]:
    directory.mkdir(parents=True)
    files = []
    for base_offset, data in segments.items():
        files.append(directory / f"{base_offset:020d}.log")
        files[-1].write_bytes(data)
    return files


def test_transactions_resolve_across_two_segments_of_one_partition(tmp_path):
    first = (
        txn_batch(0, 7, b"p7-a")
        + txn_batch(1, 7, b"p7-b")
        + bb.batch_v2(2, [Rec(b"plain", b"v")])
        + txn_batch(3, 8, b"p8")
        + txn_batch(4, 9, b"p9")
    )
    second = (
        bb.control_batch(5, 7, 1, control_type=bb.COMMIT)
        + bb.control_batch(6, 8, 1, control_type=bb.ABORT)
        + txn_batch(7, 7, b"p7-again")
        + bb.batch_v2(8, [Rec(b"plain-2", b"v")])
    )
    files = write_partition(tmp_path / "__consumer_offsets-12", {0: first, 5: second})
    items = list(read_partition_files(list(reversed(files))))  # the reader orders segments by base offset
    assert [(item.offset, item.key, item.txn_state, item.partition) for item in items] == [
        (0, b"p7-a", "committed", 12),
        (1, b"p7-b", "committed", 12),
        (2, b"plain", None, 12),
        (3, b"p8", "aborted", 12),
        (4, b"p9", "pending", 12),  # no marker by the end of the partition
        (7, b"p7-again", "pending", 12),  # a new transaction of producer 7, after its COMMIT
        (8, b"plain-2", None, 12),
    ]
    assert {item.source_file for item in items[:5]} == {str(files[0])}
    assert [item.is_transactional for item in items] == [True, True, False, True, True, True, False]
    # One segment alone knows no markers of the other.
    assert {item.txn_state for item in read_segment_bytes(first) if item.is_transactional} == {"pending"}


def test_a_marker_behind_an_open_transaction_is_still_applied_at_the_end():
    segment = txn_batch(0, 1, b"open") + txn_batch(1, 2, b"closed") + bb.control_batch(2, 2, 1)
    assert [(item.offset, item.txn_state) for item in read_segment_bytes(segment)] == [
        (0, "pending"),
        (1, "committed"),
    ]


# --- Corrupt bytes --------------------------------------------------------------------------------


def mixed_segment() -> tuple[bytes, list[int]]:
    """Batches of every kind with their start positions (and the end as the last entry)."""
    batches = [
        DATA_BATCH,
        txn_batch(101, 4000, b"txn"),
        bb.control_batch(102, 4000, 0),
        bb.batch_v2(103, [Rec(b"z", b"zstd" * 20), Rec(b"y", None)], codec="zstd"),
        bb.message(105, b"legacy", b"v1", magic=1),
        bb.wrapper(106, [(b"a", b"1", 0), (b"b", b"2", 0)], magic=0, codec="lz4"),
        TOMBSTONE_BATCH,
    ]
    starts = [0]
    for batch in batches:
        starts.append(starts[-1] + len(batch))
    return b"".join(batches), starts


def assert_bytes_accounted_for(data: bytes, items: list[LogRecord]) -> None:
    """Walking the input batch by batch, every byte is in a batch that was read or in an error item's raw."""
    errors_at = {item.batch_position: item.raw for item in errors(items)}
    visited, pos = set(), 0
    while pos < len(data):
        visited.add(pos)
        if pos in errors_at:
            assert data[pos : pos + len(errors_at[pos])] == errors_at[pos]
            pos += len(errors_at[pos])
        else:  # a batch that read (records, markers or nothing): its length field is sound
            pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    assert pos == len(data)
    assert {item.batch_position for item in items} <= visited


def identities(items: list[LogRecord]) -> list[tuple]:
    return [(item.batch_position, item.offset, item.key, item.value) for item in items]


def test_truncation_at_every_byte_never_raises_and_keeps_every_batch_before_the_cut():
    segment, starts = mixed_segment()
    whole = list(read_segment_bytes(segment))
    assert not errors(whole) and len(whole) == 8
    for cut in range(len(segment) + 1):
        items = list(read_segment_bytes(segment[:cut]))
        boundary = max(start for start in starts if start <= cut)
        assert identities(good(items)) == identities([item for item in whole if item.batch_position < boundary]), cut
        if cut == boundary:
            assert not errors(items), cut
        else:
            (error,) = errors(items)
            assert (error.batch_position, error.raw) == (boundary, segment[boundary:cut]), cut
            assert error.error.startswith(f"batch at position {boundary}")
            assert "unreadable from here" in error.error  # a cut batch cannot be framed: the rest of the file
        assert_bytes_accounted_for(segment[:cut], items)


def test_a_bit_flip_anywhere_loses_at_most_its_own_batch():
    segment, starts = mixed_segment()
    whole = list(read_segment_bytes(segment))
    for bit in range(len(segment) * 8):
        flipped = bytearray(segment)
        flipped[bit // 8] ^= 1 << (bit % 8)
        items = list(read_segment_bytes(bytes(flipped)))
        index = max(i for i, s in enumerate(starts[:-1]) if s <= bit // 8)
        start, end = starts[index], starts[index + 1]
        # Every other batch, before and after, reads as in the undamaged file: a flipped length or
        # magic (outside every checksum) costs only its own batch.
        others = [item for item in items if item.batch_position != start]
        assert identities(others) == identities([item for item in whole if item.batch_position != start]), bit
        # Outside the checksum: offset and length (framing), and v2's partitionLeaderEpoch. A wrong
        # length is still caught: the checksum is then computed over the wrong bytes.
        at = bit // 8 - start
        if at >= (16 if segment[start + 16] == 2 else 12) or 8 <= at < 12:
            assert start not in {item.batch_position for item in good(items)}, bit
            assert [(item.batch_position, item.raw) for item in errors(items)] == [(start, flipped[start:end])], bit
        else:
            assert errors(items) == [], bit
        assert_bytes_accounted_for(bytes(flipped), items)


def test_a_bad_crc_is_one_error_item_holding_the_batch_and_neighbours_still_read():
    corrupt = bytearray(DATA_BATCH)
    corrupt[-3] ^= 0x01
    segment = TOMBSTONE_BATCH + bytes(corrupt) + COMMIT_BATCH + bb.batch_v2(200, [Rec(b"after", b"v")])
    items = list(read_segment_bytes(segment, source_file="f.log"))
    assert [item.offset for item in good(items)] == [102, 200]
    (error,) = errors(items)
    assert error.raw == bytes(corrupt) and error.batch_position == len(TOMBSTONE_BATCH)
    assert re.fullmatch(
        r"batch at position 92 \(base offset 100, magic 2\): "
        r"CRC-32C mismatch: stored 0x0a99b9f4, computed 0x[0-9a-f]{8}",
        error.error,
    )
    assert (error.offset, error.source_file, error.key, error.value) == (100, "f.log", None, None)


@pytest.mark.parametrize(
    ("length", "reason"),
    [
        (0x7FFFFFFF, "batchLength 2147483647 runs past the 220 bytes left"),
        (-1, "batchLength -1 is below the minimum 49"),
        (10, "batchLength 10 is below the minimum 49"),
        (110, "CRC-32C mismatch: stored 0x0a99b9f4, computed 0x528e3902"),  # within the file: 6 bytes too long
    ],
)
def test_an_absurd_batch_length_is_one_fragment_and_the_next_batch_still_reads(length, reason):
    bad = bytearray(DATA_BATCH)
    bad[8:12] = struct.pack(">i", length)
    segment = TOMBSTONE_BATCH + bytes(bad) + DATA_BATCH
    items = list(read_segment_bytes(segment))
    assert [item.offset for item in good(items)] == [102, 100]
    (error,) = errors(items)
    assert error.raw == bytes(bad) and error.batch_position == len(TOMBSTONE_BATCH)
    assert error.error == (
        f"batch at position 92 (base offset 100, magic 2): {reason}; reading resumes at the next batch whose"
        " checksum holds, at position 208: bytes 92 to 208 (116 bytes) are kept as one unreadable fragment"
    )


def test_an_absurd_batch_length_with_nothing_sound_after_it_keeps_the_rest_of_the_file():
    bad = bytearray(DATA_BATCH)
    bad[8:12] = struct.pack(">i", 10)
    bad[-1] ^= 1  # the batch after it is damaged too: nothing sound is left to resynchronise on
    segment = TOMBSTONE_BATCH + bytes(bad) + bytes(bad)
    items = list(read_segment_bytes(segment))
    assert [item.offset for item in good(items)] == [102]
    (error,) = errors(items)
    assert error.raw == segment[len(TOMBSTONE_BATCH) :]
    assert error.error.endswith(": unreadable from here; the rest of the file, bytes 92 to 324 (232 bytes), is kept")


def test_unknown_magic_is_one_error_item_and_reading_goes_on():
    segment = bb.frame_v2(0, b"", 0, magic=3) + DATA_BATCH
    items = list(read_segment_bytes(segment))
    assert [item.offset for item in good(items)] == [100]
    (error,) = errors(items)
    assert "unknown magic" in error.error and error.magic == 3 and len(error.raw) == 61


@pytest.mark.parametrize(
    ("attributes", "body", "reason"),
    [
        (1, b"\x1f\x8b not really gzip", "gzip payload of 18 bytes does not decompress"),
        (2, b"\xff\xff\xff\xff\x0f garbage", "snappy payload"),
        (2, b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", 500) + b"short", "xerial snappy"),
        (3, b"\x04\x22\x4d\x18\x60\x40\x82 garbage", "lz4 payload"),
        (4, b"\x28\xb5\x2f\xfd garbage", "zstd payload"),
        (5, b"", "unknown compression codec 5"),
        (7, b"", "unknown compression codec 7"),
    ],
)
def test_broken_compressed_payloads_are_error_items(attributes, body, reason):
    segment = bb.frame_v2(0, body, 1, attributes=attributes) + DATA_BATCH
    items = list(read_segment_bytes(segment))
    assert [item.offset for item in good(items)] == [100]
    (error,) = errors(items)
    assert reason in error.error and error.raw == segment[: -len(DATA_BATCH)]


@pytest.mark.parametrize(
    ("body", "count", "reason"),
    [
        (bb.record_v2(Rec(b"k", b"v"), 0), 2, "runs past the end of its batch"),
        (bb.record_v2(Rec(b"k", b"v"), 0), 0, "bytes left over after the 0 records"),
        (b"\x40" + bb.record_v2(Rec(b"k", b"v"), 0)[1:], 1, "length 32 runs past the batch's end"),
        (b"\x0e" + bb.record_v2(Rec(b"k", b"v"), 0)[1:], 1, "fields end at byte 70, its length says 69"),
        (b"\xff" * 12, 1, "longer than 10 bytes"),
        (bb.record_v2(Rec(b"k", b"v"), 0), -1, "recordsCount is -1"),
    ],
)
def test_records_that_do_not_fit_their_batch_are_error_items(body, count, reason):
    items = list(read_segment_bytes(bb.frame_v2(0, body, count)))
    (error,) = items
    assert reason in error.error, error.error


def test_control_record_without_a_type_is_an_error_item():
    batch = bb.batch_v2(0, [Rec(b"\x00", None)], is_control=True, is_transactional=True, producer_id=1)
    (error,) = read_segment_bytes(batch)
    assert "control record key" in error.error


@pytest.mark.parametrize(
    ("wrapper", "reason"),
    [
        (bb.message(5, None, b"not gzip at all", magic=1, codec="gzip"), "gzip payload"),
        (bb.message(5, None, bb.compress("gzip", b""), magic=1, codec="gzip"), "holds no messages"),
        (bb.message(5, None, None, magic=1, codec="gzip"), "without a value"),
        (bb.message(5, None, b"zstd?", magic=1, codec="zstd"), "codec 4 in a magic 1 message"),
        (
            bb.message(5, None, bb.compress("gzip", bb.message(0, b"k", b"v", magic=0)), magic=1, codec="gzip"),
            "has magic 0, its wrapper 1",
        ),
        (
            bb.message(5, None, bb.compress("gzip", bb.wrapper(0, [(b"k", b"v", 0)], magic=1, codec="gzip")),
                       magic=1, codec="gzip"),
            "is itself compressed",
        ),
        (
            bb.message(5, None, bb.compress("gzip", bb.message(0, b"k", b"v", magic=1)[:-1] + b"w"), magic=1,
                       codec="gzip"),
            "CRC-32 mismatch",
        ),
        (bb.message(5, None, bb.compress("gzip", b"\x00" * 20), magic=1, codec="gzip"), "inner message"),
    ],
)  # fmt: skip
def test_broken_legacy_wrappers_are_error_items(wrapper, reason):
    segment = wrapper + bb.message(6, b"next", b"v", magic=1)
    items = list(read_segment_bytes(segment))
    assert [item.offset for item in good(items)] == [6]
    (error,) = errors(items)
    assert reason in error.error and error.raw == wrapper, error.error


# --- Paths ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "partition"),
    [
        ("/data/kafka/__consumer_offsets-7/00000000000000000000.log", 7),
        ("file:/warehouse/capture/__consumer_offsets-49/00000000000000001234.log", 49),
        ("C:\\kafka\\__consumer_offsets-3\\00000000000000000000.log", 3),
        ("/data/kafka/__consumer_offsets-12", 12),
        ("/data/kafka/__consumer_offsets-12/", 12),
        ("/data/kafka/orders-0/00000000000000000000.log", None),
        ("/data/kafka/__consumer_offsets-x/00000000000000000000.log", None),
        ("/data/__consumer_offsets-3/backup/00000000000000000000.log", None),
        ("00000000000000000000.log", None),
        ("/data/kafka/__share_group_state-7/00000000000000000000.log", 7),
        ("/data/kafka/__share_group_state_copy-7/00000000000000000000.log", None),
    ],
)
def test_partition_from_path(path, partition):
    assert partition_from_path(path) == partition


@pytest.mark.parametrize(
    ("path", "topic"),
    [
        ("/data/kafka/__consumer_offsets-7/00000000000000000000.log", "__consumer_offsets"),
        ("/data/kafka/__share_group_state-7/00000000000000000000.log", "__share_group_state"),
        ("/data/kafka/__share_group_state-7", "__share_group_state"),
        ("/data/kafka/orders-0/00000000000000000000.log", "__consumer_offsets"),  # as groupscope always took it
    ],
)
def test_topic_from_path(path, topic):
    assert topic_from_path(path) == topic


def test_read_paths_takes_partition_directories_files_and_skips_other_topics(tmp_path):
    logs = tmp_path / "kafka-logs"
    write_partition(logs / "__consumer_offsets-2", {0: DATA_BATCH})
    write_partition(logs / "__consumer_offsets-10", {0: TOMBSTONE_BATCH})
    write_partition(logs / "orders-0", {0: bb.batch_v2(0, [Rec(b"order", b"1")])})
    loose = write_partition(tmp_path / "loose", {0: bb.batch_v2(0, [Rec(b"loose", b"1")])})
    items = list(read_paths([logs, str(loose[0])]))
    assert [(item.partition, item.key) for item in items] == [(2, KEY), (10, KEY), (None, b"loose")]
    assert [item.partition for item in read_paths([logs / "__consumer_offsets-10"])] == [10]
    with pytest.raises(FileNotFoundError):
        list(read_paths([tmp_path / "missing"]))


# --- Real segments --------------------------------------------------------------------------------

PARTITION_DIRECTORIES = sorted(
    directory for directory in PUBLIC_FIXTURES.rglob("__consumer_offsets-*") if directory.is_dir()
)


def manifest_segment_files() -> list[Path]:
    """The fixtures' own inventory (MANIFEST.tsv), independent of how the reader finds files."""
    rows = (line.split("\t") for line in (PUBLIC_FIXTURES / "MANIFEST.tsv").read_text().splitlines()[1:])
    return sorted(
        PUBLIC_FIXTURES / path for path, *_ in rows if re.search(r"/__consumer_offsets-\d+/\d{20}\.log$", path)
    )


def test_every_public_fixture_segment_reads_without_errors():
    items = list(read_paths([PUBLIC_FIXTURES]))
    assert items and not errors(items)
    assert {Path(item.source_file) for item in items} == set(manifest_segment_files())
    for item in items:
        assert item.partition == int(Path(item.source_file).parent.name.rsplit("-", 1)[1])
    by_directory: dict[str, list[int]] = {}
    for item in items:
        by_directory.setdefault(str(Path(item.source_file).parent), []).append(item.offset)
    assert len(by_directory) == len(PARTITION_DIRECTORIES)
    for directory, offsets in by_directory.items():
        assert all(a < b for a, b in itertools.pairwise(offsets)), directory
    # Section 13: all fixture batches are magic 2, uncompressed, neither transactional nor control.
    assert {(item.magic, item.compression, item.is_transactional) for item in items} == {(2, "none", False)}


def test_kafkafun_fixture_matches_the_reference_inventory():
    # Section 13, DanielMorales9/kafkafun: 846 batches; 1,521 offset v3, 36 group v3, 8 group tombstones.
    items = list(read_paths([PUBLIC_FIXTURES / "DanielMorales9__kafkafun"]))
    assert len({(item.source_file, item.batch_position) for item in items}) == 846
    kinds: dict[tuple, int] = {}
    for item in items:
        kind = (item.key[:2], None if item.value is None else item.value[:2])
        kinds[kind] = kinds.get(kind, 0) + 1
    assert kinds == {(b"\x00\x01", b"\x00\x03"): 1521, (b"\x00\x02", b"\x00\x03"): 36, (b"\x00\x02", None): 8}


@pytest.mark.parametrize("segment", manifest_segment_files(), ids=lambda path: str(path.relative_to(PUBLIC_FIXTURES)))
def test_public_fixture_segment_equals_kafka_python_decode(segment):
    from kafka.record import memory_records  # kafka-python, installed by scripts/bootstrap.sh (the "lab" extra)

    data = segment.read_bytes()
    theirs, position = [], 0
    for batch in memory_records.MemoryRecords(data):
        assert batch.validate_crc()
        theirs += [(position, record.offset, record.timestamp, record.key, record.value) for record in batch]
        position += batch.size_in_bytes  # a property in kafka-python
    assert position == len(data)
    ours = [
        (item.batch_position, item.offset, item.timestamp_ms, item.key, item.value)
        for item in read_segment_bytes(data, partition=partition_from_path(segment), source_file=str(segment))
    ]
    assert ours == theirs


def test_zero_filled_preallocated_tail_is_not_an_error():
    segment = (
        PUBLIC_FIXTURES
        / "Bheem6005__kafka"
        / "78ab3deb"
        / "kafka-logs"
        / "__consumer_offsets-0"
        / "00000000000000000000.log"
    ).read_bytes()
    clean = list(read_segment_bytes(segment, partition=0))
    padded = list(read_segment_bytes(segment + bytes(4096), partition=0))
    assert padded == clean and all(record.error is None for record in padded)
    damaged = list(read_segment_bytes(segment + bytes(100) + b"\x01", partition=0))
    assert damaged[-1].error is not None  # zeros followed by anything else are still reported


def test_raw_batch_keys_records_by_offset_and_unreadable_bytes_by_file_position():
    segment = "file:/log/__consumer_offsets-3/0.log"
    readable = LogRecord(3, 17, 1_700_000_000_000, "create_time", b"k", b"v", -1, -1, False, None, 16, 0, 2, "none",
                         segment, None, None)  # fmt: skip
    unreadable = LogRecord(3, 20, None, None, None, None, -1, -1, False, None, 20, 4096, 2, None,
                           segment, "batch at position 4096: bad crc", b"\x00\x01")  # fmt: skip
    outside_a_partition = LogRecord(None, 5, 1_700_000_000_001, "create_time", b"k", None, 7, 0, True, "committed", 5,
                                     128, 2, "none", "file:/backup/0.log", None, None)  # fmt: skip
    batch = raw_batch([readable, unreadable, outside_a_partition], "prod", "run-1").to_pydict()
    assert batch["record_id"] == [
        "prod/3/17",
        "prod/file:/log/__consumer_offsets-3/0.log@4096",
        "prod/file:/backup/0.log@128",
    ]
    assert batch["value"] == [b"v", b"\x00\x01", None]
    assert batch["read_error"] == [None, "batch at position 4096: bad crc", None]
    assert batch["source_partition"] == [3, 3, None]
    assert batch["cluster"] == ["prod"] * 3
    assert batch["source_kind"] == ["segment"] * 3
    assert batch["capture_run_id"] == ["run-1"] * 3
    assert batch["txn_state"] == [None, None, "committed"]
    assert raw_batch([], "prod", "run-1").num_rows == 0
