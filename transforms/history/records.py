"""A classic group's silver rows shaped as the fold's input: one record per `group_metadata` row, in log
order, with its members (from `group_members`, in their written order) as gold's MEMBER holds them.

Rows are mappings with silver's column names (schemas/silver.py), as Arrow batches or collected rows give
them. `member_assignments` is not read: a member's `assigned_partitions` holds the same partitions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from transforms.history import topology, twins

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


# KIP-848 records (types 3-8, 16): what the fold reads of silver `consumer_group_records`. Type 4 (partition
# metadata) names topics, outside the fold (its `topic_names` input), but stays in the sequence: a group
# deletion right after another is a repeat only when no record came between.
CONSUMER_GROUP_RECORD_TYPES = (3, 4, 5, 6, 7, 8, 16)
# What a member's metadata (type 5) says of it.
MEMBER_METADATA_FIELDS = (
    "instance_id",
    "client_id",
    "client_host",
    "rack_id",
    "rebalance_timeout_ms",
    "server_assignor",
    "subscribed_topic_names",
    "subscribed_topic_regex",
)
CONSUMER_RECORD_FIELDS = (
    "cluster",
    "group_id",
    *LOG_ORDER,
    "record_at",
    "record_type",
    "is_tombstone",
    "member_id",
    "regular_expression",
    "group_epoch",
    "assignment_epoch",
    "member_epoch",
    "member_state",
    *MEMBER_METADATA_FIELDS,
    "assigned_partitions",
    "partitions_pending_revocation",
    "resolved_topics",
)


def _topic_id_partitions(value) -> list[dict] | None:
    if value is None:
        return None
    return [{"topic_id": tp["topic_id"], "partitions": list(tp["partitions"] or [])} for tp in value]


def _topology_record(row: Mapping) -> dict:
    """A streams topology record: outside the epoch sequence, its value only compared (topology.py)."""
    fields = ("cluster", "group_id", *LOG_ORDER, "record_at", "record_type", "is_tombstone")
    record = {name: row[name] for name in fields}
    record["topology"] = None if row["is_tombstone"] else row["value_json"]
    record["group_protocol"] = twins.GROUP_PROTOCOL_STREAMS
    return record


def consumer_records(rows: Iterable[Mapping]) -> list[dict]:
    """One KIP-848, share or streams group's `consumer_group_records` rows -> its records of
    CONSUMER_GROUP_RECORD_TYPES and their share and streams twins (twins.py) in log order, each with the
    fields of CONSUMER_RECORD_FIELDS (topic-id partitions as plain lists) and `group_protocol`, and its
    streams topology records (`_topology_record`)."""
    records = []
    for row in rows:
        kind = row["record_type"]
        if kind == topology.RECORD_STREAMS_TOPOLOGY:
            records.append(_topology_record(row))
            continue
        if kind not in CONSUMER_GROUP_RECORD_TYPES and twins.group_protocol(kind) is None:
            continue
        record = {name: row[name] for name in CONSUMER_RECORD_FIELDS}
        if kind in CONSUMER_GROUP_RECORD_TYPES:
            record["group_protocol"] = twins.GROUP_PROTOCOL_CONSUMER
        else:
            twins.as_consumer_twin(record, kind, row["value_json"])
        for name in ("assigned_partitions", "partitions_pending_revocation"):
            record[name] = _topic_id_partitions(record[name])
        for name in ("subscribed_topic_names", "resolved_topics"):
            record[name] = None if record[name] is None else list(record[name])
        records.append(record)
    return sorted(records, key=lambda record: tuple(record[name] for name in LOG_ORDER))
