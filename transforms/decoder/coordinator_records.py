"""Decodes one `__consumer_offsets` or `__share_group_state` record (key bytes, value bytes) into typed
Python values.

Dispatch is on the topic, then on the key's int16 record type (kafka-record-formats.md section 1): both
topics number their types from 0, so type 1 is an offset commit in one and a ShareUpdate in the other,
and a record is never read with the other topic's declarations. Classic group
members' embedded subscription/assignment bytes are decoded by protocol type and assignor (section
5). `decode_record` never raises: an undecodable record comes back with `error` set, so callers can
quarantine it with the reason.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from schemas.coordinator_records import CONSUMER_OFFSETS_TOPIC, RECORD_TYPE_GROUP_METADATA, RECORD_TYPES
from schemas.embedded_payloads import (
    CONNECT_ASSIGNMENT,
    CONNECT_SUBSCRIPTION,
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    PROTOCOL_TYPE_CONNECT,
    PROTOCOL_TYPE_CONSUMER,
    USER_DATA_LAYOUTS,
)
from schemas.layouts import RecordType
from schemas.share_state_records import SHARE_GROUP_STATE_TOPIC, SHARE_STATE_RECORD_TYPES
from transforms.decoder.errors import CorruptRecordError
from transforms.decoder.layout_reader import read_exact, read_versioned

_INT16 = struct.Struct(">h")
# The topics whose records groupscope decodes, and their record types.
RECORD_TYPES_BY_TOPIC: dict[str, dict[int, RecordType]] = {
    CONSUMER_OFFSETS_TOPIC: RECORD_TYPES,
    SHARE_GROUP_STATE_TOPIC: SHARE_STATE_RECORD_TYPES,
}


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    record_type: int | None
    record_type_name: str | None
    key: dict | None
    value: dict | None  # None for a tombstone or an error
    value_version: int | None  # None for a tombstone or an error
    error: str | None = None
    error_stage: str | None = None  # "key" | "value"

    @property
    def is_tombstone(self) -> bool:
        return self.error is None and self.value is None


def record_types(topic: str | None) -> dict[int, RecordType]:
    """The record types of a topic; None is `__consumer_offsets`, all groupscope read before it read
    `__share_group_state` (raw records of earlier versions name no topic). Another topic raises."""
    known = RECORD_TYPES_BY_TOPIC.get(CONSUMER_OFFSETS_TOPIC if topic is None else topic)
    if known is None:
        raise CorruptRecordError("key", f"a record of {' or '.join(RECORD_TYPES_BY_TOPIC)}", f"topic {topic}")
    return known


def record_type_name(record_type: int | None, topic: str | None = None) -> str | None:
    known = RECORD_TYPES_BY_TOPIC.get(CONSUMER_OFFSETS_TOPIC if topic is None else topic, {}).get(record_type)
    return known.name if known else None


def decode_key(key: bytes, topic: str | None = None) -> tuple[int, dict]:
    types = record_types(topic)
    if key is None or len(key) < 2:
        raise CorruptRecordError("key", "an int16 record type", f"{0 if key is None else len(key)} bytes")
    record_type = _INT16.unpack_from(key, 0)[0]
    known = types.get(record_type)
    if known is None:
        raise CorruptRecordError("key", f"a record type 0-{max(types)}", f"unknown record type {record_type}")
    return record_type, read_exact(known.key_fields, f"{known.name} key", key, 2)


def decode_value(record_type: int, value: bytes, topic: str | None = None) -> tuple[int, dict]:
    known = record_types(topic)[record_type]
    if known.value is not None:
        version, fields = read_versioned(known.value, value)
    else:
        version, fields = _read_first_matching_variant(known.value_variants, value)
    if record_type == RECORD_TYPE_GROUP_METADATA and known is RECORD_TYPES[record_type]:
        _decode_member_payloads(fields)
    return version, fields


def decode_record(key: bytes | None, value: bytes | None, topic: str | None = None) -> DecodedRecord:
    """`topic`: the topic the record was read from (None: `__consumer_offsets`)."""
    try:
        record_type, key_fields = decode_key(key, topic)
    except CorruptRecordError as error:
        found_type = _INT16.unpack_from(key, 0)[0] if key is not None and len(key) >= 2 else None
        return DecodedRecord(found_type, record_type_name(found_type, topic), None, None, None, str(error), "key")
    name = record_types(topic)[record_type].name
    if value is None:
        return DecodedRecord(record_type, name, key_fields, None, None)
    try:
        version, value_fields = decode_value(record_type, value, topic)
    except CorruptRecordError as error:
        return DecodedRecord(record_type, name, key_fields, None, None, str(error), "value")
    return DecodedRecord(record_type, name, key_fields, value_fields, version)


def _read_first_matching_variant(variants, value: bytes) -> tuple[int, dict]:
    errors = []
    for variant in variants:
        try:
            return read_versioned(variant, value)
        except CorruptRecordError as error:
            errors.append(str(error))
    raise CorruptRecordError("value", "one of the known layouts", "; ".join(errors))


def _decode_member_payloads(group: dict) -> None:
    """Replaces members' opaque subscription/assignment bytes with their decoded form where known.

    For protocol type "consumer" this matches Kafka's DumpLogSegments: decoded when ConsumerProtocol
    can read them, left as bytes otherwise. Connect payloads are decoded into extra fields.
    """
    protocol_type, protocol = group["protocol_type"], group["protocol"]
    for member in group["members"]:
        if protocol_type == PROTOCOL_TYPE_CONSUMER:
            subscription = _try_versioned(CONSUMER_PROTOCOL_SUBSCRIPTION, member["subscription"])
            if subscription is not None:
                _decode_assignor_user_data(subscription, protocol)
                member["subscription"] = subscription
            assignment = _try_versioned(CONSUMER_PROTOCOL_ASSIGNMENT, member["assignment"])
            if assignment is not None:
                member["assignment"] = assignment
        elif protocol_type == PROTOCOL_TYPE_CONNECT:
            member["connect_subscription"] = _try_versioned(CONNECT_SUBSCRIPTION, member["subscription"])
            member["connect_assignment"] = _try_versioned(CONNECT_ASSIGNMENT, member["assignment"])


def _try_versioned(message, payload: bytes) -> dict | None:
    try:
        version, fields = read_versioned(message, payload, allow_trailing=True)
    except CorruptRecordError:
        return None
    return {"version": version, **fields}


def _decode_assignor_user_data(subscription: dict, protocol: str | None) -> None:
    user_data = subscription.get("user_data")
    if not user_data or protocol not in USER_DATA_LAYOUTS:
        return
    for layout in USER_DATA_LAYOUTS[protocol]:
        try:
            subscription["assignor_user_data"] = read_exact(layout, f"{protocol} user data", user_data)
            return
        except CorruptRecordError:
            continue
