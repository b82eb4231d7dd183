"""Decodes one `__consumer_offsets` record (key bytes, value bytes) into typed Python values.

Dispatch is on the key's int16 record type (kafka-record-formats.md section 1); classic group
members' embedded subscription/assignment bytes are decoded by protocol type and assignor (section
5). `decode_record` never raises: an undecodable record comes back with `error` set, so callers can
quarantine it with the reason.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from schemas.coordinator_records import RECORD_TYPE_GROUP_METADATA, RECORD_TYPES
from schemas.embedded_payloads import (
    CONNECT_ASSIGNMENT,
    CONNECT_SUBSCRIPTION,
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    PROTOCOL_TYPE_CONNECT,
    PROTOCOL_TYPE_CONSUMER,
    USER_DATA_LAYOUTS,
)
from transforms.decoder.errors import CorruptRecordError
from transforms.decoder.layout_reader import read_exact, read_versioned

_INT16 = struct.Struct(">h")


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


def record_type_name(record_type: int | None) -> str | None:
    known = RECORD_TYPES.get(record_type)
    return known.name if known else None


def decode_key(key: bytes) -> tuple[int, dict]:
    if key is None or len(key) < 2:
        raise CorruptRecordError("key", "an int16 record type", f"{0 if key is None else len(key)} bytes")
    record_type = _INT16.unpack_from(key, 0)[0]
    known = RECORD_TYPES.get(record_type)
    if known is None:
        raise CorruptRecordError("key", "a record type 0-24", f"unknown record type {record_type}")
    return record_type, read_exact(known.key_fields, f"{known.name} key", key, 2)


def decode_value(record_type: int, value: bytes) -> tuple[int, dict]:
    known = RECORD_TYPES[record_type]
    if known.value is not None:
        version, fields = read_versioned(known.value, value)
    else:
        version, fields = _read_first_matching_variant(known.value_variants, value)
    if record_type == RECORD_TYPE_GROUP_METADATA:
        _decode_member_payloads(fields)
    return version, fields


def decode_record(key: bytes | None, value: bytes | None) -> DecodedRecord:
    try:
        record_type, key_fields = decode_key(key)
    except CorruptRecordError as error:
        found_type = _INT16.unpack_from(key, 0)[0] if key is not None and len(key) >= 2 else None
        return DecodedRecord(found_type, record_type_name(found_type), None, None, None, str(error), "key")
    name = RECORD_TYPES[record_type].name
    if value is None:
        return DecodedRecord(record_type, name, key_fields, None, None)
    try:
        version, value_fields = decode_value(record_type, value)
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
