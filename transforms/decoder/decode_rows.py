"""Row-level decoding: one raw record (a dict shaped like bronze `raw_records`) -> one decoded row.

The decoded row routes the record to exactly one place: `offset_commit`, `group_metadata`,
`consumer_group_record`, `share_group_state` (records of `__share_group_state`) or `quarantine` (column
`destination`). The raw row's `source_topic` says which topic's record types the key is read with.
Pure Python so it is testable without Spark; `transforms.silver` runs it over Arrow batches.
"""

from __future__ import annotations

import base64
import json

from schemas.coordinator_records import (
    OFFSET_COMMIT_TYPES,
    PARTITION_METADATA_TYPES,
    RECORD_TYPE_CONSUMER_GROUP_REGULAR_EXPRESSION,
    RECORD_TYPE_GROUP_METADATA,
)
from schemas.share_state_records import DELIVERY_COMPLETE_COUNT, SHARE_GROUP_STATE_TOPIC
from transforms.decoder.coordinator_records import DecodedRecord, decode_record

DESTINATION_OFFSET_COMMIT = "offset_commit"
DESTINATION_GROUP_METADATA = "group_metadata"
DESTINATION_CONSUMER_GROUP_RECORD = "consumer_group_record"
DESTINATION_SHARE_GROUP_STATE = "share_group_state"
DESTINATION_QUARANTINE = "quarantine"

ORIGIN_COLUMNS = ("cluster", "record_id", "source_partition", "source_offset", "record_at")
UNSET_TIMESTAMP = -1


def to_jsonable(value: object) -> object:
    """Decoded values -> JSON-ready values: bytes become base64 text, as Kafka's JSON converters do."""
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {key: to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_jsonable(item) for item in value]
    return value


def decode_raw_row(raw: dict) -> dict:
    row = {column: raw[column] for column in ORIGIN_COLUMNS}
    row.update(txn_state=raw.get("txn_state"), producer_id=raw.get("producer_id"))
    if raw.get("read_error"):
        return _quarantine(row, raw, "read", raw["read_error"], None)
    topic = raw.get("source_topic")
    decoded = decode_record(raw.get("key"), raw.get("value"), topic)
    if decoded.error is not None:
        return _quarantine(row, raw, decoded.error_stage, decoded.error, decoded.record_type)
    row.update(
        record_type=decoded.record_type,
        record_type_name=decoded.record_type_name,
        value_version=decoded.value_version,
        is_tombstone=decoded.is_tombstone,
    )
    if topic == SHARE_GROUP_STATE_TOPIC:
        row.update(share_state_columns(decoded), destination=DESTINATION_SHARE_GROUP_STATE)
    elif decoded.record_type in OFFSET_COMMIT_TYPES:
        row.update(_offset_commit_columns(decoded), destination=DESTINATION_OFFSET_COMMIT)
    elif decoded.record_type == RECORD_TYPE_GROUP_METADATA:
        row.update(_group_metadata_columns(decoded), destination=DESTINATION_GROUP_METADATA)
    else:
        row.update(_consumer_group_columns(decoded), destination=DESTINATION_CONSUMER_GROUP_RECORD)
    return row


def _quarantine(row: dict, raw: dict, stage: str, reason: str, record_type: int | None) -> dict:
    row.update(
        destination=DESTINATION_QUARANTINE,
        stage=stage,
        reason=reason,
        record_type=record_type,
        key=raw.get("key"),
        value=raw.get("value"),
        source_file=raw.get("source_file"),
        capture_run_id=raw.get("capture_run_id"),
    )
    return row


def _timestamp(value: int | None) -> int | None:
    return None if value is None or value == UNSET_TIMESTAMP else value


def _offset_commit_columns(decoded: DecodedRecord) -> dict:
    key, value = decoded.key, decoded.value or {}
    return {
        "group_id": key["group"],
        "topic": key["topic"],
        "partition": key["partition"],
        "committed_offset": value.get("offset"),
        "leader_epoch": value.get("leader_epoch"),
        "metadata": value.get("metadata"),
        "committed_at_ms": value.get("commit_timestamp"),
        "expires_at_ms": _timestamp(value.get("expire_timestamp")),
        "topic_id": value.get("topic_id"),
    }


def _group_metadata_columns(decoded: DecodedRecord) -> dict:
    value = decoded.value or {}
    members = value.get("members") or []
    return {
        "group_id": decoded.key["group"],
        "protocol_type": value.get("protocol_type"),
        "generation": value.get("generation"),
        "protocol": value.get("protocol"),
        "leader": value.get("leader"),
        "state_changed_at_ms": _timestamp(value.get("current_state_timestamp")),
        "member_count": len(members) if decoded.value is not None else None,
        "members": [_member_columns(index, member) for index, member in enumerate(members)],
    }


