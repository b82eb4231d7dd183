"""Epochs of a KIP-848 consumer group: its records (types 3-8, 16) replayed into one entry per target-assignment
epoch (or deletion), as transforms/gold/epochs.py and ownership.py build gold generations (their docstrings
give the reasoning).

An epoch starts at its type 6 record (the assignment epoch; a later type 6 of the same epoch takes its place,
and the epoch before it then ends there: its members' current assignments in between are its own).
Its members are the live member metadata (type 5) then, with their target (type 7) and the topics their
regex resolves to (type 16). What each member owns is its current assignment (type 8, with the partitions
pending revocation), as the member's last such record (not a tombstone) before the next epoch left it: the
entry's `end` follows the member's records while the epoch is the latest. Each holding runs from the type 8
record that first held it to the member's next type 8 record without it (or its tombstone), so a holding's
`owned_until` is set whenever that record comes, in every entry that holds it. A member reached an epoch at
its first STABLE current assignment of that epoch or a later one (`reached_at`). A type 3 tombstone deletes
the group: a new incarnation starts with nothing known (a repeat tombstone is dropped).

Share and streams groups replay the same way, their records read as their consumer twins (twins.py): an
entry carries the group's kind (`group_protocol`), and a streams member also what its metadata and its
last current assignment before the epoch ended say beyond the twin (`streams`, as `end` follows its
records), for the `streams_members` table (streams.py).

The replay's maps live in the fold's state (`replay`): JSON-shaped, keyed by strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from transforms.history.generations import skipped_generations
from transforms.history.records import MEMBER_METADATA_FIELDS

RECORD_GROUP_EPOCH, RECORD_MEMBER_METADATA, RECORD_TARGET_EPOCH = 3, 5, 6
RECORD_TARGET_MEMBER, RECORD_CURRENT_MEMBER, RECORD_REGULAR_EXPRESSION = 7, 8, 16
MEMBER_STATE_STABLE = 0
# A member's own records (its heartbeats made the coordinator write them): signs of its life.
OWN_RECORD_TYPES = (RECORD_MEMBER_METADATA, RECORD_CURRENT_MEMBER)


def new_replay() -> dict:
    """What the replay knows of the current incarnation (own record times span incarnations)."""
    return {"members": {}, "targets": {}, "regexes": {}, "bumps": {}, "trackers": {}, "stable": {}, "streams": {}}


def next_incarnation(replay: dict) -> dict:
    """The replay after the group's deletion: nothing of the group before it goes on. (The Spark gold this
    fold replaced carried streams members' last current assignments across deletions, so a member id back
    after one showed, before its first current assignment, the tasks it ran in the deleted group.)"""
    return new_replay()


def _tracker(replay: dict, member_id: str) -> dict:
    """A member's type 8 records: `held` [topic_id, partition, owned_from] by its last record, `last_state`
    [topic_id, partition, owned_from, owned_until] of its last record that is not a tombstone."""
    return replay["trackers"].setdefault(member_id, {"held": [], "last_state": None})


def is_deletion(record: Mapping) -> bool:
    return record["record_type"] == RECORD_GROUP_EPOCH and record["is_tombstone"]


def deletion_entry(record: Mapping, incarnation: int, previous_generation: int | None) -> dict:
    return {
        **_entry_base(record, incarnation, None, previous_generation),
        "is_deletion": True,
        "join_completed_at": None,
        "members": [],
    }


def _entry_base(record: Mapping, incarnation: int, generation: int | None, previous_generation) -> dict:
    return {
        "incarnation": incarnation,
        "generation": generation,
        "group_protocol": record["group_protocol"],
        "recorded_at": record["record_at"],
        "last_recorded_at": record["record_at"],
        "source_partition": record["source_partition"],
        "source_offset": record["source_offset"],
        "previous_generation": previous_generation,
        "skipped_generation_count": skipped_generations(generation, previous_generation),
        "is_revoke_round": None,
    }


def _member_at(replay: dict, member_id: str, metadata: Mapping, generation: int) -> dict:
    regex = metadata["subscribed_topic_regex"] or None
    resolved = replay["regexes"].get(regex) if regex is not None else None
    subscribed = sorted(set(metadata["subscribed_topic_names"] or []) | set(resolved or []))
    reached = [at for epoch, at in replay["stable"].get(member_id, []) if epoch >= generation]
    last_state = _tracker(replay, member_id)["last_state"]
    streams = None
    if metadata["streams"] is not None:  # a streams member: its metadata, and its last current assignment
        streams = {**metadata["streams"], "current": replay["streams"].get(member_id)}
    return {
        "member_id": member_id,
        "group_instance_id": metadata["instance_id"],
        "client_id": metadata["client_id"],
        "client_host": metadata["client_host"],
        "rack_id": metadata["rack_id"],
        "rebalance_timeout_ms": metadata["rebalance_timeout_ms"],
        "server_assignor": metadata["server_assignor"],
        "subscribed_topics": subscribed,
        "target": replay["targets"].get(member_id) or [],
        "end": None if last_state is None else [list(held) for held in last_state],
        "reached_at": min(reached) if reached else None,
        "streams": streams,
    }


def epoch_entry(replay: dict, record: Mapping, incarnation: int, previous_generation: int | None) -> dict:
    """The entry a type 6 record starts: its members as the records before it leave them."""
    generation = record["assignment_epoch"]
    members = [
        _member_at(replay, member_id, metadata, generation) for member_id, metadata in sorted(replay["members"].items())
    ]
    return {
        **_entry_base(record, incarnation, generation, previous_generation),
        "is_deletion": False,
        "join_completed_at": replay["bumps"].get(str(generation)),
        "members": members,
    }


def catch_up(replay: dict, entry: dict) -> None:
    """The entry latest again (the next epoch's start was written again, later): each member's `end` as its
    current assignments since have left it, as if the next epoch had not started yet."""
    for member in entry["members"]:
        last_state = _tracker(replay, member["member_id"])["last_state"]
        if last_state is not None:
            member["end"] = [list(held) for held in last_state]
        if member["streams"] is not None:
            member["streams"] = {**member["streams"], "current": replay["streams"].get(member["member_id"])}


def _current_assignment(replay: dict, record: Mapping, live: list[dict]) -> None:
    """A type 8 record: the member's holdings go on, start or end here, in its tracker and in every entry."""
    tracker = _tracker(replay, record["member_id"])
    at = record["record_at"]
    owned = [] if record["is_tombstone"] else record["assigned_partitions"] or []
    pending = [] if record["is_tombstone"] else record["partitions_pending_revocation"] or []
    held_from = {(topic_id, partition): since for topic_id, partition, since in tracker["held"]}
    now = {}
    for tp in [*owned, *pending]:
        for partition in tp["partitions"]:
            now.setdefault((tp["topic_id"], partition), held_from.get((tp["topic_id"], partition), at))
    ended = {(key[0], key[1], since) for key, since in held_from.items() if key not in now}
    holders = [tracker["last_state"] or []]
    member_id = record["member_id"]
    holders += [m["end"] for entry in live for m in entry["members"] if m["member_id"] == member_id and m["end"]]
    for holdings in holders:
        for holding in holdings:
            if holding[3] is None and (holding[0], holding[1], holding[2]) in ended:
                holding[3] = at
    tracker["held"] = [[topic_id, partition, since] for (topic_id, partition), since in now.items()]
    if record["is_tombstone"]:
        return
    tracker["last_state"] = [[topic_id, partition, since, None] for (topic_id, partition), since in now.items()]
    if record.get("streams") is not None:
        replay["streams"][member_id] = record["streams"]
    latest = live[-1] if live else None
    for member in latest["members"] if latest is not None else []:
        if member["member_id"] == record["member_id"]:
            member["end"] = [list(held) for held in tracker["last_state"]]
            if member["streams"] is not None:
                member["streams"] = {**member["streams"], "current": record.get("streams")}
    if record["member_state"] == MEMBER_STATE_STABLE and record["member_epoch"] is not None:
        replay["stable"].setdefault(record["member_id"], []).append([record["member_epoch"], at])
        for entry in live:
            for member in entry["members"]:
                if member["member_id"] == record["member_id"] and entry["generation"] <= record["member_epoch"]:
                    reached = member["reached_at"]
                    member["reached_at"] = at if reached is None else min(reached, at)


def replay_record(replay: dict, record: Mapping, live: list[dict]) -> None:
    """Any record but a type 6 or a deletion: the replay's maps, and the incarnation's `live` entries."""
    kind, key, value = record["record_type"], record["member_id"], None
    if kind == RECORD_CURRENT_MEMBER:
        _current_assignment(replay, record, live)
        return
    if kind == RECORD_GROUP_EPOCH:
        epoch, at = str(record["group_epoch"]), record["record_at"]
        replay["bumps"][epoch] = max(replay["bumps"].get(epoch, at), at)
        for entry in live:
            if str(entry["generation"]) == epoch:
                entry["join_completed_at"] = replay["bumps"][epoch]
        return
    if kind == RECORD_MEMBER_METADATA:
        table = "members"
        value = {**{name: record[name] for name in MEMBER_METADATA_FIELDS}, "streams": record.get("streams")}
        if not record["is_tombstone"] and key not in replay["members"]:
            forget_members(replay, {key})  # a member back under its own id (KIP-848) starts owning nothing
    elif kind == RECORD_TARGET_MEMBER:
        table, value = "targets", record["assigned_partitions"]
    elif kind == RECORD_REGULAR_EXPRESSION:
        table, key, value = "regexes", record["regular_expression"], record["resolved_topics"]
    else:
        return
    if record["is_tombstone"]:
        replay[table].pop(key, None)
    else:
        replay[table][key] = value


def forget_members(replay: dict, member_ids: set[str]) -> None:
    """The replay's memory of members that left: their current assignments, their reconciliations and (streams)
    their tasks. A member gone from the group and from every entry the state keeps is read no more."""
    for table in ("trackers", "stable", "streams"):
        for member_id in member_ids & set(replay[table]):
            del replay[table][member_id]


def is_own_record(record: Mapping) -> bool:
    return record["record_type"] in OWN_RECORD_TYPES and not record["is_tombstone"]


def last_own_record_at(own: Mapping[str, list], member_id: str, at: datetime) -> datetime | None:
    """A member's last own record at or before `at`."""
    times = [time for time in own.get(member_id, []) if time <= at]
    return max(times) if times else None
