"""Share (KIP-932) and streams (KIP-1071) records written out for the fold's tests: silver
`consumer_group_records` rows by keyword, shaped by records.consumer_records. Times are seconds after
tests.history_fold.T0. A share group reads topic Tasks (named through the fold's `topic_names` from its
id); a streams member's tasks are {subtopology id: partitions}, held in the record's value as JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from tests.history_epochs import row

TASKS_ID = "dGFza3MtdG9waWMtaWQAAA"
SHARE_NAMES = {TASKS_ID: ("Tasks", "partition_metadata")}
STREAMS_STABLE, STREAMS_UNREVOKED = 1, 2  # streams MemberState numbering (a consumer member's plus one)
Tasks = Mapping[str, Sequence[int]]


def _on_tasks(partitions: Sequence[int]) -> list[dict]:
    return [{"topic_id": TASKS_ID, "partitions": list(partitions)}] if partitions else []


def share_joined(offset: int, seconds: float, member_id: str) -> dict:
    """Share member metadata (type 10): no instance id, assignor or rebalance timeout."""
    return row(
        offset, seconds, 10, member_id=member_id, client_id=f"client-{member_id}", client_host="/10.0.0.2",
        subscribed_topic_names=["Tasks"],
    )  # fmt: skip


def share_epoch(offset: int, seconds: float, epoch: int) -> dict:
    return row(offset, seconds, 11, group_epoch=epoch)


def share_target(offset: int, seconds: float, member_id: str, partitions: Sequence[int]) -> dict:
    return row(offset, seconds, 13, member_id=member_id, assigned_partitions=_on_tasks(partitions))


def share_target_epoch(offset: int, seconds: float, epoch: int) -> dict:
    return row(offset, seconds, 12, assignment_epoch=epoch)


def share_current(offset: int, seconds: float, member_id: str, epoch: int, partitions: Sequence[int]) -> dict:
    """A share member's current assignment (type 14): a share partition is handed over with no revocation."""
    return row(
        offset, seconds, 14, member_id=member_id, member_epoch=epoch, member_state=0,
        assigned_partitions=_on_tasks(partitions),
    )  # fmt: skip


def share_left(offset: int, seconds: float, member_id: str) -> list[dict]:
    """The tombstones of a share member that left or was fenced: current assignment, target, metadata."""
    return [row(offset + index, seconds, kind, True, member_id=member_id) for index, kind in enumerate((14, 13, 10))]


def _task_ids(tasks: Tasks) -> list[dict]:
    return [{"subtopology_id": subtopology, "partitions": list(parts)} for subtopology, parts in tasks.items()]


def streams_joined(offset: int, seconds: float, member_id: str, port: int) -> dict:
    """Streams member metadata (type 19), its process, endpoint and tags in its value."""
    value = {
        "client_host": "/10.0.0.3", "client_id": f"{member_id}-StreamThread-1-consumer", "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 60_000, "topology_epoch": 0, "process_id": f"process-{member_id}",
        "user_endpoint": {"host": "10.0.0.3", "port": port}, "client_tags": [{"key": "zone", "value": "a"}],
    }  # fmt: skip
    return row(
        offset, seconds, 19, member_id=member_id, client_id=value["client_id"], client_host=value["client_host"],
        rebalance_timeout_ms=60_000, value_json=json.dumps(value),
    )  # fmt: skip


def streams_epoch(offset: int, seconds: float, epoch: int) -> dict:
    return row(offset, seconds, 17, group_epoch=epoch)


def streams_target(offset: int, seconds: float, member_id: str, active: Tasks, standby: Tasks | None = None) -> dict:
    value = {"active_tasks": _task_ids(active), "standby_tasks": _task_ids(standby or {}), "warmup_tasks": []}
    return row(offset, seconds, 21, member_id=member_id, value_json=json.dumps(value))


def streams_target_epoch(offset: int, seconds: float, epoch: int) -> dict:
    return row(offset, seconds, 20, assignment_epoch=epoch)


def streams_current(
    offset: int,
    seconds: float,
    member_id: str,
    epoch: int,
    active: Tasks,
    standby: Tasks | None = None,
    pending: Tasks | None = None,
    state: int = STREAMS_STABLE,
) -> dict:
    """A streams member's current assignment (type 22): its active tasks (and those it has yet to revoke),
    standby and warm-up tasks, in its value."""
    value = {
        "member_epoch": epoch, "state": state, "active_tasks": _task_ids(active),
        "active_tasks_pending_revocation": _task_ids(pending or {}), "standby_tasks": _task_ids(standby or {}),
        "warmup_tasks": [],
    }  # fmt: skip
    return row(
        offset, seconds, 22, member_id=member_id, member_epoch=epoch, member_state=state, value_json=json.dumps(value)
    )


def streams_left(offset: int, seconds: float, member_id: str) -> list[dict]:
    """The tombstones of a streams member that left or was fenced: current assignment, target, metadata."""
    return [row(offset + index, seconds, kind, True, member_id=member_id) for index, kind in enumerate((22, 21, 19))]
