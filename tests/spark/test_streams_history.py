"""The gold history of the lab's streams groups (KIP-1071) equals what Kafka and the lab's own instances saw.

Two independent oracles, on the streams captures of 4.2.1, 4.3.1 and 4.4.0 (the `lab` fixture has run them through
the history builder with every other capture):
- `kafka-streams-groups --describe --members --verbose --all-groups`, taken at the end of the scenario.
  The capture's describe-members.txt is kafka-consumer-groups' (empty: a streams group is not a consumer
  group), so the streams tool's output is the one the scenario recorded (event streams_groups_described).
  The last generation of every live streams group holds exactly its members, with every column the tool
  prints: member id, protocol, client id and active tasks (current and target) from `generations`; the
  member epoch, process id, topology epoch and standby / warm-up tasks from `streams_members`;
- the instances' own logs (scenario.json): each placement they all reported (`streams_placement`) is one
  logical rebalance, whose causes are what the lab did in between (an instance started, closed, was
  killed) and whose moves are the active tasks that changed hands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest
from pyspark.sql import functions as F

from lab.dump import parse_dump
from lab.scenarios import capture_folders
from schemas import ops
from tests.lab_tables import Capture, all_captures
from transforms.gold import renamed_topics
from transforms.gold.topic_names import topic_names

STREAMS_CAPTURES = [capture for capture in all_captures() if capture.path.name == "streams"]
MEMBERS_COLUMNS = (
    "GROUP",
    "TARGET-ASSIGNMENT-EPOCH",
    "TOPOLOGY-EPOCH",
    "MEMBER",
    "MEMBER-PROTOCOL",
    "MEMBER-EPOCH",
    "PROCESS",
    "CLIENT-ID",
    "ASSIGNMENTS",
)
# StreamsGroupCommand prints each kind of task as `KIND: subtopology:[p,p]; ...` (kinds in upper case).
TASK_LABEL = re.compile(r"^([A-Z][A-Z-]*):$")
TASKS = re.compile(r"^([^:]+):\[([0-9,]*)\];?$")


def parse_assignments(tokens: list[str]) -> dict[str, dict[str, list[int]]]:
    """ASSIGNMENTS tokens -> {kind: {subtopology: partitions}}, kinds as printed (ACTIVE, TARGET-ACTIVE, ...)."""
    assignments: dict[str, dict[str, list[int]]] = {}
    kind = None
    for token in tokens:
        label, tasks = TASK_LABEL.match(token), TASKS.match(token)
        if label:
            kind = label.group(1)
            assignments[kind] = {}
        else:
            assert kind is not None and tasks, f"unexpected assignment token: {token!r}"
            assignments[kind][tasks.group(1)] = sorted(int(p) for p in filter(None, tasks.group(2).split(",")))
    return assignments


def parse_members(text: str) -> dict[tuple[str, str], tuple]:
    """(group, member id) -> (target assignment epoch, topology epoch, protocol, member epoch, process,
    client id, {kind: {subtopology: partitions}})."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or tuple(fields) == MEMBERS_COLUMNS:
            continue
        assert len(fields) >= len(MEMBERS_COLUMNS) - 1, f"unexpected line: {line!r}"
        group, target_epoch, topology_epoch, member_id, protocol, epoch, process, client_id, *tasks = fields
        rows[(group, member_id)] = (
            int(target_epoch),
            int(topology_epoch),
            protocol,
            int(epoch),
            process,
            client_id,
            parse_assignments(tasks),
        )
    return rows


def test_parse_members_reads_every_column_and_every_kind_of_task():
    text = (
        f"{'  '.join(MEMBERS_COLUMNS)}\n"
        "g  7  0  a  streams  6  p1  c1  ACTIVE: 0:[0,2]; 1:[1]; STANDBY: 1:[0]; TARGET-ACTIVE: 0:[0]; \n"
        "g  7  1  b  streams  7  p2  c2  ACTIVE: WARMUP: 0:[]; \n"
    )
    assert parse_members(text) == {
        ("g", "a"): (7, 0, "streams", 6, "p1", "c1",
                     {"ACTIVE": {"0": [0, 2], "1": [1]}, "STANDBY": {"1": [0]}, "TARGET-ACTIVE": {"0": [0]}}),
        ("g", "b"): (7, 1, "streams", 7, "p2", "c2", {"ACTIVE": {}, "WARMUP": {"0": []}}),
    }  # fmt: skip


