"""The gold history of the lab's share groups (KIP-932) equals what Kafka and the lab's own clients saw.

Two independent oracles, on the share captures of 4.2.1, 4.3.1 and 4.4.0 (the `lab` fixture has run them through
the history builder with every other capture):
- `kafka-share-groups --describe --members` (describe-share-members.txt), taken at the end of the
  scenario: the last generation of every live share group holds exactly its members, with every column
  the tool prints (member id, host, client id, partition count, member epoch, assignment);
- the clients' own logs (scenario.json): each time the group settled (`share_group_stable`) is one
  logical rebalance, whose causes are what the lab did in between (a member started, closed, was killed;
  a topic deleted under the group), and whose moves are the partitions the clients saw change hands.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from pyspark.sql import functions as F

from lab.scenarios import capture_folders
from tests.lab_tables import Capture, all_captures
from transforms.gold import renamed_topics

SHARE_CAPTURES = [capture for capture in all_captures() if capture.path.name == "share"]
MEMBERS_COLUMNS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT")
RECORD_SHARE_CURRENT_ASSIGNMENT = 14


def parse_assignment(text: str) -> dict[str, list[int]]:
    """ShareGroupCommand's ASSIGNMENT: `topic:p,p` per topic, topics joined by ';' (empty when none)."""
    assignment = {}
    for entry in filter(None, text.split(";")):
        topic, partitions = entry.rsplit(":", 1)
        assignment[topic] = sorted(int(p) for p in partitions.split(","))
    return assignment


def parse_members(text: str) -> dict[tuple[str, str], tuple]:
    """(group, member id) -> (host, client id, #partitions, member epoch, {topic: partitions})."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or tuple(fields) == MEMBERS_COLUMNS:
            continue
        # An empty assignment prints as nothing: the row then has one field fewer.
        assert len(fields) in (len(MEMBERS_COLUMNS), len(MEMBERS_COLUMNS) - 1), f"unexpected line: {line!r}"
        group, member_id, host, client_id, count, epoch, *assignment = fields
        rows[(group, member_id)] = (host, client_id, int(count), int(epoch), parse_assignment("".join(assignment)))
    return rows


def test_parse_members_reads_every_column_and_an_empty_assignment():
    text = (
        "\nGROUP  CONSUMER-ID  HOST  CLIENT-ID  #PARTITIONS  MEMBER-EPOCH  ASSIGNMENT\n"
        "g  a  /10.0.0.1  c1  3  9  t:0,2;u:1\n"
        "g  b  /10.0.0.2  c2  0  4\n"
    )
    assert parse_members(text) == {
        ("g", "a"): ("/10.0.0.1", "c1", 3, 9, {"t": [0, 2], "u": [1]}),
        ("g", "b"): ("/10.0.0.2", "c2", 0, 4, {}),
    }


def test_a_share_capture_of_each_line_is_among_the_captures():
    assert {capture.path.parent.name for capture in SHARE_CAPTURES} == capture_folders("share")


def tables_members(lab, capture: Capture) -> dict[tuple[str, str], tuple]:
    """The same view from the tables: the members of each live share group's last generation; the member
    epoch is the member's latest current assignment (type 14) in silver."""
    cluster = F.col("cluster") == F.lit(capture.cluster)
    last = (
        lab["generations"]
        .where(cluster & (F.col("group_protocol") == F.lit("share")))
        .groupBy("group_id")
        .agg(F.max_by(F.struct("state", "members"), "source_offset").alias("last"))
        .where(F.col("last.state") != F.lit("deleted"))
        .select("group_id", F.explode("last.members").alias("m"))
        .withColumn("member_id", F.col("m.member_id"))
    )
    epochs_now = (
        lab["consumer_group_records"]
        .where(cluster & (F.col("record_type") == RECORD_SHARE_CURRENT_ASSIGNMENT) & ~F.col("is_tombstone"))
        .groupBy("group_id", "member_id")
        .agg(F.max_by("member_epoch", "source_offset").alias("member_epoch"))
    )
    rows = last.join(epochs_now, on=["group_id", "member_id"], how="left")
    members = {}
    for r in rows.collect():
        assignment = {p.topic: sorted(p.partitions) for p in r.m.assigned_partitions if p.partitions}
        count = sum(len(partitions) for partitions in assignment.values())
        members[(r.group_id, r.m.member_id)] = (r.m.client_host, r.m.client_id, count, r.member_epoch, assignment)
    return members


@pytest.mark.parametrize("capture", SHARE_CAPTURES, ids=[c.cluster for c in SHARE_CAPTURES])
def test_last_generation_equals_kafka_share_groups_describe_members(lab, capture):
    kafka = parse_members((capture.path / "describe-share-members.txt").read_text())
    assert kafka, "the capture's describe-share-members.txt lists no member"
    ours = tables_members(lab, capture)
    assert ours == kafka


@pytest.mark.parametrize("capture", SHARE_CAPTURES, ids=[c.cluster for c in SHARE_CAPTURES])
def test_current_assignments_equal_the_described_members(lab, capture):
    """generation_assignments' open rows (valid_until null) are what each described member holds."""
    kafka = parse_members((capture.path / "describe-share-members.txt").read_text())
    wanted = {
        (group, topic, partition, member_id, host, client_id)
        for (group, member_id), (host, client_id, _, _, assignment) in kafka.items()
        for topic, partitions in assignment.items()
        for partition in partitions
    }
    rows = (
        lab["generation_assignments"]
        .where((F.col("cluster") == F.lit(capture.cluster)) & F.col("valid_until").isNull())
        .where(F.col("group_protocol") == F.lit("share"))
        .collect()
    )
    assert {(r.group_id, r.topic, r.partition, r.member_id, r.client_host, r.client_id) for r in rows} == wanted


