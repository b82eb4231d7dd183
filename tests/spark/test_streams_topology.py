"""A streams application redeployed with a changed topology, as Kafka's tool and the instances themselves saw
it, and the history of the group that came back (issue 69 §4).

The streams-topology captures (lab/scenarios/streams_topology.py, Kafka 4.2.1, 4.3.1 and 4.4.0, the
application of each line) run one application through a change of processing (t1 -> t1-lower, the same
subtopologies), a changed topology that the broker refuses (t3) and the redeploy Kafka prescribes: the
group deleted, the instances started again with the changed topology (r1, r2). Two oracles, as in
test_streams_history.py: `kafka-streams-groups --describe --members --verbose` after each step, and each
instance's own log (its topology as it describes it when it starts, its errors, its tasks).
"""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from lab.scenarios.streams_topology import GROUP, REFUSED
from tests.lab_tables import Capture, all_captures
from tests.spark.test_streams_history import instance, parse_members, tables_members

CAPTURES = [capture for capture in all_captures() if capture.path.name == "streams-topology"]
per_capture = pytest.mark.parametrize("capture", CAPTURES, ids=[c.cluster for c in CAPTURES])


def events(capture: Capture, name: str) -> list[dict]:
    return [event for event in capture.scenario["events"] if event["event"] == name]


def described(capture: Capture) -> dict[str, dict]:
    """Each step's `kafka-streams-groups --describe --members --verbose` of the group, parsed."""
    return {event["step"]: parse_members(event["output"]) for event in events(capture, "streams_group_described")}


def instance_topologies(capture: Capture) -> dict[str, str]:
    """Instance -> its topology as it described it when it started: each subtopology's source topics."""
    return {e["member"]: json.dumps(e["source_topics"], sort_keys=True) for e in events(capture, "streams_starting")}


def subtopologies(members: dict) -> set[str]:
    """The subtopologies of the tasks the described members run (active, standby, warm-up)."""
    return {subtopology for *_, kinds in members.values() for tasks in kinds.values() for subtopology in tasks}


@per_capture
def test_kafka_kept_the_topology_epoch_and_the_instances_saw_why(capture):
    """Kafka Streams sends topology epoch 0: the topology changes with the group, its epoch does not; the
    refused instance's own callback names the broker's reason, and the processing change is no change to
    the broker (the instance describes the same subtopologies and topics)."""
    steps = described(capture)
    assert list(steps) == ["stateless", "processing_changed", "topology_refused", "redeployed"]
    assert {topology_epoch for members in steps.values() for _, topology_epoch, *_ in members.values()} == {0}
    assert [subtopologies(members) for members in steps.values()] == [{"0"}, {"0"}, {"0"}, {"0", "1"}]
    (error,) = [e for e in events(capture, "streams_uncaught_error") if e["member"] == "t3"]
    assert any(REFUSED in cause["message"] for cause in error["causes"])
    topologies = instance_topologies(capture)
    assert topologies["t1"] == topologies["t1-lower"] != topologies["t3"] == topologies["r1"]


@per_capture
def test_the_redeployed_group_equals_kafka_streams_groups_describe(lab, capture):
    """The redeployed group's last generation, member by member. Its counting topology has standby tasks,
    so the tool prints their target too (TARGET-STANDBY), which no table holds: the group is settled, so
    it equals STANDBY, and is left out of the comparison."""
    kafka = {}
    for key, (*columns, kinds) in described(capture)["redeployed"].items():
        assert kinds.pop("TARGET-STANDBY") == kinds["STANDBY"]
        kafka[key] = (*columns, {kind: tasks for kind, tasks in kinds.items() if any(tasks.values())})
    assert tables_members(lab, capture) == kafka


def _of_group(table, capture: Capture):
    return table.where((F.col("cluster") == F.lit(capture.cluster)) & (F.col("group_id") == F.lit(GROUP)))


@per_capture
def test_one_rebalance_runs_a_changed_topology_the_first_after_the_deletion(lab, capture):
    """The rebalances whose members run another topology than those of the last rebalance before them
    with members, by the instances' own description: exactly one, the first of the group that came back
    under the same id after the deletion, and the one whose causes name `topology_changed` (issue 69 §4).
    The refused t3 is in no generation."""
    members = {
        (r.incarnation, r.generation): {instance(m.client_id) for m in r.members}
        for r in _of_group(lab["generations"], capture).collect()
    }
    topologies, previous, changed, named = instance_topologies(capture), None, [], []
    for row in _of_group(lab["rebalances"], capture).orderBy("completed_at").collect():
        names = members[(row.incarnation, row.generation)]
        running = {topologies[name] for name in names}
        assert len(running) <= 1, f"instances of two topologies in one generation: {running}"
        if running and previous is not None and running != previous:
            changed.append((row.incarnation, row.previous_generation, sorted(names)))
        if "topology_changed" in row.causes:
            named.append((row.incarnation, row.previous_generation, sorted(names)))
        previous = running or previous
    assert changed == named == [(1, None, ["r1"])]
    assert "t3" not in set().union(*members.values())
