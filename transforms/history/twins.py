"""Share groups (KIP-932) and streams groups (KIP-1071) read as their KIP-848 consumer twins, as
transforms/gold/epochs.py and streams_records.py read them (their docstrings give Kafka's specs).

Both coordinators write the consumer group's epoch sequence under their own record types: group epoch,
member metadata, target epoch, target per member and current assignment (SHARE_AS_CONSUMER_TYPES,
STREAMS_AS_CONSUMER_TYPES). So the fold replays them as types 3, 5-8, and only what differs is said here:
- a share member's current assignment has no pending revocation (a share partition is handed over
  without one);
- a streams member owns its active tasks, one per (subtopology, partition): they stand for the twin's
  assigned partitions (and pending revocation), the subtopology id where a consumer record has a topic id.
  Its member state counts from one (1 STABLE), a consumer member's from zero;
- a streams member's metadata and current assignment say more than the twin holds (process, endpoint,
  client tags, topology epoch; standby and warm-up tasks): `streams`, read from the record's value_json,
  for the `streams_members` table (streams.py).
Records of other types (partition metadata 9 and 18, share's 15, streams' 23 and 24) are no part of the
sequence gold reads (a group deletion right after another is a repeat only when none of its records came
between), so they are left out; streams' topology records (23) are read beside it (topology.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

GROUP_PROTOCOL_CONSUMER, GROUP_PROTOCOL_SHARE, GROUP_PROTOCOL_STREAMS = "consumer", "share", "streams"
# Consumer twin types: 3 group epoch, 5 member metadata, 6 target epoch, 7 target member, 8 current member.
SHARE_AS_CONSUMER_TYPES = {11: 3, 10: 5, 12: 6, 13: 7, 14: 8}
STREAMS_AS_CONSUMER_TYPES = {17: 3, 19: 5, 20: 6, 21: 7, 22: 8}
RECORD_MEMBER_METADATA, RECORD_TARGET_MEMBER, RECORD_CURRENT_MEMBER = 5, 7, 8
# Streams MemberState counts from 1 STABLE; a consumer member's from 0 STABLE (streams_records.py).
STREAMS_STATE_OFFSET = 1
TASK_KINDS = ("active", "standby", "warmup")


def group_protocol(record_type: int) -> str | None:
    """The kind of group a share or streams record belongs to (None: another type)."""
    if record_type in SHARE_AS_CONSUMER_TYPES:
        return GROUP_PROTOCOL_SHARE
    if record_type in STREAMS_AS_CONSUMER_TYPES:
        return GROUP_PROTOCOL_STREAMS
    return None


def _as_topic_partitions(tasks: list | None) -> list[dict]:
    return [{"topic_id": task["subtopology_id"], "partitions": list(task["partitions"] or [])} for task in tasks or []]


def _tasks(value: Mapping, name: str) -> list[dict] | None:
    """A task list of a streams record's value, as Spark's from_json reads it into TaskIds (extra fields,
    such as active tasks' assignment epochs, dropped)."""
    tasks = value.get(name)
    if tasks is None:
        return None
    return [{"subtopology_id": t.get("subtopology_id"), "partitions": t.get("partitions")} for t in tasks]


def _streams_details(record: Mapping, value: Mapping) -> dict | None:
    """What a streams member's metadata (process, endpoint, tags, topology epoch) or current assignment
    (member epoch; active, standby and warm-up tasks) says beyond its twin."""
    if record["record_type"] == RECORD_MEMBER_METADATA:
        endpoint = value.get("user_endpoint")
        return {
            "topology_epoch": value.get("topology_epoch"),
            "process_id": value.get("process_id"),
            "user_endpoint": None if endpoint is None else {"host": endpoint.get("host"), "port": endpoint.get("port")},
            "client_tags": [{"key": t.get("key"), "value": t.get("value")} for t in value.get("client_tags") or []]
            if value.get("client_tags") is not None
            else None,
        }
    if record["record_type"] == RECORD_CURRENT_MEMBER:
        return {
            "member_epoch": record["member_epoch"],
            **{f"{kind}_tasks": _tasks(value, f"{kind}_tasks") for kind in TASK_KINDS},
        }
    return None


def as_consumer_twin(record: dict, original_type: int, value_json: str | None) -> dict:
    """A shaped record (records.CONSUMER_RECORD_FIELDS) of a share or streams type, and its value as JSON ->
    its consumer twin, with `group_protocol` and (streams) `streams`; changed in place and returned."""
    protocol = group_protocol(original_type)
    record["group_protocol"] = protocol
    if protocol == GROUP_PROTOCOL_SHARE:
        record["record_type"] = SHARE_AS_CONSUMER_TYPES[original_type]
        return record
    record["record_type"] = STREAMS_AS_CONSUMER_TYPES[original_type]
    if record["member_state"] is not None:
        record["member_state"] -= STREAMS_STATE_OFFSET
    value = {} if record["is_tombstone"] or value_json is None else json.loads(value_json)
    if record["record_type"] in (RECORD_TARGET_MEMBER, RECORD_CURRENT_MEMBER) and not record["is_tombstone"]:
        record["assigned_partitions"] = _as_topic_partitions(_tasks(value, "active_tasks"))
        record["partitions_pending_revocation"] = _as_topic_partitions(_tasks(value, "active_tasks_pending_revocation"))
    record["streams"] = None if record["is_tombstone"] else _streams_details(record, value)
    return record
