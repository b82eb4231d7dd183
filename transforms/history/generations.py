"""Generations of a classic group: its records gathered into one entry per generation (or deletion), and
the entries' rows of gold `generations` and `generation_assignments` (rules of transforms/gold/generations.py).

An entry is the first record of its generation (the rebalance's outcome: its members, assignor, leader),
grown by the generation's later records (a static member replaced: same generation, new member id). A
group's *incarnation* counts the deletions (tombstones) before it; a tombstone right after another is a
repeat and is dropped. Entries are plain dicts, so the fold's state serializes them as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

GROUP_PROTOCOL_CLASSIC = "classic"
STATE_STABLE, STATE_EMPTY, STATE_DELETED = "stable", "empty", "deleted"


def member_key(member: Mapping) -> str:
    """The owner's identity across rebalances: a static member keeps its group_instance_id."""
    return member["group_instance_id"] if member["group_instance_id"] is not None else member["member_id"]


def _replacements(members: Sequence[Mapping], previous: Sequence[Mapping], replaced_at) -> list[dict]:
    """Members whose group_instance_id held another member id in `previous`."""
    found = []
    for member in members:
        instance = member["group_instance_id"]
        before = next((p for p in previous if instance is not None and p["group_instance_id"] == instance), None)
        if before is not None and before["member_id"] != member["member_id"]:
            found.append(
                {
                    "group_instance_id": instance,
                    "previous_member_id": before["member_id"],
                    "member_id": member["member_id"],
                    "replaced_at": replaced_at,
                }
            )
    return found


def skipped_generations(generation: int | None, previous_generation: int | None) -> int | None:
    """Generation numbers between a generation and the one before it: rounds that never completed."""
    if generation is None or previous_generation is None:
        return None
    return max(generation - previous_generation - 1, 0)


def new_entry(record: Mapping, incarnation: int, previous_generation: int | None) -> dict:
    """The entry a record starts: a generation's first record, or a deletion (a tombstone)."""
    is_deletion = record["is_tombstone"]
    generation = None if is_deletion else record["generation"]
    return {
        "incarnation": incarnation,
        "generation": generation,
        "is_deletion": is_deletion,
        "group_protocol": GROUP_PROTOCOL_CLASSIC,
        "protocol_type": None if is_deletion else record["protocol_type"],
        "assignor": None if is_deletion else record["protocol"],
        "leader": None if is_deletion else record["leader"],
        "join_completed_at": None if is_deletion else record["state_changed_at"],
        "recorded_at": record["record_at"],
        "last_recorded_at": record["record_at"],
        "record_count": 1,
        "members": list(record["members"]),
        "last_members": list(record["members"]),
        "static_replacements": [],
        "source_partition": record["source_partition"],
        "source_offset": record["source_offset"],
        "previous_generation": previous_generation,
        "skipped_generation_count": skipped_generations(generation, previous_generation),
        "is_revoke_round": None,  # decided once the next generation (or the incarnation's end) is known
    }


def add_record(entry: dict, record: Mapping) -> None:
    """A later record of the entry's generation: compared with the generation's record before it."""
    replacements = _replacements(record["members"], entry["last_members"], record["record_at"])
    entry["static_replacements"] = entry["static_replacements"] + replacements
    entry["last_recorded_at"] = max(entry["last_recorded_at"], record["record_at"])
    entry["record_count"] += 1
    entry["last_members"] = list(record["members"])


def generation_row(group: Mapping, entry: Mapping) -> dict:
    """An entry -> its row of gold `generations` (a KIP-848 epoch's states when it was reconciled)."""
    members = entry["members"]
    state = STATE_DELETED if entry["is_deletion"] else STATE_STABLE if members else STATE_EMPTY
    reconciled_at = None if entry["is_deletion"] else entry["recorded_at"]
    return {
        **group,
        "incarnation": entry["incarnation"],
        "generation": entry["generation"],
        "group_protocol": entry["group_protocol"],
        "state": state,
        "previous_generation": entry["previous_generation"],
        "skipped_generation_count": entry["skipped_generation_count"],
        "protocol_type": entry["protocol_type"],
        "assignor": entry["assignor"],
        "leader": entry["leader"],
        "join_completed_at": entry["join_completed_at"],
        "recorded_at": entry["recorded_at"],
        "last_recorded_at": entry["last_recorded_at"],
        "reconciled_at": entry.get("reconciled_at", reconciled_at),
        "record_count": entry["record_count"],
        "member_count": len(members),
        "members": members,
        "static_replacements": entry["static_replacements"],
        "source_partition": entry["source_partition"],
        "source_offset": entry["source_offset"],
    }


def owned_partitions(entry: Mapping) -> list[dict]:
    """One row per (member, topic, partition) the generation assigned, with its owner's identity."""
    return [
        {
            "topic": assigned["topic"],
            "partition": partition,
            "member_key": member_key(member),
            "member_id": member["member_id"],
            "group_instance_id": member["group_instance_id"],
            "client_id": member["client_id"],
            "client_host": member["client_host"],
        }
        for member in entry["members"]
        for assigned in member["assigned_partitions"]
        for partition in assigned["partitions"]
    ]


def assignment_rows(group: Mapping, entry: Mapping, valid_until) -> list[dict]:
    """A generation's rows of gold `generation_assignments`, valid until the incarnation's next entry."""
    return [
        {
            **group,
            "incarnation": entry["incarnation"],
            "generation": entry["generation"],
            "topic": owned["topic"],
            "partition": owned["partition"],
            "group_protocol": GROUP_PROTOCOL_CLASSIC,
            "member_id": owned["member_id"],
            "member_key": owned["member_key"],
            "group_instance_id": owned["group_instance_id"],
            "client_id": owned["client_id"],
            "client_host": owned["client_host"],
            "topic_id": None,
            "topic_name_source": None,
            "assigned_at": entry["recorded_at"],
            "valid_until": valid_until,
        }
        for owned in owned_partitions(entry)
    ]
