"""The assignors' result lines become rows once: the rows handed on are read back from where they are
held, not parsed again (from a list Spark ships inside each task) by every stage that reads them."""

from __future__ import annotations

import json

from jobs.assignor_replay import TASK_BYTES, lines_frame, replay_assignors
from tests.unit.test_assignor_replay import BEFORE, TOPICS, _member


def _input(generation: int) -> str:
    key = {"cluster": "c", "group_id": "g", "incarnation": 0, "generation": generation}
    members = [_member("C1"), _member("C2"), _member("C3")]
    return json.dumps({"key": key, "group_protocol": "classic", "group_id": "g", "topics": TOPICS, "members": members})


def _plan(rows) -> str:
    return rows._jdf.queryExecution().optimizedPlan().toString()


def test_replayed_rows_are_parsed_once_and_keyed_by_rebalance(spark):
    inputs = spark.createDataFrame([(_input(generation),) for generation in (1, 2)], "replay_json string")

    replayed = replay_assignors(inputs)

    assert "from_json" not in _plan(replayed)
    ranges = replayed.where("assignor = 'range'").orderBy("generation").collect()
    assert [(row["cluster"], row["group_id"], row["generation"]) for row in ranges] == [("c", "g", 1), ("c", "g", 2)]
    owners: dict[str, list[str]] = {}
    for partition in ranges[0]["assignment"]:
        owners.setdefault(partition["member_key"], []).append(f"{partition['topic'][0]}{partition['partition']}")
    assert owners == BEFORE["range"]


def test_many_result_lines_are_shipped_in_small_tasks(spark):
    """A from-scratch run's replay made two tasks of 48 MB, and serializing one took the 1 GiB driver heap."""
    lines = [json.dumps({"n": index, "pad": "x" * 1000}) for index in range(5000)]  # about 5 MB

    frame = lines_frame(spark, lines)

    assert frame.rdd.getNumPartitions() >= sum(map(len, lines)) // TASK_BYTES
    assert sorted(row["line"] for row in frame.collect()) == sorted(lines)
