"""The what-if replay on every lab capture: Kafka's assignors, given what the records say each rebalance
gave the real one, hand out what the real group got.

For each logical rebalance of a consumer group, the replay of the assignor the group used is compared with
the group's assignment after the rebalance, read from the generations table independently of the replay
(classic: the members' assignments; KIP-848: their targets, which the broker's assignor computed).

The lab's group leaders are librdkafka (range, roundrobin, cooperative-sticky) and kafka-python (sticky),
not the Java client (lab/member.py). Range and roundrobin are deterministic, and so is the broker's
uniform: the replay must give the very assignment. librdkafka's and kafka-python's sticky assignors are
ports that break ties their own way: the replay must move exactly as many partitions as they did (both are
as sticky as the memberships allow), and be the very assignment where no tie arose. (A KIP-848 what-if
counts moves between targets, where `rebalances` counts them when the members' current assignments carry
them out, often an epoch later: their move counts are not compared.)
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from pyspark.sql import functions as F

from lab.dump import parse_dump
from lab.scenarios import capture_folders
from tests.lab_tables import all_captures

STATIC_SCENARIO, STATIC_GROUP = "kip848-static", "kip848-static"
EXACT = {("classic", "range"), ("classic", "roundrobin"), ("consumer", "uniform"), ("consumer", "range")}
CLASSIC_ASSIGNORS = {"range", "roundrobin", "sticky", "cooperative-sticky"}


def _real_assignments(lab) -> dict[tuple, set]:
    """(cluster, group, incarnation, generation) -> {(member_key, topic, partition)} from gold generations."""
    gens = lab["generations"].select(
        "cluster", "group_id", "incarnation", "generation", "group_protocol", F.explode("members").alias("m")
    )
    held = F.when(F.col("group_protocol") == "consumer", F.col("m.target_partitions")).otherwise(
        F.col("m.assigned_partitions")
    )
    rows = gens.select(
        "cluster",
        "group_id",
        "incarnation",
        "generation",
        F.coalesce("m.group_instance_id", "m.member_id").alias("member_key"),
        F.explode(F.coalesce(held, F.array())).alias("tp"),
    ).select("*", F.explode("tp.partitions").alias("partition"))
    real = defaultdict(set)
    for row in rows.collect():
        key = (row.cluster, row.group_id, row.incarnation, row.generation)
        real[key].add((row.member_key, row.tp.topic, row.partition))
    return real


@pytest.fixture(scope="module")
def replayed(lab):
    return lab["rebalance_whatif"].collect()


def test_the_real_assignor_replayed_gives_what_the_group_got(lab, replayed):
    real = _real_assignments(lab)
    outcomes = Counter()
    for row in (row for row in replayed if row.is_actual_assignor):
        key = (row.cluster, row.group_id, row.incarnation, row.generation)
        got = {(p.member_key, p.topic, p.partition) for p in row.assignment}
        same = got == real[key]
        assert same == row.is_same_as_actual, key
        if (row.group_protocol, row.assignor) in EXACT:
            assert same, f"{key} {row.assignor}: replayed {sorted(got)}, real {sorted(real[key])}"
        if row.group_protocol == "classic":  # KIP-848 what-ifs count targets; rebalances, ownership
            assert row.moved_partition_count == row.actual_moved_partition_count, (key, row.assignor)
        outcomes[(row.group_protocol, row.assignor, same)] += 1
    # every assignor the lab ran is compared, over every capture
    assert {(protocol, name) for protocol, name, _ in outcomes} == {
        ("classic", "range"),
        ("classic", "roundrobin"),
        ("classic", "sticky"),
        ("classic", "cooperative-sticky"),
        ("consumer", "uniform"),
    }
    assert sum(outcomes.values()) >= 100 and outcomes[("classic", "sticky", True)] > 0
    assert outcomes[("classic", "cooperative-sticky", True)] > 0


def test_every_consumer_group_rebalance_is_replayed_by_each_of_its_protocols_assignors(lab, replayed):
    per_rebalance = defaultdict(set)
    for row in replayed:
        per_rebalance[(row.cluster, row.group_id, row.incarnation, row.generation, row.group_protocol)].add(
            row.assignor
        )
    assert {key[-1] for key in per_rebalance} == {"classic", "consumer"}
    for key, names in per_rebalance.items():
        assert names == (CLASSIC_ASSIGNORS if key[-1] == "classic" else {"uniform", "range"}), key
    replayed_scenarios = {"range", "roundrobin", "sticky", "cooperative-sticky", "kip848", "kip848-handover"}
    expected = {capture.cluster for capture in all_captures() if capture.path.name in replayed_scenarios}
    assert expected <= {key[0] for key in per_rebalance}


def test_cooperative_sticky_revokes_only_partitions_that_move(replayed):
    cooperative = [row for row in replayed if row.assignor == "cooperative-sticky"]
    assert any(row.round_count == 2 for row in cooperative)
    for row in cooperative:
        assert row.revoked_partition_count <= row.moved_partition_count and not row.is_eager
        assert row.round_count == (2 if row.revoked_partition_count else 1)


def coordinator_targets(dump_text: str, group: str) -> dict[int, set]:
    """assignment epoch -> {(member_key, topic, partition)}: the target assignment the coordinator wrote
    for each epoch (the type 7 records standing at that epoch's type 6), read from Kafka's own decode.
    member_key is a static member's instance id (its type 5), else its member id. The group subscribes
    to one topic: the one topic id its targets name is that topic's."""
    records = [r for r in parse_dump(dump_text) if r.get("key", {}).get("groupId") == group]
    subscriptions = {r["key"]["memberId"]: r["value"] for r in records if r["type"] == 5 and r["value"]}
    keys = {member: value["instanceId"] or member for member, value in subscriptions.items()}
    (topic,) = {name for value in subscriptions.values() for name in value["subscribedTopicNames"]}
    topic_ids, standing, targets = set(), {}, {}
    for r in records:
        if r["type"] == 7:
            standing.pop(r["key"]["memberId"], None)
            if r["value"]:
                standing[r["key"]["memberId"]] = r["value"]["topicPartitions"]
        elif r["type"] == 6 and r["value"]:
            held = [(member, tp) for member, parts in standing.items() for tp in parts]
            topic_ids |= {tp["topicId"] for _, tp in held}
            targets[r["value"]["assignmentEpoch"]] = {
                (keys[member], topic, partition) for member, tp in held for partition in tp["partitions"]
            }
    assert len(topic_ids) == 1, topic_ids
    return targets


STATIC_CAPTURES = [capture for capture in all_captures() if capture.path.name == STATIC_SCENARIO]


def test_uniform_replayed_for_static_members_is_the_coordinators_own_target(replayed):
    """A real coordinator's uniform assignor sees static members under their member ids (a restarted
    one under its new id): the replay must hand out, epoch by epoch, member by member, the very target
    the coordinator wrote (issue 69 §1)."""
    assert {capture.path.parent.name for capture in STATIC_CAPTURES} == capture_folders(STATIC_SCENARIO)
    for capture in STATIC_CAPTURES:
        targets = coordinator_targets((capture.path / "dump-offsets.txt").read_text(), STATIC_GROUP)
        rows = {
            row.generation: row
            for row in replayed
            if row.cluster == capture.cluster and row.group_id == STATIC_GROUP and row.assignor == "uniform"
        }
        # every epoch whose target has members is a rebalance the replay saw
        assert set(rows) == {epoch for epoch, target in targets.items() if target}, capture.cluster
        for epoch, row in sorted(rows.items()):
            got = {(p.member_key, p.topic, p.partition) for p in row.assignment}
            assert got == targets[epoch], f"{capture.cluster} epoch {epoch}"
            assert row.is_same_as_actual and row.is_actual_assignor, f"{capture.cluster} epoch {epoch}"
        static_members = {key for target in targets.values() for key, _, _ in target if key.startswith("static-")}
        assert static_members == {"static-1", "static-2", "static-3"}, capture.cluster
