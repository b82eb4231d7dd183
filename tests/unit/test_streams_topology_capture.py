"""What Kafka writes when a streams application comes back with a changed topology (lab/scenarios/
streams_topology.py on 4.2.1, 4.3.1 and 4.4.0), read from Kafka's own decode (dump-offsets.txt).

The group's topology (type 23) is written once per group: the first with t1's one subtopology, its
tombstone with the group's deletion, the second with r1's two subtopologies, both at topology epoch 0.
Nothing is written for t1-lower's changed processing (the broker is sent the same topology) nor for
the refused t3 (no record names its member). tests/spark/test_streams_topology.py checks the history's
`topology_changed` against these captures.
"""

from __future__ import annotations

import json

import pytest

from lab.dump import parse_dump
from lab.scenarios import capture_folders
from lab.scenarios.streams_topology import GROUP
from tests.conftest import REPO_ROOT

CAPTURES = sorted((REPO_ROOT / "tests" / "captures").glob("kafka-*/streams-topology"))
per_capture = pytest.mark.parametrize("capture", CAPTURES, ids=[path.parent.name for path in CAPTURES])
TYPE_STREAMS_MEMBER_METADATA, TYPE_STREAMS_TOPOLOGY = 19, 23


def test_there_is_a_topology_capture_of_every_line_the_scenario_runs_on():
    assert {path.parent.name for path in CAPTURES} == capture_folders("streams-topology")


def group_records(capture) -> list[dict]:
    records = parse_dump((capture / "dump-offsets.txt").read_text())
    return [r for r in records if r.get("type") is not None and r["key"].get("groupId") == GROUP]


@per_capture
def test_the_topology_is_written_once_per_group_and_tombstoned_with_it(capture):
    topologies = [r["value"] for r in group_records(capture) if int(r["type"]) == TYPE_STREAMS_TOPOLOGY]
    first, tombstone, second = topologies
    assert tombstone is None
    assert (first["epoch"], second["epoch"]) == (0, 0)
    sources = [{s["subtopologyId"]: s["sourceTopics"] for s in t["subtopologies"]} for t in (first, second)]
    assert sources == [{"0": ["events"]}, {"0": ["events"], "1": []}]  # 1 reads the repartition topic
    assert second["subtopologies"][0]["repartitionSinkTopics"] == [f"{GROUP}-by-word-repartition"]


@per_capture
def test_the_refused_instance_never_became_a_member(capture):
    clients = {
        r["value"]["clientId"].removesuffix("-StreamThread-1-consumer")
        for r in group_records(capture)
        if int(r["type"]) == TYPE_STREAMS_MEMBER_METADATA and r["value"] is not None
    }
    assert clients == {"t1", "t2", "t1-lower", "r1", "r2"}
    events = json.loads((capture / "scenario.json").read_text())["events"]
    assert any(e["event"] == "streams_uncaught_error" and e["member"] == "t3" for e in events)
