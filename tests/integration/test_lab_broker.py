"""The lab against a real Kafka 4.2.1 broker: a short classic-group scenario, then Kafka's own views of it
(kafka-consumer-groups --describe, DumpLogSegments over the segments the broker wrote) must agree with
what the members committed and how the group was built.

Needs the jars from scripts/bootstrap.sh; without them the tests fail (they never skip).
"""

from __future__ import annotations

import json

import pytest

from lab.broker import JARS, REPO_ROOT, Broker, BrokerError, dump_offsets
from lab.driver import Lab, ScenarioLog
from lab.dump import parse_dump
from tests.kafka_oracle import parse_describe

pytestmark = pytest.mark.broker

GROUP = "lab-test"
TOPIC = "lab-orders"
PARTITIONS = 3
RECORDS = 30
METADATA = "lab-test:batch-1"


def test_kafka_jars_are_installed():
    for line, jars in JARS.items():
        assert any(jars.glob("kafka_2.13-*.jar")), f"Kafka {line} jars missing in {jars}: run scripts/bootstrap.sh lab"


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("lab-kafka-4")
    try:
        broker = Broker("4", workdir / "broker")
    except BrokerError as error:
        pytest.fail(str(error))
    record = ScenarioLog("test", broker.kafka_version, workdir)
    broker.start()
    try:
        lab = Lab(broker, record)
        lab.create_topic(TOPIC, PARTITIONS)
        lab.produce(TOPIC, RECORDS)
        lab.start_member("t1", GROUP, [TOPIC], assignor="range", metadata=METADATA)
        lab.wait_for_group(GROUP, 1, [TOPIC])
        lab.start_member("t2", GROUP, [TOPIC], assignor="range", metadata=METADATA)
        lab.wait_for_group(GROUP, 2, [TOPIC])
        lab.wait_caught_up(GROUP, [TOPIC])
        run = {
            "state": lab.describe(GROUP).state.name,
            "committed": lab.committed(GROUP),
            "end_offsets": broker.end_offsets([TOPIC]),
            "describe": parse_describe(broker.describe_groups()),
            "describe_state": parse_describe(broker.describe_state()),
        }
    finally:
        try:
            broker.stop()
        finally:
            record.close()
    run["segments"] = broker.offsets_segments()
    run["dump"] = dump_offsets(run["segments"]) if run["segments"] else ""
    return run


def test_group_is_stable_with_both_members(lab_run):
    assert lab_run["state"] == "STABLE"
    [state] = [row for row in lab_run["describe_state"] if row["GROUP"] == GROUP]
    assert (state["STATE"], state["#MEMBERS"], state["ASSIGNMENT-STRATEGY"]) == ("Stable", "2", "range")


def test_describe_lists_every_partition_at_the_committed_offset(lab_run):
    rows = [row for row in lab_run["describe"] if row["GROUP"] == GROUP]
    assert sorted(int(row["PARTITION"]) for row in rows) == list(range(PARTITIONS))
    expected_end = RECORDS // PARTITIONS
    assert lab_run["end_offsets"] == {TOPIC: dict.fromkeys(range(PARTITIONS), expected_end)}
    for row in rows:
        assert int(row["CURRENT-OFFSET"]) == lab_run["committed"][f"{TOPIC}-{row['PARTITION']}"] == expected_end
        assert row["LAG"] == "0"
    assert {row["CLIENT-ID"] for row in rows} == {"t1", "t2"}


def test_dump_log_segments_decodes_the_commits_and_group_records(lab_run):
    assert lab_run["segments"], "the broker wrote no __consumer_offsets segment"
    assert all(segment.parent.name.startswith("__consumer_offsets-") for segment in lab_run["segments"])
    assert '"type":"1"' in lab_run["dump"] and "isvalid: false" not in lab_run["dump"]
    records = [record for record in parse_dump(lab_run["dump"]) if "type" in record]
    commits = [r for r in records if r["type"] == 1 and r["key"]["group"] == GROUP and r["key"]["topic"] == TOPIC]
    assert commits and {r["version"] for r in commits} == {4}, "Kafka 4.2 writes OffsetCommitValue v4"
    latest = {}
    for commit in commits:  # log order: the last commit per partition is the committed offset
        latest[f"{TOPIC}-{commit['key']['partition']}"] = commit["value"]["offset"]
    assert latest == lab_run["committed"]
    # confluent-kafka sends the metadata string with a trailing NUL byte; Kafka stores what it was sent.
    assert {commit["value"]["metadata"] for commit in commits} == {METADATA + "\x00"}
    groups = [r["value"] for r in records if r["type"] == 2 and r["key"]["group"] == GROUP and r["value"]]
    last = groups[-1]
    assert (last["generation"], last["protocolType"], last["protocol"]) == (2, "consumer", "range")
    owned = sorted(p for m in last["members"] for a in m["assignment"]["assignedPartitions"] for p in a["partitions"])
    assert owned == list(range(PARTITIONS))


def test_dump_offsets_needs_no_broker(tmp_path):
    """The module-level dump_offsets runs DumpLogSegments on any file, e.g. a committed capture."""
    capture = sorted((REPO_ROOT / "tests" / "captures" / "kafka-4.2.1").glob("*/segments/*/*.log"))
    assert capture, "no committed Kafka 4.2.1 capture: run python -m lab.capture"
    copied = tmp_path / capture[0].parent.name / capture[0].name
    copied.parent.mkdir()
    copied.write_bytes(capture[0].read_bytes())
    text = dump_offsets([copied])
    assert text.startswith(f"Dumping {copied}")
    assert json.loads(text.split(" key: ", 1)[1].split(" payload: ", 1)[0])["type"] in {str(t) for t in range(25)}
