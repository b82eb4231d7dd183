"""The streams captures (a real Kafka Streams application on a real broker of the same line, 4.2.1 and
4.3.1, lab/scenarios/streams.py) hold what the decoder must get right, and agree with what the instances
themselves reported.

tests/unit/test_kafka_oracle.py compares every record of these captures with their line's DumpLogSegments;
these tests make sure each capture keeps the cases that comparison is there for: type 22 records whose standby
tasks carry no `assignmentEpochs` on the wire (which Kafka reads as an empty list), and a deleted group.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from pathlib import Path

import pytest

from jobs.segment_files import read_paths
from lab.scenarios import capture_folders
from schemas.coordinator_records import ASSIGNMENT_EPOCHS, STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE
from schemas.layouts import Field, Message
from tests.conftest import REPO_ROOT
from tests.kafka_oracle import kafka_by_position
from transforms.decoder.layout_reader import read_versioned

CAPTURES = sorted((REPO_ROOT / "tests" / "captures").glob("kafka-*/streams"))
per_capture = pytest.mark.parametrize("capture", CAPTURES, ids=[path.parent.name for path in CAPTURES])
TYPE_STREAMS_CURRENT_ASSIGNMENT, TYPE_STREAMS_MEMBER_METADATA = 22, 19
STREAMS_TYPES = {17, 19, 20, 21, 22, 23}
STATE_STABLE = 1  # streams MemberState.STABLE
ON_THE_WIRE = object()  # a default no decoded value equals: any tag 0 on the wire is kept


def with_epochs_default(field: Field, default: object) -> Field:
    if field == ASSIGNMENT_EPOCHS:
        return dataclasses.replace(field, default=default)
    return dataclasses.replace(field, fields=tuple(with_epochs_default(member, default) for member in field.fields))


# The declared layout, except that a present tag 0 is always kept: what is on the wire, not Kafka's view.
WIRE_PROBE: Message = dataclasses.replace(
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
    fields=tuple(
        with_epochs_default(field, ON_THE_WIRE) for field in STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE.fields
    ),
)


def test_there_is_a_streams_capture_of_every_line_the_scenario_runs_on():
    assert {path.parent.name for path in CAPTURES} == capture_folders("streams")


def current_assignment_values(capture: Path) -> list[dict]:
    values = []
    for record in read_paths([str(path) for path in sorted(capture.rglob("__consumer_offsets-*/*.log"))]):
        is_type_22 = record.key[:2] == TYPE_STREAMS_CURRENT_ASSIGNMENT.to_bytes(2, "big")
        if is_type_22 and record.value is not None:
            values.append(read_versioned(WIRE_PROBE, record.value)[1])
    return values


@per_capture
def test_standby_tasks_are_written_without_assignment_epochs_and_active_tasks_with_them(capture: Path):
    values = current_assignment_values(capture)
    standby = [task for value in values for task in value["standby_tasks"] + value["standby_tasks_pending_revocation"]]
    active = [task for value in values for task in value["active_tasks"]]
    assert standby, "no standby task in any type 22 record: the capture lost its point"
    assert active
    assert all("assignment_epochs" not in task for task in standby)
    assert all(len(task["assignment_epochs"]) == len(task["partitions"]) for task in active)


def kafka_records(capture: Path) -> dict:
    return kafka_by_position((capture / "dump-offsets.txt").read_text())


@per_capture
def test_the_deleted_group_ends_with_a_tombstone_for_every_streams_record_it_had(capture: Path):
    last = {}
    for _, record in sorted(kafka_records(capture).items(), key=lambda item: item[0][1]):
        if record["key"].get("group_id") == "streams-lab-deleted":
            last[(record["record_type"], json.dumps(record["key"], sort_keys=True))] = record["value"]
    assert {record_type for record_type, _ in last} == STREAMS_TYPES
    assert all(value is None for value in last.values())


def tasks(task_ids: list[dict]) -> list[str]:
    return sorted(f"{task['subtopology_id']}_{partition}" for task in task_ids for partition in task["partitions"])


@per_capture
def test_every_placement_the_instances_reported_is_a_stable_assignment_kafka_wrote(capture: Path):
    records = kafka_records(capture).values()
    # Kafka Streams names each member's consumer "<client id>-StreamThread-1-consumer" (one thread here).
    instance_of = {
        record["key"]["member_id"]: record["value"]["client_id"].removesuffix("-StreamThread-1-consumer")
        for record in records
        if record["record_type"] == TYPE_STREAMS_MEMBER_METADATA and record["value"] is not None
    }
    written = defaultdict(list)
    for record in records:
        value = record["value"]
        if record["record_type"] == TYPE_STREAMS_CURRENT_ASSIGNMENT and value and value["state"] == STATE_STABLE:
            placement = {"active": tasks(value["active_tasks"]), "standby": tasks(value["standby_tasks"])}
            written[instance_of[record["key"]["member_id"]]].append(placement)
    events = json.loads((capture / "scenario.json").read_text())["events"]
    reported = [event["placement"] for event in events if event["event"] == "streams_placement"]
    assert len(reported) == 9, "s1; s1+s2; s1+s2+s3; s2 left; s3 killed; g1; g1+g2; its topic grown; d1"
    for placement in reported:
        for instance, view in placement.items():
            assert view in written[instance], f"{instance} ran {view}; Kafka wrote {written[instance]}"
