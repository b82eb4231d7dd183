"""The what-if replay against Kafka's assignors as Kafka's own members and leader run them.

Random memberships (seeded): classic groups of 2-4 topics and 2-7 members, dynamic and static (a static
member may come back under a new member id), some subscribed to nothing, topics that no one or several
members subscribe to, under each of the four client assignors; KIP-848 groups the same under the
coordinator's uniform and range. Each goes through the job's own path (gold generations and rebalances ->
whatif_inputs -> jvm/assignors -> rebalance_whatif) and through tests/oracles/GroupLeaders.java, written
apart: per-member assignor instances, subscriptions through ConsumerProtocol's bytes, a GroupSubscription
keyed by member id. Every assignment, round and revocation and every derived count must agree.
"""

from __future__ import annotations

import base64
import json
import random
import subprocess
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructType, TimestampType

from jobs.assignor_replay import JARS, _java, replay_assignors
from schemas import gold
from schemas.columns import column
from transforms.gold import whatif, whatif_inputs
from transforms.gold.whatif import EAGER_ASSIGNORS

CLASSIC_ASSIGNORS = ("cooperative-sticky", "range", "roundrobin", "sticky")
SERVER_ASSIGNORS = ("range", "uniform")
CLASSIC_GROUPS, CONSUMER_GROUPS = 1000, 250
PREVIOUS, CURRENT = 5, 6
AT = datetime(2026, 12, 1, tzinfo=UTC)
ORACLE = Path(__file__).resolve().parents[1] / "oracles" / "GroupLeaders.java"

GENERATIONS = StructType(
    [
        column("cluster", StringType()),
        column("group_id", StringType()),
        column("incarnation", IntegerType()),
        column("generation", IntegerType()),
        column("protocol_type", StringType()),
        column("members", ArrayType(gold.MEMBER)),
    ]
)
REBALANCES = StructType(
    [
        column("cluster", StringType()),
        column("group_id", StringType()),
        column("incarnation", IntegerType()),
        column("generation", IntegerType()),
        column("previous_generation", IntegerType()),
        column("group_protocol", StringType()),
        column("completed_at", TimestampType()),
        column("rebalance_protocol", StringType()),
        column("assignor", StringType()),
        column("minimal_moves", IntegerType()),
        column("minimal_moves_method", StringType()),
        column("estimated_pause_ms", LongType()),
        column("moved_partition_count", IntegerType()),
    ]
)


