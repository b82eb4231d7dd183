"""A streams group's epochs (epochs.py entries of group_protocol 'streams') -> its rows of gold
`streams_members`, and the standby task moves of its rebalances (rules of transforms/gold/streams_members.py,
whose docstring gives the reasons).

Each member of each epoch holds `streams`: its metadata's process id, user endpoint, client tags and
topology epoch, as the epoch's members were read (before the target-assignment record), and `current`, its
last current assignment (not a tombstone) before the epoch ended, with its member epoch and its active,
standby and warm-up tasks (None while it has none).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from transforms.history.twins import TASK_KINDS


def _sorted_tasks(tasks: list | None) -> list[dict]:
    """Tasks as gold orders them: by subtopology id, then partitions (each ascending)."""
    ordered = [
        {"subtopology_id": t["subtopology_id"], "partitions": sorted(t["partitions"] or [])} for t in tasks or []
    ]
    return sorted(ordered, key=lambda t: (t["subtopology_id"], t["partitions"]))


def _user_endpoint(endpoint: Mapping | None) -> str | None:
    """host:port, as Spark's concat_ws joins them (a null part is left out)."""
    if endpoint is None:
        return None
    return ":".join(str(part) for part in (endpoint["host"], endpoint["port"]) if part is not None)


def member_rows(group: Mapping, entry: Mapping) -> list[dict]:
    """A streams epoch's rows of `streams_members`, one per member."""
    rows = []
    for member in entry["members"]:
        streams = member["streams"]
        current = streams["current"] or {}
        rows.append(
            {
                **group,
                "incarnation": entry["incarnation"],
                "generation": entry["generation"],
                "member_id": member["member_id"],
                "client_id": member["client_id"],
                "member_epoch": current.get("member_epoch"),
                "topology_epoch": streams["topology_epoch"],
                "process_id": streams["process_id"],
                "user_endpoint": _user_endpoint(streams["user_endpoint"]),
                "client_tags": {tag["key"]: tag["value"] for tag in streams["client_tags"] or []},
                **{f"{kind}_tasks": _sorted_tasks(current.get(f"{kind}_tasks")) for kind in TASK_KINDS},
                "recorded_at": entry["recorded_at"],
                "source_partition": entry["source_partition"],
                "source_offset": entry["source_offset"],
            }
        )
    return rows


def _standby_placements(entry: Mapping | None) -> set[tuple]:
    """(subtopology id, partition, member id) of every standby replica the epoch's members held."""
    if entry is None:
        return set()
    return {
        (task["subtopology_id"], partition, member["member_id"])
        for member in entry["members"]
        for task in (member["streams"]["current"] or {}).get("standby_tasks") or []
        for partition in task["partitions"] or []
    }


def standby_task_moves(before: Mapping | None, after: Mapping) -> int:
    """Standby replicas that changed hands between a rebalance's two epochs: per task, the members that
    lost a replica paired with those that gained one (a task can have several replicas). Members are keyed
    by member id: streams groups have no static membership."""
    held_before, held_after = _standby_placements(before), _standby_placements(after)
    lost = Counter(placement[:2] for placement in held_before - held_after)
    gained = Counter(placement[:2] for placement in held_after - held_before)
    return sum(min(count, gained[task]) for task, count in lost.items())