def _member_columns(index: int, member: dict) -> dict:
    subscription, assignment = member["subscription"], member["assignment"]
    row = {
        "member_index": index,
        "member_id": member["member_id"],
        "group_instance_id": member.get("group_instance_id"),
        "client_id": member["client_id"],
        "client_host": member["client_host"],
        "rebalance_timeout_ms": member.get("rebalance_timeout"),
        "session_timeout_ms": member["session_timeout"],
        "payload_json": None,
        "payload_error": None,
    }
    if isinstance(subscription, dict):
        user_data = subscription.get("assignor_user_data") or {}
        row.update(
            subscription_version=subscription["version"],
            subscribed_topics=subscription["topics"],
            owned_partitions=subscription.get("owned_partitions"),
            subscription_generation_id=subscription.get("generation_id"),
            rack_id=subscription.get("rack_id"),
            assignor_generation=user_data.get("generation"),
            subscription_user_data=subscription.get("user_data"),
        )
    if isinstance(assignment, dict):
        row.update(
            assignment_version=assignment["version"],
            assigned_partitions=assignment["assigned_partitions"],
            assignment_user_data=assignment.get("user_data"),
        )
    connect = {name: member[name] for name in ("connect_subscription", "connect_assignment") if name in member}
    if connect:
        row["payload_json"] = json.dumps(to_jsonable(connect), sort_keys=True)
    unread = [
        name
        for name, payload in (("subscription", subscription), ("assignment", assignment))
        if isinstance(payload, bytes) and payload
    ]
    if unread and (connect == {} or None in connect.values()):
        row["payload_error"] = f"{' and '.join(unread)} bytes not readable as the group's protocol"
    return row


def _consumer_group_columns(decoded: DecodedRecord) -> dict:
    key, value = decoded.key, decoded.value or {}
    assigned = value.get("assigned_partitions", value.get("topic_partitions"))
    return {
        "group_id": key["group_id"],
        "member_id": key.get("member_id"),
        "regular_expression": key.get("regular_expression"),
        "group_epoch": value.get("epoch"),
        "metadata_hash": value.get("metadata_hash"),
        "assignment_epoch": value.get("assignment_epoch"),
        "assignment_at_ms": value.get("assignment_timestamp") or None,
        "member_epoch": value.get("member_epoch"),
        "previous_member_epoch": value.get("previous_member_epoch"),
        "member_state": value.get("state"),
        "instance_id": value.get("instance_id"),
        "rack_id": value.get("rack_id"),
        "client_id": value.get("client_id"),
        "client_host": value.get("client_host"),
        "subscribed_topic_names": value.get("subscribed_topic_names"),
        "subscribed_topic_regex": value.get("subscribed_topic_regex"),
        "rebalance_timeout_ms": value.get("rebalance_timeout_ms"),
        "server_assignor": value.get("server_assignor"),
        "assigned_partitions": _topic_id_partitions(assigned),
        "partitions_pending_revocation": _topic_id_partitions(value.get("partitions_pending_revocation")),
        "topic_names": _topic_names(value) if decoded.record_type in PARTITION_METADATA_TYPES else None,
        "resolved_topics": (
            value.get("topics") if decoded.record_type == RECORD_TYPE_CONSUMER_GROUP_REGULAR_EXPRESSION else None
        ),
        "value_json": None if decoded.value is None else json.dumps(to_jsonable(value), sort_keys=True),
    }


def _topic_id_partitions(items: list | None) -> list | None:
    if items is None:
        return None
    return [{"topic_id": item["topic_id"], "partitions": item["partitions"]} for item in items]


def _topic_names(value: dict) -> list[dict] | None:
    topics = value.get("topics")
    if topics is None:
        return None
    return [
        {
            "topic_id": topic["topic_id"],
            "topic_name": topic["topic_name"],
            "num_partitions": topic["num_partitions"],
        }
        for topic in topics
    ]


def share_state_columns(decoded: DecodedRecord) -> dict:
    """A ShareSnapshot/ShareUpdate as the silver `share_group_state` row holds it: every field Kafka
    wrote, as written (an update's start_offset -1 means "not moved"; an absent delivery_complete_count
    is the -1 Kafka's generated code gives it). Fields a record type lacks (an update's state epoch and
    timestamps) and every value field of a tombstone are null."""
    key, value = decoded.key, decoded.value or {}
    return {
        "group_id": key["group_id"],
        "topic_id": key["topic_id"],
        "partition": key["partition"],
        "snapshot_epoch": value.get("snapshot_epoch"),
        "state_epoch": value.get("state_epoch"),
        "leader_epoch": value.get("leader_epoch"),
        "start_offset": value.get("start_offset"),
        "delivery_complete_count": value.get("delivery_complete_count", DELIVERY_COMPLETE_COUNT.default)
        if decoded.value is not None
        else None,
        "state_created_at_ms": value.get("create_timestamp"),
        "state_written_at_ms": value.get("write_timestamp"),
        "state_batches": value.get("state_batches"),
    }