def _topic_id(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")


def _membership(rng: random.Random, index: int, protocol: str) -> dict:
    """One rebalance: topics, the members before with what each held, and the members after."""
    topics = {f"t{n}": (rng.randint(1, 8), _topic_id(rng)) for n in range(rng.randint(2, 4))}
    names = list(topics)
    is_static = rng.random() < 0.5

    def subscription() -> list[str]:
        return [] if rng.random() < 0.08 else sorted(rng.sample(names, rng.randint(1, len(names))))

    def new_member(n: int) -> dict:
        instance = f"i{n}" if is_static and rng.random() < 0.8 else None
        return {"member_id": f"m{index}-{n}-{rng.randrange(10**6)}", "instance_id": instance, "topics": subscription()}

    before = [new_member(n) for n in range(rng.randint(1, 6))]
    owned = {member["member_id"]: [] for member in before}
    for topic, (count, _) in topics.items():
        subscribers = [m["member_id"] for m in before if topic in m["topics"]]
        for partition in range(count):
            if subscribers and rng.random() < 0.95:
                owned[rng.choice(subscribers)].append((topic, partition))
    after = []
    for member in before:
        if rng.random() < 0.3:
            continue
        stayed = dict(member, owned=owned[member["member_id"]])
        if member["instance_id"] and rng.random() < 0.5:
            stayed["member_id"] = f"{member['member_id']}-restarted"
        if rng.random() < 0.2:
            stayed["topics"] = subscription()
        after.append(stayed)
    after += [dict(new_member(n), owned=None) for n in range(6, 6 + rng.randint(0 if after else 1, 3))]
    assignors = SERVER_ASSIGNORS if protocol == "consumer" else CLASSIC_ASSIGNORS
    return {
        "group_id": f"g{index}",
        "group_protocol": protocol,
        "assignor": rng.choice(assignors),
        "topics": topics,
        "before": before,
        "owned": owned,
        "after": after,
        "leader": rng.choice(after)["member_id"],
    }


def _oracle_line(group: dict) -> str:
    return json.dumps(
        {
            "key": group["group_id"],
            "group_protocol": group["group_protocol"],
            "group_id": group["group_id"],
            "leader": group["leader"],
            "previous_generation": PREVIOUS,
            "topics": [
                {"topic": name, "partition_count": count, "topic_id": topic_id}
                for name, (count, topic_id) in group["topics"].items()
            ],
            "members": [
                {
                    "member_id": member["member_id"],
                    "instance_id": member["instance_id"],
                    "rack_id": None,
                    "topics": member["topics"],
                    "owned": None
                    if member["owned"] is None
                    else [{"topic": topic, "partition": partition} for topic, partition in member["owned"]],
                }
                for member in group["after"]
            ],
        }
    )


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> dict:
    """(group_id, assignor) -> the oracle's result, for every random group."""
    classes = tmp_path_factory.mktemp("oracle")
    javac = Path(_java()).with_name("javac")
    subprocess.run(
        [str(javac), "-nowarn", "--release", "17", "-cp", f"{JARS}/*", "-d", str(classes), str(ORACLE)], check=True
    )
    done = subprocess.run(
        [
            _java(),
            "-cp",
            f"{classes}:{JARS}/*",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
            "oracles.GroupLeaders",
        ],
        input="\n".join(_oracle_line(group) for group in GROUPS),
        capture_output=True,
        text=True,
        check=True,
    )
    results = [json.loads(line) for line in done.stdout.splitlines()]
    return {(result["key"], result["assignor"]): result for result in results}


rng = random.Random(20261207)
GROUPS = [_membership(rng, n, "classic") for n in range(CLASSIC_GROUPS)] + [
    _membership(rng, n, "consumer") for n in range(CLASSIC_GROUPS, CLASSIC_GROUPS + CONSUMER_GROUPS)
]


def _member_key(member: dict) -> str:
    return member["instance_id"] or member["member_id"]


def _assigned(group: dict, partitions: list[tuple[str, int]]) -> list[dict]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return [
        {"topic": topic, "partitions": sorted(numbers), "topic_id": group["topics"][topic][1]}
        for topic, numbers in sorted(by_topic.items())
    ]


def _gold_member(group: dict, member: dict, partitions: list[tuple[str, int]]) -> dict:
    held = _assigned(group, partitions)
    is_consumer = group["group_protocol"] == "consumer"
    return {
        "member_id": member["member_id"],
        "group_instance_id": member["instance_id"],
        "subscribed_topics": member["topics"],
        "assigned_partitions": held,
        "target_partitions": held if is_consumer else None,
    }


def _actual(group: dict, oracle: dict) -> dict[str, list[tuple[str, int]]]:
    """What the group got: its own assignor's answer, by member id."""
    result = oracle[(group["group_id"], group["assignor"])]
    got: dict[str, list[tuple[str, int]]] = {member["member_id"]: [] for member in group["after"]}
    for row in result["assignment"]:
        got[row["member_id"]].append((row["topic"], row["partition"]))
    return got


def _gold_frames(spark, oracle: dict):
    generations, rebalances = [], []
    for group in GROUPS:
        key = ("c", group["group_id"], 0)
        before = [_gold_member(group, m, group["owned"][m["member_id"]]) for m in group["before"]]
        actual = _actual(group, oracle)
        after = [_gold_member(group, m, actual[m["member_id"]]) for m in group["after"]]
        generations += [(*key, PREVIOUS, "consumer", before), (*key, CURRENT, "consumer", after)]
        protocol = group["group_protocol"]
        rebalance_protocol = "consumer" if protocol == "consumer" else "eager"
        rebalances.append(
            (*key, CURRENT, PREVIOUS, protocol, AT, rebalance_protocol, group["assignor"], 0, "exact", None, 0)
        )
    return spark.createDataFrame(generations, GENERATIONS), spark.createDataFrame(rebalances, REBALANCES)


@pytest.fixture(scope="module")
def replayed(spark, oracle) -> dict:
    """(group_id, assignor) -> (rebalance_whatif row, replayed row) of the job's own path."""
    generations, rebalances = _gold_frames(spark, oracle)
    inputs = whatif_inputs.replay_inputs(rebalances, generations).cache()
    assignments = replay_assignors(inputs)
    rows = whatif.rebalance_whatif(inputs, assignments, rebalances).collect()
    raw = assignments.collect()
    inputs.unpersist()
    by_key = {(r["group_id"], r["assignor"]): r for r in raw}
    return {(row["group_id"], row["assignor"]): (row, by_key[(row["group_id"], row["assignor"])]) for row in rows}


def _expected_counts(group: dict, assignor: str, oracle: dict) -> dict:
    """rebalance_whatif's counts, worked out here from the oracle's assignment."""
    result = oracle[(group["group_id"], assignor)]
    keys = {member["member_id"]: _member_key(member) for member in group["after"]}
    owner_before = {
        partition: _member_key(member)
        for member in group["before"]
        for partition in group["owned"][member["member_id"]]
    }
    owner_after = {(row["topic"], row["partition"]): keys[row["member_id"]] for row in result["assignment"]}
    held = Counter(owner_after.values())
    per_member = [held.get(_member_key(member), 0) for member in group["after"]]
    moved = sum(1 for p, key in owner_after.items() if p in owner_before and owner_before[p] != key)
    is_consumer = group["group_protocol"] == "consumer"
    still_owned = sum(len(member["owned"] or []) for member in group["after"])
    revoked = (
        moved
        if is_consumer
        else len(result["revoked"])
        if assignor == "cooperative-sticky"
        else still_owned
        if assignor in EAGER_ASSIGNORS
        else moved
    )
    actual = _actual(group, oracle)
    actual_rows = sorted((keys[m], t, p) for m, partitions in actual.items() for t, p in partitions)
    return {
        "round_count": result["round_count"],
        "member_count": len(group["after"]),
        "assigned_partition_count": len(owner_after),
        "moved_partition_count": moved,
        "newly_assigned_partition_count": sum(1 for p in owner_after if p not in owner_before),
        "unassigned_partition_count": sum(1 for p in owner_before if p not in owner_after),
        "revoked_partition_count": revoked,
        "idle_member_count": per_member.count(0),
        "skew": max(per_member) - min(per_member),
        "is_same_as_actual": sorted((keys[r["member_id"]], r["topic"], r["partition"]) for r in result["assignment"])
        == actual_rows,
    }


def _rows(result: dict, keys: dict[str, str]) -> list[tuple]:
    return sorted((keys[row["member_id"]], row["topic"], row["partition"]) for row in result)


def test_every_replayed_assignment_and_count_is_what_kafkas_members_and_leader_get(oracle, replayed):
    differences = []
    compared = Counter()
    for group in GROUPS:
        keys = {member["member_id"]: _member_key(member) for member in group["after"]}
        assignors = SERVER_ASSIGNORS if group["group_protocol"] == "consumer" else CLASSIC_ASSIGNORS
        for assignor in assignors:
            expected = oracle[(group["group_id"], assignor)]
            counts = _expected_counts(group, assignor, oracle)
            row, raw = replayed[(group["group_id"], assignor)]
            got = {
                "assignment": sorted((r["member_key"], r["topic"], r["partition"]) for r in raw["assignment"]),
                "revoked": sorted((r["member_key"], r["topic"], r["partition"]) for r in raw["revoked"]),
                **{name: row[name] for name in counts},
            }
            want = {
                "assignment": _rows(expected["assignment"], keys),
                "revoked": _rows(expected["revoked"], keys),
                **counts,
            }
            compared[(group["group_protocol"], assignor, any(m["instance_id"] for m in group["after"]))] += 1
            if got != want:
                differing = {name: (got[name], want[name]) for name in want if got[name] != want[name]}
                differences.append((group["group_id"], assignor, differing))
    assert not differences, f"{len(differences)} of {sum(compared.values())} differ, e.g. {differences[:3]}"
    # the memberships reached what they are for: both protocols, static groups, and the awkward members
    assert sum(compared.values()) == CLASSIC_GROUPS * 4 + CONSUMER_GROUPS * 2
    assert all(compared[(protocol, assignor, True)] > 50 for protocol, assignor, _ in compared)
    unsubscribed = sum(1 for group in GROUPS for member in group["after"] if not member["topics"])
    assert unsubscribed > 50
    restarted = sum(1 for group in GROUPS for member in group["after"] if member["member_id"].endswith("-restarted"))
    assert restarted > 100
