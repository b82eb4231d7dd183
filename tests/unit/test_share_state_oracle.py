"""Every `__share_group_state` record of every lab capture decodes as Kafka's own DumpLogSegments
--share-group-state-decoder decodes it, field by field, and its silver `share_group_state` row holds
every field Kafka printed, unchanged.

tests/unit/test_kafka_oracle.py's pattern for the share coordinator's topic: Kafka's tool is run here on
the captured files (each capture's own line's: 4.2.1, 4.3.1, 4.4.0), and its parsed output is
compared with groupscope's, which reads the records as the ingest job does: the capture directory is
searched (both topics' partition directories), each record's topic is taken from its directory, and
the raw rows are those `ingest` writes (transforms.bronze.raw_batch) and `decode` reads
(transforms.decoder.decode_rows).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from jobs.segment_files import read_paths
from lab.broker import dump_share_state
from lab.scenarios import capture_folders
from schemas.coordinator_records import CONSUMER_OFFSETS_TOPIC
from schemas.layouts import NO_DEFAULT
from schemas.share_state_records import SHARE_GROUP_STATE_TOPIC, SHARE_STATE_RECORD_TYPES
from tests.conftest import REPO_ROOT
from tests.kafka_oracle import kafka_by_position
from tests.unit.test_kafka_oracle import oracle_line
from transforms.bronze import raw_batch
from transforms.decoder.coordinator_records import decode_record
from transforms.decoder.decode_rows import (
    DESTINATION_QUARANTINE,
    DESTINATION_SHARE_GROUP_STATE,
    decode_raw_row,
    to_jsonable,
)
from transforms.decoder.record_batches import topic_from_path

CAPTURES = sorted(path.parent for path in (REPO_ROOT / "tests" / "captures").glob("kafka-*/*/segments-share-state"))
per_capture = pytest.mark.parametrize("capture", CAPTURES, ids=[f"{p.parent.name}/{p.name}" for p in CAPTURES])
# A value field of Kafka's -> the silver column holding it, where the names differ (timestamps end in _at).
SILVER_COLUMN = {"create_timestamp": "state_created_at_ms", "write_timestamp": "state_written_at_ms"}
KEY_COLUMNS = ("group_id", "topic_id", "partition")


def share_state_files(capture: Path) -> list[Path]:
    return sorted(capture.glob("segments-share-state/__share_group_state-*/*.log"))


@pytest.fixture(scope="module", params=CAPTURES, ids=[f"{p.parent.name}/{p.name}" for p in CAPTURES])
def kafka(request) -> tuple[Path, dict]:
    """(capture, Kafka's decode of its share-state segments by (resolved file, offset)), one JVM each."""
    capture = request.param
    line = oracle_line(capture.parent.name.removeprefix("kafka-"))
    return capture, kafka_by_position(dump_share_state(share_state_files(capture), line))


def raw_rows(capture: Path) -> list[dict]:
    """The capture's raw rows as ingest makes them, from the whole capture directory (both topics)."""
    rows = raw_batch(list(read_paths([str(capture)])), "lab", "run").to_pylist()
    for row in rows:
        row["record_at"] = row.pop("record_at_ms")
    return rows


def share_state_rows(capture: Path) -> dict[tuple[str, int], dict]:
    """Decoded rows of the `__share_group_state` raw rows, by (resolved file, offset)."""
    return {
        (str(Path(row["source_file"]).resolve()), row["source_offset"]): row | {"decoded": decode_raw_row(row)}
        for row in raw_rows(capture)
        if row["source_topic"] == SHARE_GROUP_STATE_TOPIC
    }


def test_there_are_share_state_captures_of_every_line_the_share_scenario_runs_on():
    assert {capture.parent.name for capture in CAPTURES} == capture_folders("share")
    assert all(share_state_files(capture) for capture in CAPTURES)


def test_decoding_equals_dump_log_segments(kafka):
    capture, by_kafka = kafka
    assert by_kafka, "Kafka decoded no records: the comparison would be empty"
    errors = [entry for entry in by_kafka.values() if "kafka_error" in entry]
    assert not errors, f"Kafka itself could not decode: {errors[:3]}"
    ours = {}
    for record in read_paths(share_state_files(capture)):
        result = decode_record(record.key, record.value, topic_from_path(record.source_file))
        assert result.error is None, f"{record.source_file}@{record.offset}: {result.error}"
        ours[(str(Path(record.source_file).resolve()), record.offset)] = {
            "record_type": result.record_type,
            "key": result.key,
            "value": to_jsonable(result.value),
            "value_version": result.value_version,
        }
    assert sorted(ours) == sorted(by_kafka), "the two decoders saw different records"
    mismatches = [(at, ours[at], by_kafka[at]) for at in by_kafka if ours[at] != by_kafka[at]]
    assert not mismatches, f"{len(mismatches)} of {len(by_kafka)} records differ; first: {mismatches[0]}"
    types = {(entry["record_type"], entry["value"] is None) for entry in by_kafka.values()}
    assert {(0, False), (1, False), (0, True)} <= types, "the capture lacks a snapshot, an update or a tombstone"


def kafka_field(kafka_value: dict, field) -> object:
    """What Kafka's record holds for a declared field: what it printed, or for a tagged field it left
    out, the default its generated code gives it (Kafka prints a tagged field only off its default)."""
    if field.name in kafka_value:
        return kafka_value[field.name]
    assert field.tag is not None and field.default is not NO_DEFAULT, f"Kafka printed no {field.name}"
    return field.default


def test_each_silver_row_holds_every_field_kafka_printed(kafka):
    capture, by_kafka = kafka
    rows = share_state_rows(capture)
    assert sorted(rows) == sorted(by_kafka), "ingest found other share-state records than Kafka's tool"
    for at, expected in by_kafka.items():
        row, decoded = rows[at], rows[at]["decoded"]
        assert decoded["destination"] == DESTINATION_SHARE_GROUP_STATE, (at, decoded.get("reason"))
        assert {name: decoded[name] for name in KEY_COLUMNS} == expected["key"], at
        assert decoded["record_type"] == expected["record_type"]
        assert decoded["value_version"] == expected["value_version"]
        assert decoded["is_tombstone"] is (expected["value"] is None)
        assert decoded["record_id"] == row["record_id"]
        layout = SHARE_STATE_RECORD_TYPES[expected["record_type"]].value
        declared = {field.name for field in layout.fields}
        value_columns = {SILVER_COLUMN.get(field.name, field.name) for type_ in SHARE_STATE_RECORD_TYPES.values()
                         for field in type_.value.fields}  # fmt: skip
        if expected["value"] is None:
            assert all(decoded[column] is None for column in value_columns), at
            continue
        assert set(expected["value"]) <= declared, f"Kafka printed fields groupscope does not declare: {at}"
        for field in layout.fields:
            assert decoded[SILVER_COLUMN.get(field.name, field.name)] == kafka_field(expected["value"], field), (
                at,
                field.name,
            )
        # A column of the other record type only (an update has no state epoch nor timestamps) is null.
        other_columns = value_columns - {SILVER_COLUMN.get(name, name) for name in declared}
        assert all(decoded[column] is None for column in other_columns), at


def test_share_state_record_ids_name_their_topic_and_never_repeat_an_offsets_record(kafka):
    capture, _ = kafka
    rows = raw_rows(capture)
    topics = {row["source_topic"] for row in rows}
    assert topics == {CONSUMER_OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC}
    ids = [row["record_id"] for row in rows]
    assert len(ids) == len(set(ids)), "two raw records share one record id"
    for row in rows:
        partition_and_offset = f"{row['source_partition']}/{row['source_offset']}"
        if row["source_topic"] == SHARE_GROUP_STATE_TOPIC:
            assert row["record_id"] == f"lab/{SHARE_GROUP_STATE_TOPIC}/{partition_and_offset}"
        else:
            assert row["record_id"] == f"lab/{partition_and_offset}"  # as every earlier version keyed it
    # (A broker's two logs can hold the same partition number and offset: hence the topic in the id.)


def with_int16_at(data: bytes, value: int) -> bytes:
    return struct.pack(">h", value) + data[2:]


@per_capture
def test_an_unknown_value_version_or_record_type_is_quarantined_with_the_reason(capture: Path):
    rows = [row for row in raw_rows(capture) if row["source_topic"] == SHARE_GROUP_STATE_TOPIC]
    snapshot = next(row for row in rows if row["value"] is not None)
    # Real records with one number changed: a value version and a key type no Kafka has written.
    newer = decode_raw_row(snapshot | {"value": with_int16_at(snapshot["value"], 1)})
    assert newer["destination"] == DESTINATION_QUARANTINE and newer["stage"] == "value"
    assert "version" in newer["reason"] and "1" in newer["reason"], newer["reason"]
    unknown = decode_raw_row(snapshot | {"key": with_int16_at(snapshot["key"], 2)})
    assert unknown["destination"] == DESTINATION_QUARANTINE and unknown["stage"] == "key"
    assert "unknown record type 2" in unknown["reason"], unknown["reason"]
