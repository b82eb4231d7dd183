"""The gold history of every lab scenario equals what the lab's own clients saw.

Each lab member logs, from its client's callbacks, every assignment it received; the lab writes the whole
group's assignment each time the group settles (`group_stable` in scenario.json) and what it did in
between (members started, closed, killed; partitions added; groups deleted). Those logs come from the
clients, not from `__consumer_offsets`, so they are an independent ground truth for what the gold
tables rebuild from the records: one logical rebalance per settled assignment, its causes, which
partitions moved between which members, and the minimal number of moves, computed here from first
principles for the membership the clients saw.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest

from lab.scenarios import capture_folders
from tests.lab_tables import Capture, all_captures

CAPTURES = all_captures()


@dataclass
class Settled:
    """A group's assignment when it settled, owners named as Kafka keys them (static: the instance id)."""

    at_ms: int
    owners: dict[str, str]  # "topic-partition" -> owner
    members: set[str]
    causes: set[str] = field(default_factory=set)
    generation: int | None = None
    # Its position in scenario.json's events (the driver's own order), when a group_stable event made it:
    # at_ms has millisecond resolution, and the driver can start the next member in the same millisecond.
    index: int | None = None


def owner_names(events: list[dict]) -> dict[str, str]:
    """Lab member name -> the identity the group keys it by: its static instance id, else the name."""
    return {e["member"]: e.get("instance_id") or e["member"] for e in events if e["event"] == "member_started"}


def causes_between(events: list[dict], group: str, before: Settled | None, after: Settled, names) -> set[str]:
    """What the lab did to the group between two settled states, in the words of `rebalances.causes`."""
    first_start = min(e["at_ms"] for e in events if e["event"] == "member_started" and e.get("group") == group)
    start = before.at_ms if before else first_start - 1

    def between(index: int, event: dict) -> bool:
        # Events are in time order, the driver's own in the order it logged them: a position, where the
        # state has one, settles events logged in the same millisecond as the state.
        is_after = index > before.index if before and before.index is not None else event["at_ms"] > start
        is_before = index < after.index if after.index is not None else event["at_ms"] <= after.at_ms
        return is_after and is_before

    window = [e for index, e in enumerate(events) if between(index, e)]
    previous = before.members if before else set()
    members_of_group = {e["member"] for e in events if e["event"] == "member_started" and e["group"] == group}
    causes = set()
    for event in window:
        member = event.get("member")
        if event["event"] == "member_started" and event["group"] == group and names[member] not in previous:
            causes.add("member_joined")
        elif (
            event["event"] in ("closed", "member_stopped")
            and member in members_of_group
            and names[member] in previous
            # a static member closed and restarted under the same instance id was replaced, not gone
            and names[member] not in after.members
        ):
            causes.add("member_left_cleanly")
        elif event["event"] == "member_killed" and member in members_of_group and names[member] not in after.members:
            causes.add("member_left_after_timeout")
        elif event["event"] == "partitions_added" and any(p.startswith(event["topic"] + "-") for p in after.owners):
            causes.add("partitions_added")
    # A KIP-848 member killed before the window stays in the group until its session runs out, through
    # epochs others cause meanwhile (kip848-crash): gone now, it was fenced in between.
    if any(last_act(events, member, after) == "member_killed" for member in previous - after.members):
        causes.add("member_left_after_timeout")
    if previous and not after.members:
        causes.add("group_emptied")
    return causes


def last_act(events: list[dict], member: str, until: Settled) -> str | None:
    """What the lab last did to the member keyed `member` before the state `until` (started, stopped,
    killed), by the driver's own events."""
    names = owner_names(events)
    acts = [
        e["event"]
        for index, e in enumerate(events)
        if (index < until.index if until.index is not None else e["at_ms"] <= until.at_ms)
        and e["event"] in ("member_started", "member_stopped", "member_killed")
        and names.get(e.get("member")) == member
    ]
    return acts[-1] if acts else None


