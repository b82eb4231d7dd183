"""A real Kafka 4.2.1 broker, a short scenario, and what groupscope decodes from the segments it wrote.

The oracles are Kafka's own tools, run against the same broker and files: DumpLogSegments for every
record, kafka-consumer-groups --describe for committed offsets and the current assignment.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from jobs.segment_files import read_paths
from lab.broker import Broker, dump_offsets
from lab.scenarios import Lab, cooperative, transactions
from tests.kafka_oracle import parse_dump
from tests.test_kafka_oracle import ours_by_position
from transforms.coordinator_codec import decode_record

pytestmark = pytest.mark.broker


def parse_describe(text: str) -> list[dict]:
    rows, header = [], None
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "GROUP":
            header = fields
        elif header and len(fields) == len(header):
            rows.append(dict(zip(header, fields, strict=True)))
    return rows


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("kafka-4")
    broker = Broker("4", workdir).start()
    lab = Lab(broker)
    try:
        cooperative(lab)
        transactions(lab)
        describe = parse_describe(broker.describe_groups())
    finally:
        lab.close_clients()
        broker.stop()
        lab.kill_all_members()
    segments = broker.offsets_segments()
    return {"lab": lab, "describe": describe, "segments": segments, "records": list(read_paths(map(str, segments)))}


def test_every_record_the_broker_wrote_decodes_as_kafka_decodes_it(lab_run):
    segments = lab_run["segments"]
    assert segments, "the broker wrote no __consumer_offsets segment"
    kafka = parse_dump(dump_offsets(segments))
    ours = ours_by_position(segments)
    assert kafka and sorted(ours) == sorted(kafka)
    assert all(ours[position] == kafka[position] for position in kafka)
    versions = {(entry["record_type"], entry["value_version"]) for entry in kafka.values()}
    assert (1, 4) in versions, "Kafka 4.2 writes OffsetCommitValue v4"
    assert (2, 3) in versions


def test_transactional_commits_are_committed_aborted_or_pending(lab_run):
    states = defaultdict(set)
    for record in lab_run["records"]:
        decoded = decode_record(record.key, record.value)
        if decoded.record_type == 1 and decoded.key["group"] == "txn-group" and decoded.value:
            states[decoded.value["offset"]].add(record.txn_state)
    assert dict(states) == {10: {"committed"}, 20: {"aborted"}, 30: {"pending"}}


def test_latest_commits_and_assignment_equal_kafka_consumer_groups_describe(lab_run):
    committed, owner = {}, {}
    for record in lab_run["records"]:
        decoded = decode_record(record.key, record.value)
        if decoded.record_type == 1 and record.txn_state in (None, "committed"):
            key = (decoded.key["group"], decoded.key["topic"], decoded.key["partition"])
            committed[key] = decoded.value["offset"] if decoded.value else None
        if decoded.record_type == 2 and decoded.value:
            for member in decoded.value["members"]:
                for assigned in member["assignment"]["assigned_partitions"]:
                    for partition in assigned["partitions"]:
                        owner[(decoded.key["group"], assigned["topic"], partition)] = member["member_id"]
    described = [row for row in lab_run["describe"] if row["GROUP"] in ("coop", "txn-group")]
    assert len(described) == 6 + 2
    for row in described:
        key = (row["GROUP"], row["TOPIC"], int(row["PARTITION"]))
        assert committed[key] == int(row["CURRENT-OFFSET"]), key
        if row["CONSUMER-ID"] != "-":
            assert owner[key] == row["CONSUMER-ID"], key
