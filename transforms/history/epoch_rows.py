"""A KIP-848 group's epoch entries (epochs.py) -> their rows of gold `generations` and
`generation_assignments` (rules of transforms/gold/epochs.py and generations.explode_generation_assignments).

Topics are named through `names`, topic id -> (topic, topic_name_source), the cluster's map as
transforms/gold/topic_names.py ranks its sources; an id it does not name stays an id, source 'unresolved'
(a streams group's: 'subtopology', the subtopology id standing for the topic id, twins.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from transforms.history.generations import member_key
from transforms.history.twins import GROUP_PROTOCOL_STREAMS

SOURCE_UNRESOLVED, SOURCE_SUBTOPOLOGY = "unresolved", "subtopology"
TopicNames = Mapping[str, tuple[str, str]]


def _named(partitions: Sequence[Mapping], names: TopicNames, unnamed_source: str) -> list[dict]:
    named = []
    for tp in partitions:
        topic_id = tp["topic_id"]
        topic, source = names.get(topic_id, (topic_id, unnamed_source))
        named.append(
            {"topic": topic, "partitions": list(tp["partitions"]), "topic_id": topic_id, "topic_name_source": source}
        )
    return named


def gold_member(member: Mapping, names: TopicNames, unnamed_source: str) -> dict:
    """An epoch's member -> gold's MEMBER: owned is its current assignment as the epoch ended, by topic id."""
    end = sorted(member["end"] or [], key=lambda held: (held[0], held[1]))
    by_topic: dict[str, list[int]] = {}
    for topic_id, partition, _, _ in end:
        by_topic.setdefault(topic_id, []).append(partition)
    current = [{"topic_id": topic_id, "partitions": sorted(parts)} for topic_id, parts in sorted(by_topic.items())]
    ownership = [
        {"topic_id": topic_id, "partition": partition, "owned_from": since, "owned_until": until}
        for topic_id, partition, since, until in end
    ]
    return {
        "member_id": member["member_id"],
        "group_instance_id": member["group_instance_id"],
        "client_id": member["client_id"],
        "client_host": member["client_host"],
        "rack_id": member["rack_id"],
        "session_timeout_ms": None,
        "rebalance_timeout_ms": member["rebalance_timeout_ms"],
        "subscribed_topics": list(member["subscribed_topics"]),
        "assigned_partitions": _named(current, names, unnamed_source),
        "target_partitions": _named(member["target"], names, unnamed_source),
        "ownership": ownership,
    }


def gold_entry(entry: Mapping, names: TopicNames) -> dict:
    """An epoch entry with its members in gold's shape, its assignor and its reconciliation: what the rows
    of every table read (the classic modules read it as they read a classic generation)."""
    members = entry["members"]
    reached = [m["reached_at"] for m in members]
    if not members:
        reconciled_at = None if entry["is_deletion"] else entry["recorded_at"]
    else:
        reconciled_at = max(reached) if all(at is not None for at in reached) else None
    assignors = [m["server_assignor"] for m in members if m["server_assignor"] is not None]
    is_streams = entry["group_protocol"] == GROUP_PROTOCOL_STREAMS
    unnamed_source = SOURCE_SUBTOPOLOGY if is_streams else SOURCE_UNRESOLVED
    return {
        **entry,
        "protocol_type": entry["group_protocol"],
        "assignor": max(assignors) if assignors else None,
        "leader": None,
        "record_count": 1,
        "static_replacements": [],
        "reconciled_at": reconciled_at,
        "members": [gold_member(m, names, unnamed_source) for m in members],
    }


def _held(entry: Mapping) -> list[dict]:
    """Every (member, topic, partition) an epoch ended with, with the holding it belongs to."""
    found = []
    for member in entry["members"]:
        ownership = {(o["topic_id"], o["partition"]): o for o in member["ownership"]}
        for assigned in member["assigned_partitions"]:
            for partition in assigned["partitions"]:
                found.append(
                    {
                        "member": member,
                        "assigned": assigned,
                        "partition": partition,
                        "held": ownership.get((assigned["topic_id"], partition)),
                    }
                )
    return found


def assignment_rows(group: Mapping, entries: Sequence[Mapping]) -> list[dict]:
    """An incarnation's gold entries (in log order, its deletion too) -> their rows of gold
    `generation_assignments`. A partition's row is valid until the next entry's start when its owner holds
    it on in its next epoch row (the same holding), else until the holding ended (null while held)."""
    rows_by_owner: dict[tuple, list[tuple[int, dict]]] = {}
    found = []
    for index, entry in enumerate(entries):
        for item in _held(entry):
            key = (item["assigned"]["topic"], item["partition"], member_key(item["member"]))
            rows_by_owner.setdefault(key, []).append((entry["generation"], item))
            found.append((index, entry, item))
    next_holding: dict[int, object] = {}
    for owned in rows_by_owner.values():
        owned.sort(key=lambda pair: pair[0])
        for (_, item), (_, following) in itertools.pairwise(owned):
            next_holding[id(item)] = following
    rows = []
    for index, entry, item in found:
        member, assigned, held = item["member"], item["assigned"], item["held"]
        following = next_holding.get(id(item))
        owned_from = None if held is None else held["owned_from"]
        following_from = None if following is None or following["held"] is None else following["held"]["owned_from"]
        is_kept = following is not None and following_from == owned_from
        next_start = entries[index + 1]["recorded_at"] if index + 1 < len(entries) else None
        valid_until = held["owned_until"] if not is_kept and held is not None else next_start
        rows.append(
            {
                **group,
                "incarnation": entry["incarnation"],
                "generation": entry["generation"],
                "topic": assigned["topic"],
                "partition": item["partition"],
                "group_protocol": entry["group_protocol"],
                "member_id": member["member_id"],
                "member_key": member_key(member),
                "group_instance_id": member["group_instance_id"],
                "client_id": member["client_id"],
                "client_host": member["client_host"],
                "topic_id": assigned["topic_id"],
                "topic_name_source": assigned["topic_name_source"],
                "assigned_at": entry["recorded_at"] if owned_from is None else max(entry["recorded_at"], owned_from),
                "valid_until": valid_until,
            }
        )
    return rows