def held(kinds: dict[str, dict[str, list[int]]]) -> dict[str, dict[str, list[int]]]:
    """The kinds of task a member holds any of: the tool leaves out a kind a member holds none of."""
    return {kind: tasks for kind, tasks in kinds.items() if any(tasks.values())}


def described(capture: Capture) -> str:
    (event,) = [e for e in capture.scenario["events"] if e["event"] == "streams_groups_described"]
    return event["output"]


def test_a_streams_capture_of_each_line_is_among_the_captures_and_describes_its_groups():
    assert {capture.path.parent.name for capture in STREAMS_CAPTURES} == capture_folders("streams")
    assert all(parse_members(described(capture)) for capture in STREAMS_CAPTURES)


def _tasks(tasks) -> dict[str, list[int]]:
    return {t.subtopology_id: list(t.partitions) for t in tasks}


def tables_members(lab, capture: Capture) -> dict[tuple[str, str], tuple]:
    """The same view from the tables: the members of each live streams group's last generation, their
    client and active tasks (current and target) from `generations`, the rest from `streams_members`."""
    last = (
        lab["generations"]
        .where((F.col("cluster") == F.lit(capture.cluster)) & (F.col("group_protocol") == F.lit("streams")))
        .groupBy("group_id")
        .agg(F.max_by(F.struct("state", "generation", "group_protocol", "members"), "source_offset").alias("last"))
        .where(F.col("last.state") != F.lit("deleted"))
        .select("group_id", "last.generation", "last.group_protocol", F.explode("last.members").alias("m"))
        .collect()
    )
    streams_members = {
        (r.group_id, r.generation, r.member_id): r
        for r in lab["streams_members"].where(F.col("cluster") == F.lit(capture.cluster)).collect()
    }
    members = {}
    for r in last:
        key = (r.group_id, r.m.member_id)
        assert {p.topic_name_source for p in r.m.assigned_partitions + r.m.target_partitions} <= {"subtopology"}
        member = streams_members[(r.group_id, r.generation, r.m.member_id)]
        kinds = {
            "ACTIVE": {p.topic: sorted(p.partitions) for p in r.m.assigned_partitions},
            "TARGET-ACTIVE": {p.topic: sorted(p.partitions) for p in r.m.target_partitions},
            "STANDBY": _tasks(member.standby_tasks),
            "WARMUP": _tasks(member.warmup_tasks),
        }
        # What the member owns is its active tasks: the same in both tables.
        assert _tasks(member.active_tasks) == kinds["ACTIVE"], key
        members[key] = (
            r.generation,
            member.topology_epoch,
            r.group_protocol,
            member.member_epoch,
            member.process_id,
            member.client_id,
            held(kinds),
        )
    return members


@pytest.mark.parametrize("capture", STREAMS_CAPTURES, ids=[c.cluster for c in STREAMS_CAPTURES])
def test_last_generation_equals_kafka_streams_groups_describe_members(lab, capture):
    kafka = {key: (*columns, held(kinds)) for key, (*columns, kinds) in parse_members(described(capture)).items()}
    assert tables_members(lab, capture) == kafka


@pytest.mark.parametrize("capture", STREAMS_CAPTURES, ids=[c.cluster for c in STREAMS_CAPTURES])
def test_current_assignments_equal_the_described_active_tasks(lab, capture):
    """generation_assignments' open rows (valid_until null) are the described members' active tasks."""
    wanted = {
        (group, subtopology, partition, member_id, client_id)
        for (group, member_id), (*_, client_id, kinds) in parse_members(described(capture)).items()
        for subtopology, partitions in kinds["ACTIVE"].items()
        for partition in partitions
    }
    rows = (
        lab["generation_assignments"]
        .where((F.col("cluster") == F.lit(capture.cluster)) & F.col("valid_until").isNull())
        .where(F.col("group_protocol") == F.lit("streams"))
        .collect()
    )
    assert {(r.group_id, r.topic, r.partition, r.member_id, r.client_id) for r in rows} == wanted


@dataclass
class Placement:
    """Where every instance's tasks were once the group settled, as the instances reported them."""

    index: int  # position in scenario.json's events: the driver's own order
    active: set[tuple[str, str]]  # (task, instance), a task as Kafka Streams names it: subtopology_partition
    standby: set[tuple[str, str]]
    members: set[str]
    causes: set[str] = field(default_factory=set)


