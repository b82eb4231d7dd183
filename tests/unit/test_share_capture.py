"""The share captures (Kafka's own KafkaShareConsumer on real 4.2.1 and 4.3.1 brokers of the same line,
lab/scenarios/share.py): both logs read by groupscope record by record as that line's DumpLogSegments
reads them, and the log agrees with what the members themselves saw and did.

Both logs are decoded by groupscope's decoder: `__consumer_offsets` (types 10-15) and
`__share_group_state` (ShareSnapshot, ShareUpdate: schemas/share_state_records.py), each record with its
own topic's declarations (the topic named by its partition directory, as the ingest job names it).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from jobs.segment_files import read_paths
from lab.dump import parse_dump
from lab.scenarios import capture_folders
from lab.scenarios.share import DELETED_GROUP, DELIVERY_COUNT_LIMIT, GROUP, SESSION_TIMEOUT_MS, SHARE_SETTINGS
from tests.conftest import REPO_ROOT
from tests.kafka_oracle import kafka_by_position, ours_by_position, parse_describe, snake_case
from transforms.decoder.coordinator_records import decode_record
from transforms.decoder.decode_rows import to_jsonable
from transforms.decoder.record_batches import topic_from_path

# One share capture per Kafka line (4.2.1, 4.3.1, 4.4.0): the same scenario, each line's own DumpLogSegments.
CAPTURES = sorted((REPO_ROOT / "tests" / "captures").glob("kafka-*/share"))
per_capture = pytest.mark.parametrize("capture", CAPTURES, ids=[path.parent.name for path in CAPTURES])
SHARE_MEMBER, SHARE_METADATA, SHARE_TARGET_METADATA, SHARE_TARGET_MEMBER, SHARE_CURRENT, SHARE_STATE_PARTITIONS = range(
    10, 16
)
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4  # a state batch's delivery state
HEARTBEAT_INTERVAL_MS = SHARE_SETTINGS["group.share.heartbeat.interval.ms"]
LEAVE_WITHIN_MS = 2000  # a clean leave is one heartbeat round trip after the close begins, not a session


def in_capture(by_path: dict[tuple[str, int], dict]) -> dict[tuple[str, int], dict]:
    """Re-keyed by "<partition directory>/<file>": the committed dumps name the files where the lab
    staged them, not where they are now."""
    return {
        (f"{Path(path).parent.name}/{Path(path).name}", offset): record for (path, offset), record in by_path.items()
    }


def share_state_ours(capture: Path) -> dict[tuple[str, int], dict]:
    decoded = {}
    files = sorted((capture / "segments-share-state").glob("*/*.log"))
    for record in read_paths([str(file) for file in files]):
        assert record.error is None, record.error
        result = decode_record(record.key, record.value, topic_from_path(record.source_file))
        assert result.error is None, f"{record.source_file}@{record.offset}: {result.error}"
        decoded[(record.source_file, record.offset)] = {
            "record_type": result.record_type,
            "key": result.key,
            "value": to_jsonable(result.value),
            "value_version": result.value_version,
        }
    return in_capture(decoded)


def share_state_kafka(capture: Path) -> dict[tuple[str, int], dict]:
    records = {}
    for record in parse_dump((capture / "dump-share-state.txt").read_text()):
        assert "key" in record, f"Kafka could not decode: {record}"
        records[(record["file"], record["offset"])] = {
            "record_type": record["type"],
            "key": snake_case(record["key"]),
            "value": snake_case(record["value"]),
            "value_version": record["version"],
        }
    return in_capture(records)


def offsets_kafka(capture: Path) -> dict[tuple[str, int], dict]:
    return in_capture(kafka_by_position((capture / "dump-offsets.txt").read_text()))


def assert_same_records(ours: dict, kafka: dict) -> None:
    assert kafka, "Kafka decoded no records: the comparison would be empty"
    assert sorted(ours) == sorted(kafka), "the two decoders saw different records"
    mismatches = [
        (position, ours[position], kafka[position]) for position in kafka if ours[position] != kafka[position]
    ]
    assert not mismatches, f"{len(mismatches)} of {len(kafka)} records differ; first: {mismatches[0]}"


def labels(records: dict) -> set[str]:
    return {f"{r['record_type']}{'' if r['value'] is not None else ' tombstone'}" for r in records.values()}


def test_there_is_a_share_capture_of_every_line_the_scenario_runs_on():
    assert {path.parent.name for path in CAPTURES} == capture_folders("share")


@per_capture
def test_consumer_offsets_records_equal_kafkas_dump_of_them(capture: Path):
    ours = in_capture(ours_by_position(sorted((capture / "segments").glob("*/*.log"))))
    kafka = offsets_kafka(capture)
    assert_same_records(ours, kafka)
    # What the capture is for: every share group record type, and members removed (left, fenced, deleted).
    assert {"10", "11", "12", "13", "14", "15", "10 tombstone", "13 tombstone", "14 tombstone"} <= labels(kafka)


@per_capture
def test_share_group_state_records_equal_kafkas_dump_of_them(capture: Path):
    kafka = share_state_kafka(capture)
    assert_same_records(share_state_ours(capture), kafka)
    assert {"0", "1", "0 tombstone"} <= labels(kafka)
    assert any("delivery_complete_count" in r["value"] for r in kafka.values() if r["value"]), "no KIP-1226 tag"


def scenario_events(capture: Path, kind: str) -> list[dict]:
    events = json.loads((capture / "scenario.json").read_text())["events"]
    return [event for event in events if event["event"] == kind]


def log_order(capture: Path, records: dict) -> list[dict]:
    """Records with their CreateTime, in log order per partition (one group's records share a partition)."""
    times = {
        (f"{Path(r['file']).parent.name}/{Path(r['file']).name}", r["offset"]): r["at_ms"] for r in dump_lines(capture)
    }
    return [records[position] | {"at_ms": times[position]} for position in sorted(records)]


def dump_lines(capture: Path) -> list[dict]:
    return parse_dump((capture / "dump-offsets.txt").read_text()) + parse_dump(
        (capture / "dump-share-state.txt").read_text()
    )


def topic_names(records: list[dict]) -> dict[str, str]:
    """topic id -> name, from the share groups' state partition metadata (type 15)."""
    names = {}
    for record in records:
        if record["record_type"] == SHARE_STATE_PARTITIONS and record["value"]:
            for kind in ("initializing_topics", "initialized_topics", "deleting_topics"):
                names |= {topic["topic_id"]: topic["topic_name"] for topic in record["value"][kind]}
    return names


def partitions(topic_partitions: list[dict], names: dict[str, str]) -> list[str]:
    return sorted(f"{names[tp['topic_id']]}-{p}" for tp in topic_partitions for p in tp["partitions"])


def latest(records: list[dict], record_type: int, key: dict, at_ms: int) -> dict | None:
    """The value of the last record of this type and key written at or before `at_ms`."""
    written = [r for r in records if r["record_type"] == record_type and r["key"] == key and r["at_ms"] <= at_ms]
    return written[-1]["value"] if written else None


@per_capture
def test_every_view_a_member_had_of_itself_is_what_the_log_held_at_that_moment(capture: Path):
    records = log_order(capture, offsets_kafka(capture))
    names = topic_names(records)
    views = scenario_events(capture, "share_assignment")
    assert {view["member"] for view in views} == {"m1", "m2", "m3", "d1"}
    members = {
        (r["key"]["member_id"], r["value"]["client_id"])
        for r in records
        if r["record_type"] == SHARE_MEMBER and r["value"]
    }
    assert members == {(view["member_id"], view["member"]) for view in views}, "one member id per client, as written"
    deleted_at = {event["topic"]: event["at_ms"] for event in scenario_events(capture, "topic_deleted")}
    assert deleted_at, "the scenario deletes a topic under the group"
    for view in views:
        group, member = {"group_id": view["group"]}, {"group_id": view["group"], "member_id": view["member_id"]}
        # DescribeShareGroups names topics through the broker's metadata: once a topic is deleted its
        # partitions leave the description, while the log's assignment keeps its id until the next epoch.
        gone = {topic for topic, at_ms in deleted_at.items() if at_ms <= view["at_ms"]}
        current = latest(records, SHARE_CURRENT, member, view["at_ms"])
        assert current["member_epoch"] == view["member_epoch"], view
        held = [
            part for part in partitions(current["assigned_partitions"], names) if part.rsplit("-", 1)[0] not in gone
        ]
        assert held == view["assignment"], view
        assert latest(records, SHARE_METADATA, group, view["at_ms"])["epoch"] == view["group_epoch"], view
        assert (
            latest(records, SHARE_TARGET_METADATA, group, view["at_ms"])["assignment_epoch"] == view["assignment_epoch"]
        )
        if view["member_epoch"] == view["assignment_epoch"]:  # reconciled: it holds its target
            target = latest(records, SHARE_TARGET_MEMBER, member, view["at_ms"])
            targeted = partitions(target["topic_partitions"], names)
            assert [part for part in targeted if part.rsplit("-", 1)[0] not in gone] == view["assignment"], view


@per_capture
def test_the_member_that_left_is_removed_at_once_and_the_killed_one_at_its_session_timeout(capture: Path):
    records = log_order(capture, offsets_kafka(capture))
    member_id = {view["member"]: view["member_id"] for view in scenario_events(capture, "share_assignment")}
    removed = {
        r["key"]["member_id"]: r["at_ms"] for r in records if r["record_type"] == SHARE_MEMBER and r["value"] is None
    }
    closing = next(e for e in scenario_events(capture, "share_closing") if e["member"] == "m2")["at_ms"]
    killed = next(e for e in scenario_events(capture, "share_member_killed") if e["member"] == "m3")["at_ms"]
    assert 0 <= removed[member_id["m2"]] - closing < LEAVE_WITHIN_MS
    # Its last heartbeat was at most one interval before the kill; the session runs from that heartbeat.
    assert removed[member_id["m3"]] - killed >= SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS
    described = parse_describe((capture / "describe-share-members.txt").read_text())
    assert [(row["GROUP"], row["CLIENT-ID"], row["CONSUMER-ID"]) for row in described] == [
        (GROUP, "m1", member_id["m1"])
    ]
    assert member_id["m1"] not in removed


def expected_states(plan: str) -> list[tuple[int, int]]:
    """The (delivery state, delivery count) a record goes through under its plan, one per delivery."""
    if plan == "release-always":
        return [(AVAILABLE, count) for count in range(1, DELIVERY_COUNT_LIMIT)] + [(ARCHIVED, DELIVERY_COUNT_LIMIT)]
    return {
        "accept": [(ACKNOWLEDGED, 1)],
        "reject": [(ARCHIVED, 1)],
        "release-once": [(AVAILABLE, 1), (ACKNOWLEDGED, 2)],
    }[plan]


def expected_acknowledgements(plan: str) -> list[str]:
    """What a member answers to each delivery (AcknowledgeType's names, as the client logs them)."""
    if plan == "release-always":
        return ["release"] * DELIVERY_COUNT_LIMIT
    return {"accept": ["accept"], "reject": ["reject"], "release-once": ["release", "accept"]}[plan]


def state_histories(records: list[dict], names: dict[str, str]) -> tuple[dict, dict]:
    """Replays __share_group_state: per (group, topic, partition, offset) the distinct successive states
    its batches recorded, and per share-partition the last start offset."""
    history, start = defaultdict(list), {}
    for record in records:
        if record["value"] is None:
            continue
        share_partition = (record["key"]["group_id"], names[record["key"]["topic_id"]], record["key"]["partition"])
        start[share_partition] = record["value"]["start_offset"]
        for batch in record["value"]["state_batches"]:
            for offset in range(batch["first_offset"], batch["last_offset"] + 1):
                state = (batch["delivery_state"], batch["delivery_count"])
                if history[(*share_partition, offset)][-1:] != [state]:
                    history[(*share_partition, offset)].append(state)
    return history, start


@per_capture
def test_delivery_counts_and_archived_records_follow_the_acknowledgements(capture: Path):
    names = topic_names(log_order(capture, offsets_kafka(capture)))
    history, start = state_histories(log_order(capture, share_state_kafka(capture)), names)
    plans = {
        (r["topic"], r["partition"], r["offset"]): r["plan"]
        for e in scenario_events(capture, "share_records_produced")
        for r in e["records"]
    }
    deliveries = defaultdict(list)
    for event in scenario_events(capture, "share_record"):
        deliveries[(event["group"], event["topic"], event["partition"], event["offset"])].append(
            event["delivery_count"]
        )
    acks = defaultdict(list)
    for event in scenario_events(capture, "share_ack"):
        acks[(event["group"], event["topic"], event["partition"], event["offset"])].append(event["type"])
    assert (
        set(deliveries)
        == set(acks)
        == {(GROUP, *record) for record in plans}
        | {(DELETED_GROUP, *record) for record in plans if record[0] == "tasks"}
    ), "each group saw every record of its topics"
    for (group, topic, partition, offset), counts in deliveries.items():
        expected = expected_states(plans[(topic, partition, offset)])
        # The broker counted each delivery, and each RELEASE made one more.
        assert counts == list(range(1, len(expected) + 1)), (group, topic, partition, offset, counts)
        assert acks[(group, topic, partition, offset)] == expected_acknowledgements(plans[(topic, partition, offset)])
        # Every state it went through is written: each acknowledgement commit is a ShareUpdate.
        written = history[(group, topic, partition, offset)]
        assert written == expected, (group, topic, partition, offset, written)
    described = {
        (r["GROUP"], r["TOPIC"], int(r["PARTITION"])): int(r["START-OFFSET"])
        for r in parse_describe((capture / "describe-share.txt").read_text())
    }
    assert described and described == {
        key: value for key, value in start.items() if key[0] == GROUP and key[1] == "tasks"
    }


@per_capture
def test_the_deleted_group_and_the_deleted_topic_get_tombstones_in_both_logs(capture: Path):
    offsets = log_order(capture, offsets_kafka(capture))
    names = topic_names(offsets)
    last = {}
    for record in offsets:
        if record["key"]["group_id"] == DELETED_GROUP:
            last[(record["record_type"], json.dumps(record["key"], sort_keys=True))] = record["value"]
    assert {record_type for record_type, _ in last} == {10, 11, 12, 13, 14, 15}
    assert all(value is None for value in last.values())
    states = defaultdict(list)
    for record in log_order(capture, share_state_kafka(capture)):
        key = record["key"]
        states[(key["group_id"], names[key["topic_id"]], key["partition"])].append(record["value"])
    deleted_group = {(DELETED_GROUP, "tasks", p) for p in range(4)}  # `tasks` grew to 4 before the group began
    assert {key for key, values in states.items() if None in values} == deleted_group | {
        (GROUP, "scratch", p) for p in range(2)
    }
    assert all(states[key][-1] is None for key in deleted_group)
    # Not "ends in": a second run saw the group re-initialise scratch-0's state 2 ms after deleting it (a
    # fresh ShareSnapshot after the tombstone; lab/README.md, gotchas). The group's metadata drops it.
    last_metadata = [
        r["value"] for r in offsets if r["record_type"] == SHARE_STATE_PARTITIONS and r["key"]["group_id"] == GROUP
    ][-1]
    assert [topic["topic_name"] for topic in last_metadata["initialized_topics"]] == ["tasks"]
