"""A KIP-848 handover race: a member crashes (SIGKILL) while another joins. Topic `handover` (4 partitions).

In each attempt a fresh group `handover-N` gets k1 and k2 (group epochs 1, 2 on 4.2.1; 2, 3 on 4.3.1: two
partitions each). Then k2 is killed and k3 started at once. k3 joins (epoch 3; 4 on 4.3.1) while the
coordinator still counts the dead k2 as a member, so the new target assignment (type 7) gives k3 two
partitions' worth of someone's partitions. When the server assignor takes them from k2, k3 is targeted
partitions that nobody will release: its current assignment (type 8) stays empty (state
UNRELEASED_PARTITIONS) until k2 is fenced at its 6 s session (the next epoch, tombstones of k2's types 8,
7, 5), and only then does k3 own them. When the assignor takes from k1 instead, k1 revokes at once and
there is no race to see: that attempt's members leave cleanly and the next attempt starts with a fresh
group. The race is recognised in the broker's own records (DumpLogSegments over the live segments), never
assumed; the scenario fails if it is not captured within MAX_ATTEMPTS. Every attempt stays in the log: the
failed ones are real KIP-848 history too.

4.2.1, 4.3.1 and 4.4.0, not 3.9: there the members would be the Java console consumer, which logs no callbacks,
and the callbacks are this scenario's ground truth.
"""

from __future__ import annotations

from lab.broker import Broker
from lab.driver import Lab, ScenarioError, ScenarioLog
from lab.dump import parse_dump

VERSIONS = ("4", "4.3", "4.4")
TOPIC = "handover"
TOPICS = (TOPIC,)
PARTITIONS = 4
MAX_ATTEMPTS = 8  # the assignor picks k2's partitions for k3 about half the time
STATE_UNRELEASED_PARTITIONS = 2  # type 8 State


def _group_records(dump_text: str, group: str) -> list[dict]:
    return [r for r in parse_dump(dump_text) if "type" in r and r["key"].get("groupId") == group]


def _partitions(topic_partitions: list[dict] | None) -> set[int]:
    return {p for tp in topic_partitions or [] for p in tp["partitions"]}


def find_handover_race(records: list[dict], crashed: str, newcomer: str) -> dict | None:
    """The race in one group's records (types 3, 5, 7, 8 in log order), or None.

    Captured means: a target (type 7) names for the newcomer partitions the crashed member still holds in
    its current assignment, the newcomer's current assignment (type 8) written after that target is
    empty, and the newcomer's first non-empty current assignment comes only after the crashed member's
    type 8 tombstone (its fencing). Returns the epochs and offsets that show it.
    """
    member_ids = {r["value"]["clientId"]: r["key"]["memberId"] for r in records if r["type"] == 5 and r["value"]}
    crashed_id, newcomer_id = member_ids.get(crashed), member_ids.get(newcomer)
    if crashed_id is None or newcomer_id is None:
        return None
    epoch, crashed_holds, race = None, set(), None
    for r in records:
        member = r["key"].get("memberId")
        if r["type"] == 3 and r["value"]:
            epoch = r["value"]["epoch"]
        elif r["type"] == 8 and member == crashed_id:
            if r["value"] is None:
                if race is None or "empty_current_offset" not in race:
                    return None
                race |= {"fenced_offset": r["offset"], "fenced_epoch": epoch + 1}
            else:
                crashed_holds = _partitions(r["value"]["assignedPartitions"])
                crashed_holds |= _partitions(r["value"]["partitionsPendingRevocation"])
        elif r["type"] == 7 and member == newcomer_id and r["value"] and race is None:
            targeted = _partitions(r["value"]["topicPartitions"])
            if targeted and targeted <= crashed_holds:
                race = {"join_epoch": epoch, "target_offset": r["offset"], "targeted": sorted(targeted)}
        elif r["type"] == 8 and member == newcomer_id and r["value"] and race is not None:
            owned = _partitions(r["value"]["assignedPartitions"])
            if not owned and "fenced_offset" not in race:
                race.setdefault("empty_current_offset", r["offset"])
                race.setdefault("empty_current_state", r["value"]["state"])
            elif owned:
                return race if "fenced_offset" in race else None
    return None


def _wait_for_members(lab: Lab, group: str, names: set[str]) -> None:
    """Like Lab.wait_for_group, but for these very members: right after the kill the group is still
    Stable with the dead member in it, which a count of two would take for the end of the handover."""
    wanted = [f"{TOPIC}-{partition}" for partition in range(PARTITIONS)]

    def assignment() -> dict[str, list[str]]:
        description = lab.describe(group)
        if description.state.name != "STABLE":
            return {}
        return {
            member.client_id: sorted(f"{tp.topic}-{tp.partition}" for tp in member.assignment.topic_partitions)
            for member in description.members
        }

    def settled() -> bool:
        owners = assignment()
        return set(owners) == names and sorted(p for parts in owners.values() for p in parts) == wanted

    lab.wait_for(f"group {group} Stable with exactly {sorted(names)} owning {wanted}", settled)
    lab.record.event("group_stable", group=group, members=len(names), assignment=assignment())


def _attempt(lab: Lab, record: ScenarioLog, attempt: int) -> dict | None:
    group = f"handover-{attempt}"
    k1, k2, k3 = (f"h{attempt}-k{n}" for n in (1, 2, 3))
    for count, name in enumerate((k1, k2), start=1):
        lab.start_member(name, group, TOPICS, protocol="consumer")
        lab.wait_for_group(group, count, TOPICS)
    lab.wait_caught_up(group, TOPICS)
    lab.kill_member(k2)
    lab.start_member(k3, group, TOPICS, protocol="consumer")
    # Stable with k1 and k3 owning everything: k2 has been fenced, whoever k3's partitions came from.
    _wait_for_members(lab, group, {k1, k3})
    lab.produce(TOPIC, 8)
    lab.wait_caught_up(group, TOPICS)
    race = find_handover_race(
        _group_records(lab.broker.dump_offsets(lab.broker.offsets_segments()), group), crashed=k2, newcomer=k3
    )
    record.event("handover_attempt", group=group, crashed=k2, newcomer=k3, race=race)
    if race is None:
        lab.stop_member(k1)
        lab.stop_member(k3)
        lab.wait_for_state(group, "empty")
        return None
    record.expect(group, f"{k3} joined while {k2} was dead: targeted {race['targeted']}", epoch=race["join_epoch"])
    record.expect(group, f"{k2} fenced at session timeout; {k3} owns its partitions", epoch=race["fenced_epoch"])
    return race


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    lab.create_topic(TOPIC, PARTITIONS)
    lab.produce(TOPIC, 40)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if _attempt(lab, record, attempt) is not None:
            return
    raise ScenarioError(f"no handover race captured in {MAX_ATTEMPTS} attempts (see handover_attempt events)")
