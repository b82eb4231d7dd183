"""The what-if replay runs Kafka's own assignors (jvm/assignors, the pinned kafka-clients 4.2.1 and group
coordinator): the reference example, cooperative-sticky's two rounds and the broker's KIP-848 assignors.

The reference example: topics Order (7 partitions) and Stock (5), consumers C1-C3 subscribed to both;
then C3 crashes and C1, C2 rebalance, each remembering what it held.
"""

from __future__ import annotations

import json

import pytest

from jobs.assignor_replay import replay_lines

TOPICS = [{"topic": "Order", "partition_count": 7}, {"topic": "Stock", "partition_count": 5}]


def _member(key: str, owned: list[str] = (), generation: int | None = None, topics=("Order", "Stock")) -> dict:
    partitions = [{"topic": "Order" if p[0] == "O" else "Stock", "partition": int(p[1:])} for p in owned]
    return {"member_key": key, "topics": list(topics), "generation": generation, "owned": partitions}


def _line(case: str, members: list[dict], protocol: str = "classic", topics=TOPICS) -> str:
    return json.dumps(
        {"key": {"case": case}, "group_protocol": protocol, "group_id": "g", "topics": topics, "members": members}
    )


def _owners(result: dict) -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {}
    for row in result["assignment"]:
        owners.setdefault(row["member_key"], []).append(f"{row['topic'][0]}{row['partition']}")
    return owners


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


COOPERATIVE_HELD = {"C1": ["O0", "O1", "O2", "O3", "S0", "S1"], "C2": ["O4", "O5", "O6", "S2", "S3", "S4"]}
BALANCED_HELD = {"C1": ["O0", "O2", "O4", "O6", "S1", "S3"], "C2": ["O1", "O3", "O5", "S0", "S2", "S4"]}
ORDER_ONLY = [{"topic": "Order", "partition_count": 2}]
CASES = {
    "before": _line("before", [_member("C1"), _member("C2"), _member("C3")]),
    **{
        f"after-{name}": _line(f"after-{name}", [_member("C1", held["C1"], 1), _member("C2", held["C2"], 1)])
        for name, held in BEFORE.items()
    },
    "newcomer": _line(
        "newcomer", [_member("C1", COOPERATIVE_HELD["C1"], 4), _member("C2", COOPERATIVE_HELD["C2"], 4), _member("C3")]
    ),
    "balanced": _line("balanced", [_member("C1", BALANCED_HELD["C1"], 2), _member("C2", BALANCED_HELD["C2"], 2)]),
    "crowded": _line("crowded", [_member(f"C{i}", topics=["Order"]) for i in range(1, 5)], topics=ORDER_ONLY),
    "kip848": _line(
        "kip848",
        [_member("C1", ["O0", "O1", "O2"], 3), _member("C2", ["O3", "O4", "O5", "O6"], 3, topics=["Order"])],
        protocol="consumer",
    ),
    # a topic id that is not one: the coordinator's code refuses it
    "refused": _line("refused", [_member("C1")], protocol="consumer", topics=[{**TOPICS[0], "topic_id": "not-an-id"}]),
}


@pytest.fixture(scope="module")
def replayed() -> dict[str, dict[str, dict]]:
    """case -> assignor -> result, every case through one JVM."""
    results: dict[str, dict[str, dict]] = {}
    for text in replay_lines(list(CASES.values())):
        result = json.loads(text)
        result["owners"] = _owners(result) if "assignment" in result else None
        results.setdefault(result["key"]["case"], {})[result.get("assignor", "error")] = result
    return results


def test_reference_example_before_the_crash(replayed):
    before = replayed["before"]
    assert {name: before[name]["owners"] for name in BEFORE} == BEFORE
    assert all(before[name]["round_count"] == 1 for name in BEFORE)


def test_reference_example_after_c3_crashes_each_assignor_from_its_own_assignment(replayed):
    for name, expected in AFTER_C3_CRASHED.items():
        assert replayed[f"after-{name}"][name]["owners"] == expected, name
    sticky = AFTER_C3_CRASHED["sticky"]
    assert set(BEFORE["sticky"]["C1"]) < set(sticky["C1"]) and set(BEFORE["sticky"]["C2"]) < set(sticky["C2"])


def test_cooperative_sticky_revokes_in_a_first_round_what_the_second_hands_to_the_newcomer(replayed):
    held = COOPERATIVE_HELD
    cooperative = replayed["newcomer"]["cooperative-sticky"]
    revoked = sorted(f"{row['topic'][0]}{row['partition']}" for row in cooperative["revoked"])
    assert cooperative["round_count"] == 2
    assert len(revoked) == 4 and sorted(cooperative["owners"]["C3"]) == revoked
    assert all(set(cooperative["owners"][key]) == set(held[key]) - set(revoked) for key in held)


def test_cooperative_sticky_takes_one_round_when_nothing_is_revoked(replayed):
    cooperative = replayed["balanced"]["cooperative-sticky"]
    assert cooperative["round_count"] == 1
    assert cooperative["owners"] == BALANCED_HELD and cooperative["revoked"] == []


def test_more_members_than_partitions_leaves_members_without_partitions(replayed):
    for name in ("range", "roundrobin", "sticky", "cooperative-sticky"):
        assert sorted(replayed["crowded"][name]["owners"]) == ["C1", "C2"], name


def test_kip848_groups_get_the_brokers_uniform_and_range_assignors(replayed):
    replayed = replayed["kip848"]
    assert set(replayed) == {"uniform", "range"}
    # only C1 subscribes to Stock; uniform balances the members' totals (6 and 6), so C1 gives up O1 and O2
    uniform = {"C1": ["O0", "S0", "S1", "S2", "S3", "S4"], "C2": ["O1", "O2", "O3", "O4", "O5", "O6"]}
    assert replayed["uniform"]["owners"] == uniform
    # range splits each topic among its subscribers alone, whatever they held
    assert replayed["range"]["owners"] == {
        "C1": ["O0", "O1", "O2", "O3", "S0", "S1", "S2", "S3", "S4"],
        "C2": ["O4", "O5", "O6"],
    }


def test_a_rebalance_an_assignor_refuses_is_one_error_line_and_the_others_are_replayed(replayed):
    assert list(replayed["refused"]) == ["error"]
    assert replayed["refused"]["error"]["error"].startswith("java.lang.IllegalArgumentException")
    assert len(replayed) == len(CASES)