def settled_history(scenario: dict, group: str) -> list[Settled]:
    """The group's settled states in order; a static member's restart within its session is not one."""
    events, names = scenario["events"], owner_names(scenario["events"])
    expected = {e["at_ms"]: e for e in scenario["expected"] if e["group"] == group}
    states = [
        Settled(
            e["at_ms"],
            {partition: names[member] for member, partitions in e["assignment"].items() for partition in partitions},
            {names[member] for member in e["assignment"]},
            index=index,
        )
        for index, e in enumerate(events)
        if e["event"] == "group_stable" and e["group"] == group
    ]
    for note in expected.values():
        # Kafka deletes only empty groups: a deleted group's last generation is an empty one.
        if note.get("members") == 0 or (note.get("deleted") and states and states[-1].members):
            states.append(Settled(note["at_ms"], {}, set()))
    states.sort(key=lambda s: s.at_ms)
    history: list[Settled] = []
    for state in states:
        note = expected.get(state.at_ms, {})
        if note.get("replaced_instance"):
            assert history and history[-1].owners == state.owners, note
            continue
        state.causes = causes_between(events, group, history[-1] if history else None, state, names)
        state.generation = note.get("generation", note.get("epoch"))
        history.append(state)
    return history


def moved(before: Settled | None, after: Settled) -> set[str]:
    """Partitions owned before and after by different owners (revoked and reassigned in between: once)."""
    previous = before.owners if before else {}
    return {p for p, owner in after.owners.items() if p in previous and previous[p] != owner}


def minimal_moves(before: Settled | None, after: Settled) -> int:
    """Fewest owner changes any balanced assignment of `after`'s partitions to `after`'s members needs.

    Balanced: each member holds floor(N/M) or ceil(N/M) partitions. Member i can keep at most
    min(k_i, target_i) of its k_i previous partitions; the larger targets go to those with most to keep.
    """
    previous = before.owners if before else {}
    universe = list(after.owners)
    if not after.members:
        return 0
    kept_before = Counter(previous[p] for p in universe if p in previous and previous[p] in after.members)
    quotient, remainder = divmod(len(universe), len(after.members))
    holdings = sorted((kept_before.get(m, 0) for m in after.members), reverse=True)
    keepable = sum(min(k, quotient + (1 if i < remainder else 0)) for i, k in enumerate(holdings))
    return sum(1 for p in universe if p in previous) - keepable


def protocol_of(scenario: dict, group: str) -> str:
    starts = [e for e in scenario["events"] if e["event"] == "member_started" and e["group"] == group]
    if any(e.get("protocol") == "consumer" for e in starts):
        return "consumer"
    return "cooperative" if any(e.get("assignor") == "cooperative-sticky" for e in starts) else "eager"


def groups_with_history(capture: Capture) -> list[str]:
    scenario = capture.scenario
    return sorted({e["group"] for e in scenario["events"] if e["event"] == "group_stable"})


# kip848-handover's race epoch never settles (the newcomer waits on a dead member until it is fenced), so
# its groups have more epochs than settled states: tests/spark/test_kip848_ownership.py checks them epoch by epoch.
PER_EPOCH_ONLY = ("kip848-handover",)
CASES = [
    (capture, group)
    for capture in CAPTURES
    if capture.path.name not in PER_EPOCH_ONLY
    for group in groups_with_history(capture)
]


def test_every_protocol_and_assignor_is_covered():
    protocols = {protocol_of(c.scenario, g) for c, g in CASES}
    assignors = {e.get("assignor") for c, _ in CASES for e in c.scenario["events"] if e["event"] == "member_started"}
    assert protocols == {"eager", "cooperative", "consumer"}
    assert {"range", "roundrobin", "sticky", "cooperative-sticky"} <= assignors
    assert {c.path.parent.name for c, _ in CASES} == capture_folders()


@pytest.mark.parametrize(("capture", "group"), CASES, ids=[f"{c.cluster}:{g}" for c, g in CASES])
def test_rebalances_equal_what_the_clients_saw(lab, capture, group):
    scenario = capture.scenario
    expected = settled_history(scenario, group)
    rows = (
        lab["rebalances"]
        .where(f"cluster = '{capture.cluster}' AND group_id = '{group}'")
        .orderBy("completed_at")
        .collect()
    )
    observed = [(r.generation, r.member_count_after, sorted(r.causes), r.moved_partition_count) for r in rows]
    wanted = [(s.generation, len(s.members), sorted(s.causes), len(moved(b, s))) for b, s in pairs(expected)]
    assert len(rows) == len(expected), f"rebalances {observed} != the clients' {wanted}"
    protocol = protocol_of(scenario, group)
    for row, (before, after) in zip(rows, pairs(expected), strict=True):
        context = f"{capture.cluster} {group} generation {row.generation}: {observed} vs {wanted}"
        if after.generation is not None:
            assert row.generation == after.generation, context
        assert row.rebalance_protocol == protocol, context
        assert row.member_count_after == len(after.members), context
        assert set(row.causes) == after.causes, context
        assert row.moved_partition_count == len(moved(before, after)), context
        newly = {p for p in after.owners if p not in (before.owners if before else {})}
        assert row.newly_assigned_partition_count == len(newly), context
        assert row.minimal_moves_method == "exact", context
        assert row.minimal_moves == minimal_moves(before, after), context
        if protocol == "cooperative":
            # A partition taken from a member that stays must be revoked in one round, assigned in the next;
            # a departed member's partitions are free at once.
            revoked = any(before.owners[p] in after.members for p in moved(before, after))
            assert row.round_count == (2 if revoked else 1), context


