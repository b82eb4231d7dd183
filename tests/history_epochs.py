"""KIP-848 records written out for the fold's tests: silver `consumer_group_records` rows by keyword, shaped
by records.consumer_records. Times are seconds after tests.history_fold.T0; one topic, Order, named
through the fold's `topic_names` from its id."""

from __future__ import annotations

from collections.abc import Sequence

from tests.history_fold import CLUSTER, GROUP_ID, at
from transforms.history.records import consumer_records

ORDER_ID = "b3JkZXJzLXRvcGljLWlkAA"
NAMES = {ORDER_ID: ("Order", "offset_commit")}
STABLE, UNREVOKED, UNRELEASED = 0, 1, 2


def row(offset: int, seconds: float, record_type: int, is_tombstone: bool = False, **fields) -> dict:
    """A silver `consumer_group_records` row of any type; the columns not given are null."""
    columns = {
        "member_id": None,
        "regular_expression": None,
        "group_epoch": None,
        "assignment_epoch": None,
        "member_epoch": None,
        "member_state": None,
        "instance_id": None,
        "client_id": None,
        "client_host": None,
        "rack_id": None,
        "rebalance_timeout_ms": None,
        "server_assignor": None,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "assigned_partitions": None,
        "partitions_pending_revocation": None,
        "resolved_topics": None,
        "value_json": None,
    }
    columns.update(fields)
    return {
        "cluster": CLUSTER,
        "group_id": GROUP_ID,
        "source_partition": 0,
        "source_offset": offset,
        "record_at": at(seconds),
        "record_type": record_type,
        "is_tombstone": is_tombstone,
        **columns,
    }


def _on_order(partitions: Sequence[int]) -> list[dict]:
    return [{"topic_id": ORDER_ID, "partitions": list(partitions)}] if partitions else []


def group_epoch(offset: int, seconds: float, epoch: int) -> dict:
    return row(offset, seconds, 3, group_epoch=epoch)


def joined(offset: int, seconds: float, member_id: str, topics: Sequence[str] = ("Order",)) -> dict:
    """Member metadata (type 5): the member joined (or changed its subscription)."""
    return row(
        offset,
        seconds,
        5,
        member_id=member_id,
        client_id=f"client-{member_id}",
        client_host="/10.0.0.1",
        rebalance_timeout_ms=60_000,
        server_assignor="uniform",
        subscribed_topic_names=list(topics),
        subscribed_topic_regex="",
    )


def target(offset: int, seconds: float, member_id: str, partitions: Sequence[int]) -> dict:
    return row(offset, seconds, 7, member_id=member_id, assigned_partitions=_on_order(partitions))


def target_epoch(offset: int, seconds: float, epoch: int) -> dict:
    return row(offset, seconds, 6, assignment_epoch=epoch)


def current(
    offset: int,
    seconds: float,
    member_id: str,
    epoch: int,
    partitions: Sequence[int],
    pending: Sequence[int] = (),
    state: int = STABLE,
) -> dict:
    """A current member assignment (type 8): what the member owns, and holds until it has revoked it."""
    return row(
        offset,
        seconds,
        8,
        member_id=member_id,
        member_epoch=epoch,
        member_state=state,
        assigned_partitions=_on_order(partitions),
        partitions_pending_revocation=_on_order(pending),
    )


def fenced(offset: int, seconds: float, member_id: str) -> list[dict]:
    """The tombstones of a member that left or was fenced: current assignment, target, metadata."""
    return [row(offset + index, seconds, kind, True, member_id=member_id) for index, kind in enumerate((8, 7, 5))]


def records(*rows: dict | list[dict]) -> list[dict]:
    flat = [item for row in rows for item in (row if isinstance(row, list) else [row])]
    return consumer_records(flat)
