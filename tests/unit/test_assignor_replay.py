"""The what-if replay runs Kafka's own assignors (jvm/assignors, the pinned kafka-clients 4.2.1 and group
coordinator): the reference example, cooperative-sticky's two rounds and the broker's KIP-848 assignors.

The reference example: topics Order (7 partitions) and Stock (5), consumers C1-C3 subscribed to both;
then C3 crashes and C1, C2 rebalance, each remembering what it held.
"""

from __future__ import annotations

import json

from jobs.assignor_replay import replay_lines

TOPICS = [{"topic": "Order", "partition_count": 7}, {"topic": "Stock", "partition_count": 5}]


def _member(key: str, owned: list[str] = (), generation: int | None = None, topics=("Order", "Stock")) -> dict:
    partitions = [{"topic": "Order" if p[0] == "O" else "Stock", "partition": int(p[1:])} for p in owned]
    return {"member_key": key, "topics": list(topics), "generation": generation, "owned": partitions}


def _replay(members: list[dict], protocol: str = "classic", topics=TOPICS) -> dict[str, dict]:
    line = {"key": {"group_id": "g"}, "group_protocol": protocol, "group_id": "g", "topics": topics, "members": members}
    results = {}
    for text in replay_lines([json.dumps(line)]):
        result = json.loads(text)
        owners: dict[str, list[str]] = {}
        for row in result["assignment"]:
            owners.setdefault(row["member_key"], []).append(f"{row['topic'][0]}{row['partition']}")
        result["owners"] = owners
        results[result["assignor"]] = result
    return results


BEFORE = {
    "range": {"C1": ["O0", "O1", "O2", "S0", "S1"], "C2": ["O3", "O4", "S2", "S3"], "C3": ["O5", "O6", "S4"]},
    "roundrobin": {"C1": ["O0", "O3", "O6", "S2"], "C2": ["O1", "O4", "S0", "S3"], "C3": ["O2", "O5", "S1", "S4"]},
    "sticky": {"C1": ["O0", "O3", "O6", "S2"], "C2": ["O1", "O4", "S0", "S3"], "C3": ["O2", "O5", "S1", "S4"]},
}
AFTER_C3_CRASHED = {
    "range": {"C1": ["O0", "O1", "O2", "O3", "S0", "S1", "S2"], "C2": ["O4", "O5", "O6", "S3", "S4"]},
    "roundrobin": {"C1": ["O0", "O2", "O4", "O6", "S1", "S3"], "C2": ["O1", "O3", "O5", "S0", "S2", "S4"]},
    # sticky keeps what C1 and C2 held and shares C3's four partitions out two and two
    "sticky": {"C1": ["O0", "O2", "O3", "O6", "S1", "S2"], "C2": ["O1", "O4", "O5", "S0", "S3", "S4"]},
}


def test_reference_example_before_the_crash():
    replayed = _replay([_member("C1"), _member("C2"), _member("C3")])
    assert {name: replayed[name]["owners"] for name in BEFORE} == BEFORE
    assert all(replayed[name]["round_count"] == 1 for name in BEFORE)


def test_reference_example_after_c3_crashes_each_assignor_from_its_own_assignment():
    for name, expected in AFTER_C3_CRASHED.items():
        before = BEFORE[name]
        replayed = _replay([_member("C1", before["C1"], 1), _member("C2", before["C2"], 1)])
        assert replayed[name]["owners"] == expected, name
    sticky = AFTER_C3_CRASHED["sticky"]
    assert set(BEFORE["sticky"]["C1"]) < set(sticky["C1"]) and set(BEFORE["sticky"]["C2"]) < set(sticky["C2"])


def test_cooperative_sticky_revokes_in_a_first_round_what_the_second_hands_to_the_newcomer():
    held = {"C1": ["O0", "O1", "O2", "O3", "S0", "S1"], "C2": ["O4", "O5", "O6", "S2", "S3", "S4"]}
    replayed = _replay([_member("C1", held["C1"], 4), _member("C2", held["C2"], 4), _member("C3")])
    cooperative = replayed["cooperative-sticky"]
    revoked = sorted(f"{row['topic'][0]}{row['partition']}" for row in cooperative["revoked"])
    assert cooperative["round_count"] == 2
    assert len(revoked) == 4 and sorted(cooperative["owners"]["C3"]) == revoked
    assert all(set(cooperative["owners"][key]) == set(held[key]) - set(revoked) for key in held)


def test_cooperative_sticky_takes_one_round_when_nothing_is_revoked():
    held = {"C1": ["O0", "O2", "O4", "O6", "S1", "S3"], "C2": ["O1", "O3", "O5", "S0", "S2", "S4"]}
    replayed = _replay([_member("C1", held["C1"], 2), _member("C2", held["C2"], 2)])
    assert replayed["cooperative-sticky"]["round_count"] == 1
    assert replayed["cooperative-sticky"]["owners"] == held and replayed["cooperative-sticky"]["revoked"] == []


def test_more_members_than_partitions_leaves_members_without_partitions():
    topics = [{"topic": "Order", "partition_count": 2}]
    members = [_member(f"C{i}", topics=["Order"]) for i in range(1, 5)]
    replayed = _replay(members, topics=topics)
    for name in ("range", "roundrobin", "sticky", "cooperative-sticky"):
        assert sorted(replayed[name]["owners"]) == ["C1", "C2"], name


def test_kip848_groups_get_the_brokers_uniform_and_range_assignors():
    members = [_member("C1", ["O0", "O1", "O2"], 3), _member("C2", ["O3", "O4", "O5", "O6"], 3, topics=["Order"])]
    replayed = _replay(members, protocol="consumer")
    assert set(replayed) == {"uniform", "range"}
    # only C1 subscribes to Stock; uniform balances the members' totals (6 and 6), so C1 gives up O1 and O2
    uniform = {"C1": ["O0", "S0", "S1", "S2", "S3", "S4"], "C2": ["O1", "O2", "O3", "O4", "O5", "O6"]}
    assert replayed["uniform"]["owners"] == uniform
    # range splits each topic among its subscribers alone, whatever they held
    assert replayed["range"]["owners"] == {
        "C1": ["O0", "O1", "O2", "O3", "S0", "S1", "S2", "S3", "S4"],
        "C2": ["O4", "O5", "O6"],
    }