def pairs(history: list[Settled]) -> list[tuple[Settled | None, Settled]]:
    return list(zip([None, *history[:-1]], history, strict=True))


@pytest.mark.parametrize(("capture", "group"), CASES, ids=[f"{c.cluster}:{g}" for c, g in CASES])
def test_partition_movements_name_the_partitions_and_owners_the_clients_saw(lab, capture, group):
    expected = settled_history(capture.scenario, group)
    generations = [
        r.generation
        for r in lab["rebalances"]
        .where(f"cluster = '{capture.cluster}' AND group_id = '{group}'")
        .orderBy("completed_at")
        .collect()
    ]
    movements = lab["partition_movements"].where(f"cluster = '{capture.cluster}' AND group_id = '{group}'").collect()
    for generation, (before, after) in zip(generations, pairs(expected), strict=True):
        rows = [m for m in movements if m.generation == generation]
        observed = {
            (
                f"{m.topic}-{m.partition}",
                m.from_group_instance_id or m.from_client_id,
                m.to_group_instance_id or m.to_client_id,
            )
            for m in rows
        }
        wanted = {(p, before.owners[p], after.owners[p]) for p in moved(before, after)}
        assert len(rows) == len(observed), f"a partition moved twice in one rebalance: {rows}"
        # The lab names each client after its member (client.id), static ones by their instance id.
        assert observed == wanted, f"{capture.cluster} {group} generation {generation}"


def dynamic_kip848_leavers(scenario: dict) -> set[str]:
    """The dynamic `consumer`-protocol members the lab stopped or killed (a static member's stop is a
    temporary leave, epoch -2, which waits for its session)."""
    dynamic = {
        e["member"]
        for e in scenario["events"]
        if e["event"] == "member_started" and e.get("protocol") == "consumer" and not e.get("instance_id")
    }
    return {e["member"] for e in scenario["events"] if e["event"] in ("member_stopped", "member_killed")} & dynamic


# A KIP-848 member's departure is judged by its own records and commits, not by epochs others caused.
EPOCH_CAPTURES = [c for c in CAPTURES if dynamic_kip848_leavers(c.scenario)]


@pytest.mark.parametrize("capture", EPOCH_CAPTURES, ids=[c.cluster for c in EPOCH_CAPTURES])
def test_a_killed_kip848_member_left_after_timeout_and_a_stopped_one_cleanly(lab, capture):
    """Every departure of a dynamic KIP-848 member the lab killed reads 'timeout', of one it stopped 'clean'."""
    where = f"cluster = '{capture.cluster}'"
    clients = {
        (row.group_id, row.m.member_id): row.m.client_id
        for row in lab["generations"].where(where).selectExpr("group_id", "explode(members) AS m").collect()
    }
    departures = [
        (row.group_id, clients[(row.group_id, row.d.member_id)], row.d.how)
        for row in lab["rebalances"]
        .where(f"{where} AND rebalance_protocol = 'consumer'")
        .selectExpr("group_id", "explode(members_left) AS d")
        .where("d.group_instance_id IS NULL")
        .collect()
    ]
    acts = {
        e["member"]: e["event"] for e in capture.scenario["events"] if e["event"] in ("member_stopped", "member_killed")
    }
    wanted = {"member_killed": "timeout", "member_stopped": "clean"}
    assert {client for _, client, _ in departures} == dynamic_kip848_leavers(capture.scenario), capture.cluster
    assert [(group, client, wanted[acts[client]]) for group, client, _ in departures] == departures
