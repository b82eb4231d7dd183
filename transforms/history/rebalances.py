"""Logical rebalances of a classic group and their rows of gold `rebalances` and `partition_movements`
(rules of transforms/gold/rebalances.py, which explains them).

A generation is a cooperative *revoke round* when its assignor is incremental, it leaves unassigned some
partitions whose owner before is still a member, and the next generation follows within the members'
largest rebalance timeout: that next generation's rebalance then spans both, and movement is counted
between the two ends. Every other generation closes a logical rebalance, keyed by its generation; the
one before it is the incarnation's previous closing generation.

Epoch groups (KIP-848, share, streams: every target-assignment epoch is a rebalance of its own) go on into
the next epoch, when it follows in time, where their join does not complete in the epoch (`_goes_on`):
a consumer member whose regex is not resolved yet; a share group waiting for its partitions' state to be
initialised (an epoch that targets nothing, or what the epoch before it did, next to the same members);
a streams group whose topology is not validated yet (an epoch that targets no active task, next to the
same members).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from transforms.history import departures, movement, topology
from transforms.history.generations import GROUP_PROTOCOL_CLASSIC, member_key, owned_partitions
from transforms.history.settings import HistorySettings
from transforms.history.twins import GROUP_PROTOCOL_CONSUMER, GROUP_PROTOCOL_SHARE, GROUP_PROTOCOL_STREAMS

PROTOCOL_EAGER, PROTOCOL_COOPERATIVE = "eager", "cooperative"
# An epoch group's rebalances are named after its kind.
EPOCH_PROTOCOLS = (GROUP_PROTOCOL_CONSUMER, GROUP_PROTOCOL_SHARE, GROUP_PROTOCOL_STREAMS)
COOPERATIVE_ASSIGNORS = ("cooperative-sticky", "compatible", "sessioned")  # consumer; Connect (KIP-415, KIP-507)
MEMBER_REF_FIELDS = ("member_id", "group_instance_id", "client_id", "client_host")


def rebalance_protocol(assignor: str | None, group_protocol: str = GROUP_PROTOCOL_CLASSIC) -> str:
    if group_protocol in EPOCH_PROTOCOLS:
        return group_protocol
    return PROTOCOL_COOPERATIVE if assignor in COOPERATIVE_ASSIGNORS else PROTOCOL_EAGER


def _member_keys(entry: Mapping) -> list[str]:
    return sorted(member_key(m) for m in entry["members"])


def _targets(entry: Mapping) -> list:
    return sorted(([member_key(m), m["target"]] for m in entry["members"]), key=repr)


def _epoch_goes_on(entry: Mapping, previous: Mapping | None, following: Mapping) -> bool:
    """An epoch group's rules (see the module docstring); `previous` is the incarnation's live epoch before."""
    members = entry["members"]
    if entry["group_protocol"] == GROUP_PROTOCOL_CONSUMER:
        return any(not m["subscribed_topics"] for m in members)
    same_members_next = _member_keys(following) == _member_keys(entry)
    targets_nothing = all(not m["target"] for m in members)
    if not members or not same_members_next:
        return False
    if entry["group_protocol"] == GROUP_PROTOCOL_STREAMS:
        return targets_nothing
    targets_as_before = previous is not None and _targets(previous) == _targets(entry)
    return (targets_nothing or targets_as_before) and all(m["subscribed_topics"] for m in members)


def _goes_on(entry: Mapping, previous: Mapping | None, following: Mapping) -> bool:
    """Whether a generation's rebalance goes on in the next, if that follows in time: a cooperative round
    that revoked partitions from members that stay; an epoch whose join completes in the next."""
    if entry["group_protocol"] in EPOCH_PROTOCOLS:
        return _epoch_goes_on(entry, previous, following)
    if rebalance_protocol(entry["assignor"]) != PROTOCOL_COOPERATIVE or previous is None:
        return False
    keys = {member_key(m) for m in entry["members"]}
    assigned = {(o["topic"], o["partition"]) for o in owned_partitions(entry)}
    return any(
        o["member_key"] in keys and (o["topic"], o["partition"]) not in assigned for o in owned_partitions(previous)
    )


def is_revoke_round(entry: Mapping, previous: Mapping | None, following: Mapping, round_gap_fallback_ms: int) -> bool:
    """Whether a generation with a successor in its incarnation only revoked (its rebalance goes on)."""
    if not _goes_on(entry, previous, following):
        return False
    timeouts = [m["rebalance_timeout_ms"] for m in entry["members"] if m["rebalance_timeout_ms"] is not None]
    round_gap_ms = max(timeouts) if timeouts else round_gap_fallback_ms
    gap_ms = departures.unix_millis(following["recorded_at"]) - departures.unix_millis(entry["recorded_at"])
    return gap_ms <= round_gap_ms


def logical_rebalances(live: Sequence[Mapping]) -> list[tuple[list[Mapping], Mapping, Mapping | None]]:
    """An incarnation's live generations in log order -> (rounds, closing generation, closing generation
    before) per logical rebalance; a closing generation is one that is not a revoke round."""
    found, rounds, before = [], [], None
    for entry in live:
        rounds.append(entry)
        if entry["is_revoke_round"]:
            continue
        if before is not None or entry["members"]:
            found.append((rounds, entry, before))
        rounds, before = [], entry
    return found


def _membership(closing: Mapping, before_members: Sequence[Mapping]) -> dict:
    before_keys = {member_key(b) for b in before_members}
    after_keys = {member_key(m) for m in closing["members"]}
    before_by_instance: dict[str, str] = {}
    for b in before_members:
        if b["group_instance_id"] is not None:
            before_by_instance.setdefault(b["group_instance_id"], b["member_id"])
    replacements = [
        {
            "group_instance_id": m["group_instance_id"],
            "previous_member_id": before_by_instance[m["group_instance_id"]],
            "member_id": m["member_id"],
            "replaced_at": closing["recorded_at"],
        }
        for m in closing["members"]
        if m["group_instance_id"] in before_by_instance and before_by_instance[m["group_instance_id"]] != m["member_id"]
    ]
    subscriptions_before = {member_key(b): movement.class_key(b["subscribed_topics"]) for b in before_members}
    return {
        "members_joined": [
            {name: m[name] for name in MEMBER_REF_FIELDS}
            for m in closing["members"]
            if member_key(m) not in before_keys
        ],
        "left_members": [b for b in before_members if member_key(b) not in after_keys],
        "static_replacements": replacements,
        "is_subscription_changed": any(
            member_key(m) in subscriptions_before
            and subscriptions_before[member_key(m)] != movement.class_key(m["subscribed_topics"])
            for m in closing["members"]
        ),
    }


def _causes(
    has_members: bool, had_members: bool, membership: Mapping, hows: Sequence[str], counts: Mapping, is_topology: bool
) -> list:
    candidates = [
        ("group_emptied", not has_members and had_members),
        ("topology_changed", is_topology),
        ("member_left_after_timeout", departures.HOW_TIMEOUT in hows),
        ("member_left_cleanly", departures.HOW_CLEAN in hows),
        ("member_left", departures.HOW_UNKNOWN in hows),
        ("member_joined", bool(membership["members_joined"])),
        ("subscription_changed", membership["is_subscription_changed"]),
        ("partitions_added", bool(counts["has_partitions_added"])),
        ("partitions_removed", bool(counts["has_partitions_removed"])),
    ]
    return [name for name, holds in candidates if holds] or ["unknown"]


def _pause(protocol: str, join_completed_at, closing: Mapping, before: Mapping | None, commits) -> tuple:
    """(estimated_pause_ms, pause_estimate_method, is_open): eager rebalances only."""
    if protocol != PROTOCOL_EAGER:
        return None, None, False
    before_recorded_at = before["recorded_at"] if before is not None else None
    return departures.pause_estimate(join_completed_at, closing["recorded_at"], before_recorded_at, commits)


def rebalance_rows(
    group: Mapping,
    rounds: Sequence[Mapping],
    closing: Mapping,
    before: Mapping | None,
    commits: departures.CommitTimes,
    settings: HistorySettings,
    own_records: departures.OwnRecords | None = None,
) -> tuple[dict, list[dict], bool]:
    """One logical rebalance -> (its `rebalances` row, its `partition_movements` rows, whether its row
    can still change: an eager pause that waits for the group's first commit after it). `own_records`:
    a KIP-848 group's, its members' signs of life (departures.members_left)."""
    first = rounds[0]
    key = {**group, "incarnation": closing["incarnation"], "generation": closing["generation"]}
    join_completed_at = first["join_completed_at"] or first["recorded_at"]
    before_members = before["members"] if before is not None else []
    before_owned = owned_partitions(before) if before is not None else []
    membership = _membership(closing, before_members)
    left = []
    if membership["left_members"]:
        last_recorded_at = before["last_recorded_at"] if own_records is None else None
        leavers = membership["left_members"]
        is_share = closing["group_protocol"] == GROUP_PROTOCOL_SHARE
        left = departures.members_left(
            leavers, before_owned, last_recorded_at, join_completed_at, commits, settings, own_records, not is_share
        )
    changes = movement.partition_changes(before_owned, owned_partitions(closing), closing["members"])
    moves = movement.movement_columns(changes, closing["members"])
    assignor = closing["assignor"] or (before["assignor"] if before is not None else None)
    protocol = rebalance_protocol(assignor, closing["group_protocol"])
    pause_ms, pause_method, is_open = _pause(protocol, join_completed_at, closing, before, commits)
    hows = [d["how"] for d in left]
    is_topology = topology.is_changed(closing, before)
    causes = _causes(bool(closing["members"]), bool(before_members), membership, hows, moves, is_topology)
    row = {
        **key,
        "previous_generation": before["generation"] if before is not None else None,
        "first_round_generation": first["generation"],
        "group_protocol": closing["group_protocol"],
        "rebalance_protocol": protocol,
        "assignor": closing["assignor"],
        "join_completed_at": join_completed_at,
        "completed_at": closing["recorded_at"],
        "round_count": len(rounds),
        "failed_round_count": sum(r["skipped_generation_count"] or 0 for r in rounds),
        "member_count_before": len(before_members),
        "member_count_after": len(closing["members"]),
        "members_joined": membership["members_joined"],
        "members_left": left,
        "static_replacements": membership["static_replacements"],
        "cause": causes[0],
        "causes": causes,
        **{name: moves[name] for name in movement.MOVEMENT_COLUMNS},
        "estimated_pause_ms": pause_ms,
        "pause_estimate_method": pause_method,
        "moved_standby_task_count": None,
    }
    movements = movement.movement_rows(key, row["previous_generation"], closing["recorded_at"], changes)
    return row, movements, is_open
