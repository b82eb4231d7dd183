"""Generated corruption of real records: the decoder never raises, and every truncation is caught.

The records are the konsumer_offsets fixtures (real OffsetCommit v3 and GroupMetadata v3 values) plus
a flexible v4 value and a KIP-848 record. Bit flips may still decode (a flipped digit of an offset is
valid bytes: the batch CRC-32C, checked by the segment reader, is what catches those); what must
hold is that decoding returns a result rather than raising, and that a reason accompanies failure.
"""

from __future__ import annotations

import random

import pytest

from tests.conftest import PUBLIC_FIXTURES
from transforms.decoder.coordinator_records import decode_record

FIXTURES = PUBLIC_FIXTURES / "kafkesc__konsumer_offsets" / "52fcd348" / "fixtures" / "tests"
h = bytes.fromhex


def real_records() -> list[tuple[str, bytes, bytes]]:
    records = [
        (f"{path.parent.name}/{path.stem}", path.read_bytes(), path.with_suffix(".payload").read_bytes())
        for path in sorted(FIXTURES.glob("*/*.key"))
    ]
    records.append(
        (
            "offset_v4_topic_id",
            h("000100086d792d67726f757000066f726465727300000003"),
            h("0004000000000000002a00000005010000018bcfe5680001001030a5f1d5f224432d89f635c784af26d7"),
        )
    )
    records.append(
        (
            "current_member_assignment",
            h("00080002636700026d31"),
            h("00000000000500000004000230a5f1d5f224432d89f635c784af26d7030000000000000001000100"),
        )
    )
    return records


RECORDS = real_records()


@pytest.mark.parametrize(("name", "key", "value"), RECORDS, ids=[record[0] for record in RECORDS])
def test_every_truncation_is_an_error_with_a_reason(name, key, value):
    assert decode_record(key, value).error is None
    for length in range(len(value)):
        decoded = decode_record(key, value[:length])
        assert decoded.error and decoded.error_stage == "value", (name, length)
    for length in range(len(key)):
        decoded = decode_record(key[:length], value)
        assert decoded.error and decoded.error_stage == "key", (name, length)


@pytest.mark.parametrize(("name", "key", "value"), RECORDS, ids=[record[0] for record in RECORDS])
def test_every_single_bit_flip_returns_a_result(name, key, value):
    outcomes = {"decoded": 0, "error": 0}
    for blob, is_key in ((key, True), (value, False)):
        for bit in range(len(blob) * 8):
            flipped = bytearray(blob)
            flipped[bit // 8] ^= 1 << (bit % 8)
            decoded = decode_record(bytes(flipped), value) if is_key else decode_record(key, bytes(flipped))
            if decoded.error is None:
                assert decoded.value is not None or decoded.is_tombstone
                outcomes["decoded"] += 1
            else:
                assert decoded.error_stage in ("key", "value") and len(decoded.error) > 10
                outcomes["error"] += 1
    assert outcomes["error"] > 0, "no flip was detected at all: the decoder is not checking lengths"


def test_random_garbage_never_raises():
    generator = random.Random(20261122)  # fixed seed: a failure is reproducible
    for _ in range(20_000):
        key = generator.randbytes(generator.randrange(0, 40))
        value = generator.randbytes(generator.randrange(0, 80)) if generator.random() < 0.9 else None
        if generator.random() < 0.5 and len(key) >= 2:
            key = generator.randrange(0, 26).to_bytes(2, "big") + key[2:]  # mostly known types
        decoded = decode_record(key, value)
        assert decoded.error is None or decoded.error_stage in ("key", "value")


def test_absurd_lengths_are_refused_before_allocation():
    key = h("000200086d792d67726f7570")
    value = h("0003") + b"\x00\x08consumer" + b"\x00\x00\x00\x01" + b"\xff\xff" * 2 + b"\x00" * 8 + b"\x7f\xff\xff\xff"
    decoded = decode_record(key, value)
    assert "2147483647 elements" in decoded.error
