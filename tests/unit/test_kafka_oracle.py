"""Every record of every real segment we have decodes exactly as Kafka's own DumpLogSegments decodes it.

Sources: the public fixtures (real brokers, Kafka 2.x-3.x era data) and every lab capture made from
real 3.9.2, 4.2.1, 4.3.1 and 4.4.0 brokers (tests/captures). Kafka 4.2.1's DumpLogSegments (the writer's
own for the 4.3.1 and 4.4.0 captures) is run on the same files in this test; the comparison is of parsed
structures, field by field.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.broker import KAFKA_VERSIONS
from tests.conftest import PUBLIC_FIXTURES, REPO_ROOT
from tests.kafka_oracle import (
    kafka_by_position,
    ours_by_position,
    run_dump_log_segments,
)

CAPTURES = REPO_ROOT / "tests" / "captures"
# The release of the DumpLogSegments that judges public fixtures and captures up to it (jvm/kafka-4/jars).
ORACLE_RELEASE = KAFKA_VERSIONS["4"]


def release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def oracle_line(writer: str) -> str:
    """The Kafka line whose DumpLogSegments judges a capture written by Kafka `writer`: 4.2.1's, unless
    the writer is newer; then its own line's (no older tool may judge it, see below)."""
    if release(writer) <= release(ORACLE_RELEASE):
        return "4"
    return next(line for line, version in KAFKA_VERSIONS.items() if version == writer)


def segment_sets() -> dict[str, tuple[str, list[Path]]]:
    """{name: (oracle line, segment files)}"""
    sets = {}
    for root in sorted(PUBLIC_FIXTURES.iterdir()):
        files = sorted(root.rglob("__consumer_offsets-*/*.log"))
        if files:
            sets[f"public/{root.name}"] = ("4", files)
    for capture in sorted(CAPTURES.glob("kafka-*/*")):
        files = sorted(capture.rglob("__consumer_offsets-*/*.log"))
        if files:
            writer = capture.parent.name.removeprefix("kafka-")
            sets[f"lab/{capture.parent.name}/{capture.name}"] = (oracle_line(writer), files)
    return sets


SEGMENT_SETS = segment_sets()


def test_there_is_real_data_to_compare():
    assert any(name.startswith("public/") for name in SEGMENT_SETS)
    assert any(name.startswith("lab/kafka-4") for name in SEGMENT_SETS), "no lab capture: run python -m lab.capture"


def test_every_capture_is_compared_with_a_kafka_at_least_as_new_as_its_writer():
    """Kafka adds tagged fields inside an existing record version (4.3 gives type 8 `assignmentEpochs`
    in value version 0, KIP-1251). An older DumpLogSegments skips such a tag and prints less than the
    record holds, while groupscope decodes every record as the newest Kafka does. So a capture written
    by a newer broker needs that broker's own tools as its oracle, never an older release's."""
    writers = {capture.parent.name.removeprefix("kafka-") for capture in CAPTURES.glob("kafka-*/*")}
    too_new = sorted(writer for writer in writers if release(writer) > release(KAFKA_VERSIONS[oracle_line(writer)]))
    assert not too_new, f"captures of Kafka {too_new} need their own DumpLogSegments"


@pytest.mark.parametrize("name", sorted(SEGMENT_SETS))
def test_decoding_equals_dump_log_segments(name):
    line, files = SEGMENT_SETS[name]
    kafka = kafka_by_position(run_dump_log_segments(files, line))
    ours = ours_by_position(files)
    assert kafka, "Kafka decoded no records: the comparison would be empty"

    kafka_errors = {position: entry for position, entry in kafka.items() if "kafka_error" in entry}
    assert not kafka_errors, f"Kafka itself could not decode: {list(kafka_errors.values())[:3]}"
    assert sorted(ours) == sorted(kafka), "the two decoders saw different records"
    mismatches = [
        (position, ours[position], kafka[position]) for position in kafka if ours[position] != kafka[position]
    ]
    assert not mismatches, f"{len(mismatches)} of {len(kafka)} records differ; first: {mismatches[0]}"
