"""Folding a group's log in one go or in two, as a first night and a continuing one would: what the fold
tests (unit, and Spark against the lab captures) compare.

A log is the group's records (records.classic_records' or records.consumer_records' shape) and its counted
commits as dicts with `topic`, `partition`, `record_at` and the log position (`source_partition`,
`source_offset`). A KIP-848 group's topic names (`names`, fold's `topic_names`) are the same for both folds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from transforms.history.fold import TABLES, Rows, State, fold
from transforms.history.records import classic_records
from transforms.history.settings import DEFAULT_SETTINGS, HistorySettings

LOG_ORDER = ("source_partition", "source_offset")


def commit_times(commits: Sequence[Mapping]) -> list[tuple]:
    return [(c["topic"], c["partition"], c["record_at"]) for c in commits]


def replaced(stored: Mapping[str, list], rows: Rows) -> dict[str, list]:
    """A group's stored rows with a fold's rows in place of those they replace."""
    return {
        name: [row for row in stored.get(name, []) if not rows.replaces(name, row)] + rows.tables[name]
        for name in TABLES
    }


def fold_at_once(records, commits, settings: HistorySettings = DEFAULT_SETTINGS, names=None) -> dict[str, list]:
    rows, _ = fold(None, records, commit_times(commits), settings, names)
    return rows.tables


def fold_in_two(
    records, commits, cut: int, settings: HistorySettings = DEFAULT_SETTINGS, names=None
) -> dict[str, list]:
    """Folds the log up to position `cut` (counted over records and commits in log order), stores the
    state as JSON would, then folds the rest from it: the second fold reads the commits from the state's
    `commits_from` on (all after the cut when it names none)."""
    log = sorted([*records, *commits], key=lambda item: tuple(item[name] for name in LOG_ORDER))
    before, after = log[:cut], log[cut:]
    first, state = fold(None, _records(before), commit_times(_commits(before)), settings, names)
    stored = replaced({}, first)
    if state is not None:  # stored as the state table would hold it
        state = State.from_dict(json.loads(json.dumps(state.to_dict())))
    if state is not None and state.commits_from is not None:
        later = [c for c in commits if c["record_at"] >= state.commits_from]
    else:
        later = _commits(after)
    second, _ = fold(state, _records(after), commit_times(later), settings, names)
    return replaced(stored, second)


def in_order(tables: Mapping[str, list]) -> dict[str, list]:
    """Folded rows in one order: enough to compare two folds' tables, and much cheaper than table_rows."""
    return {name: sorted(tables.get(name, []), key=repr) for name in TABLES}


def _is_record(item: Mapping) -> bool:
    return "members" in item or "record_type" in item


def _records(log: Sequence[Mapping]) -> list[Mapping]:
    return [item for item in log if _is_record(item)]


def _commits(log: Sequence[Mapping]) -> list[Mapping]:
    return [item for item in log if not _is_record(item)]


# Silver rows by keyword, for sequences written out in tests. Times are seconds after T0.
CLUSTER, GROUP_ID = "c1", "orders-app"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def member(
    member_id: str,
    assigned: Mapping[str, Sequence[int]],
    topics: Sequence[str] = ("Order", "Stock"),
    instance: str | None = None,
    session_ms: int = 10_000,
    rebalance_ms: int = 60_000,
) -> dict:
    """A silver `group_members` row (without its record's columns)."""
    return {
        "member_id": member_id,
        "group_instance_id": instance,
        "client_id": f"client-{instance or member_id}",
        "client_host": "/10.0.0.1",
        "rack_id": None,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": rebalance_ms,
        "subscribed_topics": list(topics),
        "assigned_partitions": [{"topic": topic, "partitions": list(parts)} for topic, parts in assigned.items()],
    }


def record(
    offset: int,
    seconds: float,
    generation: int | None,
    members: Sequence[Mapping] = (),
    assignor: str = "range",
    joined_at: float | None = None,
) -> tuple[dict, list[dict]]:
    """A silver `group_metadata` row and its `group_members` rows; generation None is a tombstone."""
    record_id = f"{CLUSTER}/0/{offset}"
    is_tombstone = generation is None
    metadata = {
        "cluster": CLUSTER,
        "group_id": GROUP_ID,
        "record_id": record_id,
        "source_partition": 0,
        "source_offset": offset,
        "record_at": at(seconds),
        "is_tombstone": is_tombstone,
        "protocol_type": None if is_tombstone else "consumer",
        "generation": generation,
        "protocol": None if is_tombstone else assignor,
        "leader": None if is_tombstone or not members else members[0]["member_id"],
        "state_changed_at": None if is_tombstone else at(seconds if joined_at is None else joined_at),
    }
    written = [{**m, "record_id": record_id, "member_index": index} for index, m in enumerate(members)]
    return metadata, written


def commit(offset: int, seconds: float, topic: str, partition: int) -> dict:
    return {
        "source_partition": 0,
        "source_offset": offset,
        "record_at": at(seconds),
        "topic": topic,
        "partition": partition,
    }


def records(*written: tuple[dict, list[dict]]) -> list[dict]:
    return classic_records([metadata for metadata, _ in written], [m for _, members in written for m in members])
