"""Idle members of a classic consumer group's generations: its rows of gold `generation_capacity` (rules
and reasons of transforms/gold/idle.py). A member is idle when the generation assigned it nothing; the
generation's `idle_since` is the first of the unbroken run of generations with an idle member, so each
generation carries where its run started (`idle_since`), set when its first record is folded.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

CONSUMER_PROTOCOL_TYPE = "consumer"
MORE_MEMBERS_THAN_PARTITIONS = "more_members_than_partitions"
ASSIGNOR_GAVE_NONE = "assignor_gave_none"
SUBSCRIPTION_MATCHES_NOTHING = "subscription_matches_nothing"
UNKNOWN = "unknown"


def is_measured(entry: Mapping) -> bool:
    """Generations of consumer groups (not Connect's, nor a Kafka 4 group's first Empty record, type '')."""
    return not entry["is_deletion"] and entry["protocol_type"] == CONSUMER_PROTOCOL_TYPE


def _partition_counts(entry: Mapping) -> list[int]:
    return [sum(len(a["partitions"] or []) for a in m["assigned_partitions"]) for m in entry["members"]]


def idle_since(entry: Mapping, run_started_at: datetime | None) -> datetime | None:
    """Where the run of generations with an idle member that `entry` ends stands after it (None: no run)."""
    if not any(count == 0 for count in _partition_counts(entry)):
        return None
    return run_started_at if run_started_at is not None else entry["recorded_at"]


def _reason(subscribed, assigned_topics: set[str], too_many_members: bool) -> str:
    if not subscribed:
        return UNKNOWN
    if not assigned_topics.intersection(subscribed):
        return SUBSCRIPTION_MATCHES_NOTHING
    return MORE_MEMBERS_THAN_PARTITIONS if too_many_members else ASSIGNOR_GAVE_NONE


def capacity_row(group: Mapping, entry: Mapping, valid_until) -> dict | None:
    """A measured generation with members -> its `generation_capacity` row (None without members)."""
    counts = _partition_counts(entry)
    if not counts:
        return None
    members = entry["members"]
    assigned_topics = {a["topic"] for m in members for a in m["assigned_partitions"] if a["partitions"]}
    too_many_members = len(members) > sum(counts)
    idle = [
        {
            **{name: m[name] for name in ("member_id", "group_instance_id", "client_id", "client_host")},
            "subscribed_topics": m["subscribed_topics"],
            "reason": _reason(m["subscribed_topics"], assigned_topics, too_many_members),
        }
        for m, count in zip(members, counts, strict=True)
        if count == 0
    ]
    return {
        **group,
        "incarnation": entry["incarnation"],
        "generation": entry["generation"],
        "group_protocol": entry["group_protocol"],
        "recorded_at": entry["recorded_at"],
        "valid_until": valid_until,
        "member_count": len(counts),
        "assigned_partition_count": sum(counts),
        "idle_member_count": len(idle),
        "idle_members": idle,
        "min_partitions_per_member": min(counts),
        "max_partitions_per_member": max(counts),
        "avg_partitions_per_member": sum(counts) / len(counts),
        "capacity_used": (len(counts) - len(idle)) / len(counts),
        "idle_since": entry["idle_since"],
    }