@dataclass
class Settled:
    """A share group's assignment when it settled, owners named by client id (the lab's member name)."""

    index: int  # position in scenario.json's events: the driver's own order
    owners: set[tuple[str, str]]  # (topic-partition, member)
    members: set[str]
    generation: int
    causes: set[str] = field(default_factory=set)


def settled_history(scenario: dict, group: str) -> list[Settled]:
    """The clients' settled states of `group`, each with what the lab did since the one before."""
    events = scenario["events"]
    states: list[Settled] = []
    epoch = None
    for index, event in enumerate(events):
        if event.get("group") != group:
            continue
        if event["event"] == "share_assignment":
            epoch = max(epoch or 0, event["assignment_epoch"])
        if event["event"] == "share_group_stable":
            owners = {(p, m) for m, partitions in event["assignment"].items() for p in partitions}
            states.append(Settled(index, owners, set(event["assignment"]), epoch))
        # Emptied by its last member's leave: a generation only where the line wrote the empty group a
        # target-assignment epoch of its own, as kafka-share-groups --describe --state printed it.
        if event["event"] == "share_group_empty" and states and event["assignment_epoch"] > states[-1].generation:
            states.append(Settled(index, set(), set(), event["assignment_epoch"]))
    for before, after in zip([None, *states[:-1]], states, strict=True):
        start = before.index if before else -1
        previous = before.members if before else set()
        owned_topics = {p.rsplit("-", 1)[0] for p, _ in (before.owners if before else set())}
        for event in events[start + 1 : after.index]:
            member, kind = event.get("member"), event["event"]
            if kind == "share_member_started" and event["group"] == group and member not in previous:
                after.causes.add("member_joined")
            elif kind == "share_closed" and event["group"] == group and member in previous:
                after.causes.add("member_left_cleanly")
            elif kind == "share_member_killed" and event["group"] == group and member in previous:
                after.causes.add("member_left_after_timeout")
            elif kind == "topic_deleted" and event["topic"] in owned_topics:
                after.causes.add("partitions_removed")
            elif kind == "partitions_added" and event["topic"] in owned_topics:
                after.causes.add("partitions_added")
        if previous and not after.members:
            after.causes.add("group_emptied")
    return states


def moved(before: Settled | None, after: Settled) -> set[tuple[str, str, str]]:
    """(partition, from, to) for partitions owned before and after by different members."""
    previous = dict(before.owners) if before else {}
    return {(p, previous[p], m) for p, m in after.owners if p in previous and previous[p] != m}


def skew(state: Settled) -> int | None:
    held = [sum(1 for _, owner in state.owners if owner == m) for m in state.members]
    return max(held) - min(held) if held else None  # no member: no skew


CASES = [
    (capture, group)
    for capture in SHARE_CAPTURES
    for group in sorted({e["group"] for e in capture.scenario["events"] if e["event"] == "share_group_stable"})
]


@pytest.mark.parametrize(("capture", "group"), CASES, ids=[f"{c.cluster}:{g}" for c, g in CASES])
def test_share_rebalances_equal_what_the_clients_saw(lab, capture, group):
    expected = settled_history(capture.scenario, group)
    rows = (
        lab["rebalances"]
        .where((F.col("cluster") == F.lit(capture.cluster)) & (F.col("group_id") == F.lit(group)))
        .orderBy("completed_at")
        .collect()
    )
    observed = [(r.generation, r.member_count_after, sorted(r.causes), r.moved_partition_count) for r in rows]
    wanted = [(s.generation, len(s.members), sorted(s.causes), len(moved(b, s))) for b, s in pairs(expected)]
    assert observed == wanted
    for row, (before, after) in zip(rows, pairs(expected), strict=True):
        assert (row.group_protocol, row.rebalance_protocol) == ("share", "share")
        newly = {p for p, _ in after.owners} - {p for p, _ in (before.owners if before else set())}
        assert row.newly_assigned_partition_count == len(newly)
        assert row.skew == skew(after)
        assert row.minimal_moves <= row.moved_partition_count


@pytest.mark.parametrize(("capture", "group"), CASES, ids=[f"{c.cluster}:{g}" for c, g in CASES])
def test_share_partition_movements_name_the_members_the_clients_saw(lab, capture, group):
    expected = settled_history(capture.scenario, group)
    wanted = {(after.generation, *move) for before, after in pairs(expected) for move in moved(before, after)}
    rows = (
        lab["partition_movements"]
        .where((F.col("cluster") == F.lit(capture.cluster)) & (F.col("group_id") == F.lit(group)))
        .collect()
    )
    assert {(r.generation, f"{r.topic}-{r.partition}", r.from_client_id, r.to_client_id) for r in rows} == wanted


def pairs(history: list[Settled]) -> list[tuple[Settled | None, Settled]]:
    return list(zip([None, *history[:-1]], history, strict=True))


def test_a_share_group_naming_a_topic_anew_is_touched(spark, lab):
    """A share group whose generations name a topic otherwise than the name map now does is rebuilt."""
    cluster = SHARE_CAPTURES[0].cluster
    generations = lab["generations"].where((F.col("cluster") == F.lit(cluster)) & (F.col("group_protocol") == "share"))
    topic_ids = (
        generations.select(F.explode("members").alias("m"))
        .select(F.explode("m.assigned_partitions.topic_id").alias("topic_id"))
        .distinct()
    )
    renamed = topic_ids.select(F.lit(cluster).alias("cluster"), "topic_id", F.lit("renamed").alias("topic"),
                               F.lit("user").alias("topic_name_source"))  # fmt: skip
    found = {r.group_id for r in renamed_topics.groups_with_renamed_topics(generations, renamed).collect()}
    assert found == {"share-lab", "share-lab-deleted"}