CAUSE_OF_EVENT = {  # the lab's instance events -> the cause a rebalance after them must show
    "streams_instance_started": "member_joined",
    "streams_closed": "member_left_cleanly",
    "streams_instance_killed": "member_left_after_timeout",
    "source_topic_grown": "partitions_added",  # a new task in a subtopology the group already ran
}


def placements(capture: Capture, group: str) -> list[Placement]:
    """The instances' settled placements of `group`, each with what the lab did since the one before; and,
    where Kafka wrote a target-assignment epoch for the group once the lab had stopped its last instance,
    that empty placement too (see `emptied_at`)."""
    events = capture.scenario["events"]
    states = [
        Placement(
            index,
            {(task, m) for m, tasks in event["placement"].items() for task in tasks["active"]},
            {(task, m) for m, tasks in event["placement"].items() for task in tasks["standby"]},
            set(event["placement"]),
        )
        for index, event in enumerate(events)
        if event["event"] == "streams_placement" and event["group"] == group
    ]
    if (index := emptied_at(capture, group)) is not None:
        states.append(Placement(index, set(), set(), set()))
    for before, after in pairs(states):
        previous = before.members if before else set()
        for event in events[(before.index if before else -1) + 1 : after.index]:
            cause = CAUSE_OF_EVENT.get(event["event"]) if event.get("group") == group else None
            is_join, member = cause == "member_joined", event.get("member")
            by_member = member not in previous if is_join else member in previous
            if cause and (cause == "partitions_added" or by_member):
                after.causes.add(cause)
        if previous and not after.members:
            after.causes.add("group_emptied")
    return states


def emptied_at(capture: Capture, group: str) -> int | None:
    """Just past the lab's stop of the group's last instance (its closed or killed event), when Kafka's own
    decode shows a target-assignment epoch (type 20) of the group written after that stop began: Kafka 4.4
    writes one for the emptied group, 4.2 and 4.3 bump only the group epoch (type 17)."""
    events, running, stopped = capture.scenario["events"], set(), None
    for index, event in enumerate(events):
        if event.get("group") != group:
            continue
        if event["event"] == "streams_instance_started":
            running.add(event["member"])
        elif event["event"] in ("streams_closing", "streams_instance_killed") and event["member"] in running:
            running.discard(event["member"])
            stopped = (event["at_ms"], event["member"]) if not running else None
        if (
            stopped
            and event["event"] in ("streams_closed", "streams_instance_killed")
            and event["member"] == stopped[1]
        ):
            targets = [
                r for r in parse_dump((capture.path / "dump-offsets.txt").read_text())
                if r.get("type") == 20 and r["key"].get("groupId") == group and r["value"] is not None
            ]  # fmt: skip
            return index + 1 if any(r["at_ms"] >= stopped[0] for r in targets) else None
    return None


def pairs(history: list[Placement]) -> list[tuple[Placement | None, Placement]]:
    return list(zip([None, *history[:-1]], history, strict=True))


def moved(before: Placement | None, after: Placement) -> set[tuple[str, str, str]]:
    """(task, from, to) for active tasks held before and after by different instances."""
    previous = dict(before.active) if before else {}
    return {(t, previous[t], m) for t, m in after.active if t in previous and previous[t] != m}


def moved_standby(before: Placement | None, after: Placement) -> int:
    """Standby replicas that changed instance: per task, the instances that lost one paired with those
    that gained one (a task has as many standby replicas as `streams.num.standby.replicas`)."""
    previous = before.standby if before else set()
    tasks = {task for task, _ in previous | after.standby}
    return sum(
        min(
            len({m for t, m in previous - after.standby if t == task}),
            len({m for t, m in after.standby - previous if t == task}),
        )
        for task in tasks
    )


def instance(client_id: str) -> str:
    """The lab names each instance's client id after it: s1 -> s1-StreamThread-1-consumer."""
    return client_id.split("-StreamThread-")[0]


CASES = [
    (capture, group)
    for capture in STREAMS_CAPTURES
    for group in sorted({e["group"] for e in capture.scenario["events"] if e["event"] == "streams_placement"})
]


def _rebalances(lab, capture: Capture, group: str) -> list:
    return (
        lab["rebalances"]
        .where((F.col("cluster") == F.lit(capture.cluster)) & (F.col("group_id") == F.lit(group)))
        .orderBy("completed_at")
        .collect()
    )


