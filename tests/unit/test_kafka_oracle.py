"""Every record of every real segment we have decodes exactly as Kafka's own DumpLogSegments decodes it.

Sources: the public fixtures (real brokers, Kafka 2.x-3.x era data) and every lab capture made from
real 4.2.1 and 3.9.2 brokers (tests/captures). Kafka 4.2.1's DumpLogSegments is run on the same
files in this test; the comparison is of parsed structures, field by field.
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
# The release of the DumpLogSegments that run_dump_log_segments runs (jvm/kafka-4/jars).
ORACLE_RELEASE = KAFKA_VERSIONS["4"]


def segment_sets() -> dict[str, list[Path]]:
    sets = {}
    for root in sorted(PUBLIC_FIXTURES.iterdir()):
        files = sorted(root.rglob("__consumer_offsets-*/*.log"))
        if files:
            sets[f"public/{root.name}"] = files
    for capture in sorted(CAPTURES.glob("kafka-*/*")):
        files = sorted(capture.rglob("__consumer_offsets-*/*.log"))
        if files:
            sets[f"lab/{capture.parent.name}/{capture.name}"] = files
    return sets


SEGMENT_SETS = segment_sets()


def test_there_is_real_data_to_compare():
    assert any(name.startswith("public/") for name in SEGMENT_SETS)
    assert any(name.startswith("lab/kafka-4") for name in SEGMENT_SETS), "no lab capture: run python -m lab.capture"


def release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_every_capture_is_compared_with_a_kafka_at_least_as_new_as_its_writer():
    """Kafka adds tagged fields inside an existing record version (4.3 gives type 8 `assignmentEpochs`
    in value version 0, KIP-1251). An older DumpLogSegments skips such a tag and prints less than the
    record holds, while groupscope decodes every record as the newest Kafka does. So a capture written
    by a newer broker needs that broker's own tools as its oracle, never an older release's."""
    writers = {capture.parent.name.removeprefix("kafka-") for capture in CAPTURES.glob("kafka-*/*")}
    too_new = sorted(writer for writer in writers if release(writer) > release(ORACLE_RELEASE))
    assert not too_new, f"captures of Kafka {too_new} need their own DumpLogSegments, not {ORACLE_RELEASE}'s"


@pytest.mark.parametrize("name", sorted(SEGMENT_SETS))
def test_decoding_equals_dump_log_segments(name):
    files = SEGMENT_SETS[name]
    kafka = kafka_by_position(run_dump_log_segments(files))
    ours = ours_by_position(files)
    assert kafka, "Kafka decoded no records: the comparison would be empty"

    kafka_errors = {position: entry for position, entry in kafka.items() if "kafka_error" in entry}
    assert not kafka_errors, f"Kafka itself could not decode: {list(kafka_errors.values())[:3]}"
    assert sorted(ours) == sorted(kafka), "the two decoders saw different records"
    mismatches = [
        (position, ours[position], kafka[position]) for position in kafka if ours[position] != kafka[position]
    ]
    assert not mismatches, f"{len(mismatches)} of {len(kafka)} records differ; first: {mismatches[0]}"
