"""A classic group's silver rows shaped as the fold's input: one record per `group_metadata` row, in log
order, with its members (from `group_members`, in their written order) as gold's MEMBER holds them.

Rows are mappings with silver's column names (schemas/silver.py), as Arrow batches or collected rows give
them. `member_assignments` is not read: a member's `assigned_partitions` holds the same partitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

LOG_ORDER = ("source_partition", "source_offset")
MEMBER_FIELDS = (
    "member_id",
    "group_instance_id",
    "client_id",
    "client_host",
    "rack_id",
    "session_timeout_ms",
    "rebalance_timeout_ms",
    "subscribed_topics",
)
RECORD_FIELDS = (
    "cluster",
    "group_id",
    "record_id",
    *LOG_ORDER,
    "record_at",
    "is_tombstone",
    "protocol_type",
    "generation",
    "protocol",
    "leader",
    "state_changed_at",
)


def gold_member(row: Mapping) -> dict:
    """A silver member row -> gold's MEMBER (classic: no target, no ownership; topics named, no ids)."""
    assigned = [
        {"topic": tp["topic"], "partitions": list(tp["partitions"]), "topic_id": None, "topic_name_source": None}
        for tp in row["assigned_partitions"] or []
    ]
    subscribed = row["subscribed_topics"]
    return {
        **{name: row[name] for name in MEMBER_FIELDS},
        "subscribed_topics": None if subscribed is None else list(subscribed),
        "assigned_partitions": assigned,
        "target_partitions": None,
        "ownership": None,
    }


def classic_records(metadata_rows: Iterable[Mapping], member_rows: Iterable[Mapping]) -> list[dict]:
    """One group's `group_metadata` and `group_members` rows -> its records in log order, each with the
    fields of RECORD_FIELDS and `members` (a tombstone has none)."""
    members_by_record: dict[str, list[Mapping]] = {}
    for row in member_rows:
        members_by_record.setdefault(row["record_id"], []).append(row)
    records = []
    for row in metadata_rows:
        written = sorted(members_by_record.get(row["record_id"], []), key=lambda member: member["member_index"])
        records.append({**{name: row[name] for name in RECORD_FIELDS}, "members": [gold_member(m) for m in written]})
    return sorted(records, key=lambda record: tuple(record[name] for name in LOG_ORDER))