@pytest.mark.parametrize(("capture", "group"), CASES, ids=[f"{c.cluster}:{g}" for c, g in CASES])
def test_streams_rebalances_equal_what_the_instances_saw(lab, capture, group):
    expected = placements(capture, group)
    rows = _rebalances(lab, capture, group)
    observed = [(r.member_count_after, sorted(r.causes), r.moved_partition_count) for r in rows]
    assert observed == [(len(s.members), sorted(s.causes), len(moved(b, s))) for b, s in pairs(expected)]
    for row in rows:
        assert (row.group_protocol, row.rebalance_protocol) == ("streams", "streams")


@pytest.mark.parametrize(("capture", "group"), CASES, ids=[f"{c.cluster}:{g}" for c, g in CASES])
def test_standby_task_moves_are_counted_apart_from_active_moves(lab, capture, group):
    """Each rebalance's moved_standby_task_count is the standby replicas that changed instance between the
    placements the instances reported; the active moves stay in moved_partition_count."""
    expected = placements(capture, group)
    rows = _rebalances(lab, capture, group)
    wanted = [moved_standby(before, after) for before, after in pairs(expected)]
    assert [row.moved_standby_task_count for row in rows] == wanted


@pytest.mark.parametrize("capture", STREAMS_CAPTURES, ids=[c.cluster for c in STREAMS_CAPTURES])
def test_each_capture_moves_standby_replicas(capture):
    """The scenario's joins and departures move standby replicas, so the counts above can fail."""
    moves = [
        moved_standby(b, a)
        for group in {g for c, g in CASES if c == capture}
        for b, a in pairs(placements(capture, group))
    ]
    assert sum(moves) > 0


@pytest.mark.parametrize(("capture", "group"), CASES, ids=[f"{c.cluster}:{g}" for c, g in CASES])
def test_each_generation_holds_the_active_tasks_the_instances_reported(lab, capture, group):
    """Ownership is each member's current assignment: every rebalance's generation holds, member by member,
    the active tasks the instances reported running once it settled."""
    generations = {
        r.generation: r.members
        for r in lab["generations"]
        .where((F.col("cluster") == F.lit(capture.cluster)) & (F.col("group_id") == F.lit(group)))
        .collect()
    }
    for row, state in zip(_rebalances(lab, capture, group), placements(capture, group), strict=True):
        held_tasks = {
            (f"{p.topic}_{partition}", instance(m.client_id))
            for m in generations[row.generation]
            for p in m.assigned_partitions
            for partition in p.partitions
        }
        assert held_tasks == state.active


@pytest.mark.parametrize(("capture", "group"), CASES, ids=[f"{c.cluster}:{g}" for c, g in CASES])
def test_active_task_movements_name_the_instances_that_saw_them(lab, capture, group):
    expected = placements(capture, group)
    rows = _rebalances(lab, capture, group)
    wanted = {
        (row.generation, *move)
        for row, (before, after) in zip(rows, pairs(expected), strict=True)
        for move in moved(before, after)
    }
    movements = (
        lab["partition_movements"]
        .where((F.col("cluster") == F.lit(capture.cluster)) & (F.col("group_id") == F.lit(group)))
        .collect()
    )
    observed = {
        (r.generation, f"{r.topic}_{r.partition}", instance(r.from_client_id), instance(r.to_client_id))
        for r in movements
    }
    assert observed == wanted


def test_a_streams_group_is_not_rebuilt_for_its_subtopologies(spark, lab):
    """No id map names a subtopology: a streams group's history must not count as renamed every night."""
    cluster = F.col("cluster") == F.lit(STREAMS_CAPTURES[0].cluster)
    generations = lab["generations"].where(cluster & (F.col("group_protocol") == F.lit("streams")))
    assert generations.where(F.size("members") > 0).count() > 0
    no_topic_ids = spark.createDataFrame([], ops.topic_ids_schema)
    names = topic_names(lab["consumer_group_records"], lab["offset_commits"], no_topic_ids)
    assert renamed_topics.groups_with_renamed_topics(generations, names).collect() == []


def test_only_streams_rebalances_count_standby_moves(lab):
    by_protocol = {
        (r.group_protocol, r.moved_standby_task_count is None)
        for r in lab["rebalances"].select("group_protocol", "moved_standby_task_count").collect()
    }
    assert ("streams", False) in by_protocol and ("classic", True) in by_protocol
    assert ("streams", True) not in by_protocol and ("classic", False) not in by_protocol
