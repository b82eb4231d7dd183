"""Byte-exact decoding of every record version, and clear errors for bad bytes. No Spark."""

from __future__ import annotations

import uuid

import pytest

from bench.encoding import (
    array,
    blob,
    compact_array,
    compact_blob,
    compact_string,
    i8,
    i16,
    i32,
    i64,
    string,
    tags,
    topic_partitions,
    uvarint,
)
from transforms.decoder.coordinator_records import decode_record
from transforms.decoder.errors import CorruptRecordError
from transforms.decoder.layout_reader import read_uvarint, uuid_to_kafka_string

h = bytes.fromhex
KEY_MY_GROUP_ORDERS_3 = h("000100086d792d67726f757000066f726465727300000003")  # reference section 12.1
TS = 1700000000000
TOPIC_UUID = uuid.UUID("30a5f1d5-f224-432d-89f6-35c784af26d7")
TOPIC_ID = "MKXx1fIkQy2J9jXHhK8m1w"  # Kafka's Uuid.toString() of TOPIC_UUID


def decode_ok(key: bytes, value: bytes | None):
    decoded = decode_record(key, value)
    assert decoded.error is None, decoded.error
    return decoded


# --- offset commits, every value version -------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "version", "expected"),
    [
        (i16(0) + i64(42) + string("") + i64(TS), 0, {"offset": 42, "metadata": "", "commit_timestamp": TS}),
        (
            h("0001000000000000002a00000000018bcfe568000000018bd50bc400"),
            1,
            {"offset": 42, "metadata": "", "commit_timestamp": TS, "expire_timestamp": 1700086400000},
        ),
        (
            i16(2) + i64(42) + string("m") + i64(TS),
            2,
            {"offset": 42, "metadata": "m", "commit_timestamp": TS},
        ),
        (
            h("0003000000000000002a0000000500000000018bcfe56800"),
            3,
            {"offset": 42, "leader_epoch": 5, "metadata": "", "commit_timestamp": TS},
        ),
        (
            h("0004000000000000002a00000005010000018bcfe5680000"),
            4,
            {"offset": 42, "leader_epoch": 5, "metadata": "", "commit_timestamp": TS},
        ),
        (
            h("0004000000000000002a00000005010000018bcfe5680001001030a5f1d5f224432d89f635c784af26d7"),
            4,
            {"offset": 42, "leader_epoch": 5, "metadata": "", "commit_timestamp": TS, "topic_id": TOPIC_ID},
        ),
        # franz-go #1105: a real 4.1 value, the one that broke KMinion and franz-go.
        (
            h("0004000000000021d4a8ffffffff010000019964f2d83600"),
            4,
            {"offset": 0x21D4A8, "leader_epoch": -1, "metadata": "", "commit_timestamp": 0x0000019964F2D836},
        ),
    ],
)
def test_offset_commit_value_versions(value, version, expected):
    decoded = decode_ok(KEY_MY_GROUP_ORDERS_3, value)
    assert decoded.record_type_name == "offset_commit"
    assert decoded.key == {"group": "my-group", "topic": "orders", "partition": 3}
    assert (decoded.value_version, decoded.value) == (version, expected)


def test_offset_commit_v4_skips_unknown_tags_and_keeps_topic_id():
    value = (
        i16(4) + i64(7) + i32(-1) + compact_string("meta") + i64(TS) + tags({0: TOPIC_UUID.bytes, 9: b"\x01\x02\x03"})
    )
    assert decode_ok(KEY_MY_GROUP_ORDERS_3, value).value == {
        "offset": 7,
        "leader_epoch": -1,
        "metadata": "meta",
        "commit_timestamp": TS,
        "topic_id": TOPIC_ID,
    }


def test_offset_tombstone_has_key_and_no_value():
    decoded = decode_ok(KEY_MY_GROUP_ORDERS_3, None)
    assert decoded.is_tombstone and decoded.value is None and decoded.value_version is None


def test_uuid_is_rendered_as_kafka_base64url():
    assert uuid_to_kafka_string(TOPIC_UUID.bytes) == TOPIC_ID
    assert uuid_to_kafka_string(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID
    # The URL-safe alphabet and no padding (Java's Base64.getUrlEncoder().withoutPadding()).
    assert uuid_to_kafka_string(bytes(range(240, 256))) == "8PHy8_T19vf4-fr7_P3-_w"


# --- classic group metadata, every version, with embedded consumer payloads ---------------------

SUBSCRIPTION_V0 = i16(0) + array(["orders"], string) + blob(None)
SUBSCRIPTION_V1 = (
    i16(1) + array(["orders"], string) + blob(b"") + array([("orders", [0])], lambda tp: topic_partitions(*tp))
)
SUBSCRIPTION_V3 = h("00030000000100066f7264657273ffffffff00000000ffffffffffff")
SUBSCRIPTION_V9 = i16(9) + array(["orders"], string) + blob(None) + i32(0) + i32(4) + string("rack-a") + b"future"
ASSIGNMENT_V0 = i16(0) + array([("orders", [0, 1, 2])], lambda tp: topic_partitions(*tp)) + blob(None)


def member_v(version: int, subscription: bytes, assignment: bytes) -> bytes:
    return (
        string("m-1")
        + (string("static-1") if version >= 3 else b"")
        + string("client")
        + string("/10.0.0.1")
        + (i32(300000) if version >= 1 else b"")
        + i32(45000)
        + blob(subscription)
        + blob(assignment)
    )


def group_value(version: int, members: list[bytes], protocol: str | None = "range") -> bytes:
    return (
        i16(version)
        + string("consumer")
        + i32(3)
        + string(protocol)
        + string("m-1" if members else None)
        + (i64(TS) if version >= 2 else b"")
        + i32(len(members))
        + b"".join(members)
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_metadata_classic_versions(version):
    decoded = decode_ok(
        h("000200086d792d67726f7570"),
        group_value(version, [member_v(version, SUBSCRIPTION_V0, ASSIGNMENT_V0)]),
    )
    value = decoded.value
    assert decoded.value_version == version
    assert (value["protocol_type"], value["generation"], value["protocol"], value["leader"]) == (
        "consumer",
        3,
        "range",
        "m-1",
    )
    assert ("current_state_timestamp" in value) == (version >= 2)
    member = value["members"][0]
    assert member.get("group_instance_id", "absent") == ("static-1" if version >= 3 else "absent")
    assert member.get("rebalance_timeout", "absent") == (300000 if version >= 1 else "absent")
    assert member["subscription"] == {"version": 0, "topics": ["orders"], "user_data": None}
    assert member["assignment"] == {
        "version": 0,
        "assigned_partitions": [{"topic": "orders", "partitions": [0, 1, 2]}],
        "user_data": None,
    }


def test_group_metadata_v4_is_flexible():
    member = (
        compact_string("m-1")
        + compact_string(None)
        + compact_string("client")
        + compact_string("/h")
        + i32(1000)
        + i32(2000)
        + compact_blob(SUBSCRIPTION_V3)
        + compact_blob(b"")
        + tags()
    )
    value = (
        i16(4)
        + compact_string("consumer")
        + i32(9)
        + compact_string("cooperative-sticky")
        + compact_string("m-1")
        + i64(TS)
        + compact_array([member], lambda m: m)
        + tags()
    )
    decoded = decode_ok(h("000200086d792d67726f7570"), value)
    assert decoded.value["members"][0]["subscription"]["rack_id"] is None
    assert decoded.value["members"][0]["assignment"] == b""  # a member the leader left out: kept as bytes


def test_reference_worked_example_group_v3():
    value = h(
        "00030008636f6e73756d657200000001000572616e6765000f636f6e73756d65722d312d306633630000018bcfe5680000"
        "000001000f636f6e73756d65722d312d30663363ffff000a636f6e73756d65722d31000a2f3132372e302e302e31000493e0"
        "0000afc80000001c00030000000100066f7264657273ffffffff00000000ffffffffffff0000002200030000000100066f"
        "726465727300000003000000000000000100000002ffffffff"
    )
    member = decode_ok(h("000200086d792d67726f7570"), value).value["members"][0]
    assert member["subscription"] == {
        "version": 3,
        "topics": ["orders"],
        "user_data": None,
        "owned_partitions": [],
        "generation_id": -1,
        "rack_id": None,
    }
    assert member["assignment"]["assigned_partitions"] == [{"topic": "orders", "partitions": [0, 1, 2]}]


def test_subscription_newer_than_v3_reads_as_v3_ignoring_trailing_bytes():
    decoded = decode_ok(h("000200086d792d67726f7570"), group_value(3, [member_v(3, SUBSCRIPTION_V9, ASSIGNMENT_V0)]))
    subscription = decoded.value["members"][0]["subscription"]
    assert (subscription["version"], subscription["generation_id"], subscription["rack_id"]) == (
        9,
        4,
        "rack-a",
    )


def test_subscription_v1_owned_partitions():
    decoded = decode_ok(h("000200086d792d67726f7570"), group_value(3, [member_v(3, SUBSCRIPTION_V1, ASSIGNMENT_V0)]))
    assert decoded.value["members"][0]["subscription"]["owned_partitions"] == [{"topic": "orders", "partitions": [0]}]


@pytest.mark.parametrize(
    ("protocol", "user_data", "expected"),
    [
        ("cooperative-sticky", i32(7), {"generation": 7}),
        (
            "sticky",
            array([("orders", [1, 2])], lambda tp: topic_partitions(*tp)) + i32(5),
            {"previous_assignment": [{"topic": "orders", "partitions": [1, 2]}], "generation": 5},
        ),
        (
            "sticky",
            array([("orders", [1])], lambda tp: topic_partitions(*tp)),
            {"previous_assignment": [{"topic": "orders", "partitions": [1]}]},
        ),
    ],
)
def test_assignor_user_data(protocol, user_data, expected):
    subscription = i16(1) + array(["orders"], string) + blob(user_data) + array([], topic_partitions)
    decoded = decode_ok(
        h("000200086d792d67726f7570"),
        group_value(3, [member_v(3, subscription, ASSIGNMENT_V0)], protocol=protocol),
    )
    assert decoded.value["members"][0]["subscription"]["assignor_user_data"] == expected


@pytest.mark.parametrize(
    ("protocol", "user_data", "expected"),
    [
        # librdkafka's cooperative-sticky sends the StickyAssignor V1 layout, not a bare generation.
        ("cooperative-sticky", array([("orders", [0, 1])], lambda tp: topic_partitions(*tp)) + i32(4),
         {"previous_assignment": [{"topic": "orders", "partitions": [0, 1]}], "generation": 4}),
        # kafka-python's sticky prefixes the V1 layout with an int16 version.
        ("sticky", i16(1) + array([("orders", [2])], lambda tp: topic_partitions(*tp)) + i32(3),
         {"version": 1, "previous_assignment": [{"topic": "orders", "partitions": [2]}], "generation": 3}),
    ],
)  # fmt: skip
def test_assignor_user_data_of_other_clients(protocol, user_data, expected):
    subscription = (
        i16(3) + array(["orders"], string) + blob(user_data) + array([], topic_partitions) + i32(4) + string(None)
    )
    decoded = decode_ok(
        h("000200086d792d67726f7570"), group_value(3, [member_v(3, subscription, ASSIGNMENT_V0)], protocol=protocol)
    )
    assert decoded.value["members"][0]["subscription"]["assignor_user_data"] == expected


def test_connect_payloads_are_decoded_into_extra_fields():
    subscription = i16(1) + string("http://w1:8083/") + i64(12) + blob(None)
    tasks = [("conn", [-1, 0, 1])]
    assignment = (
        i16(1)
        + i16(0)
        + string("w1")
        + string("http://w1:8083/")
        + i64(12)
        + array(tasks, lambda t: string(t[0]) + array(t[1], i32))
        + array(None, None)
        + i32(0)
    )
    value = (
        i16(3)
        + string("connect")
        + i32(2)
        + string("compatible")
        + string("m-1")
        + i64(TS)
        + i32(1)
        + member_v(3, subscription, assignment)
    )
    member = decode_ok(h("000200086d792d67726f7570"), value).value["members"][0]
    assert member["subscription"] == subscription  # opaque bytes, as Kafka prints them
    assert member["connect_subscription"] == {
        "version": 1,
        "url": "http://w1:8083/",
        "config_offset": 12,
        "allocation": None,
    }
    assert member["connect_assignment"]["assignment"] == [{"connector": "conn", "tasks": [-1, 0, 1]}]
    assert member["connect_assignment"]["revoked"] is None


def test_connect_v0_assignment_without_trailing_fields():
    assignment = (
        i16(0)
        + i16(0)
        + string("w1")
        + string("u")
        + i64(3)
        + array([("c", [0])], lambda t: string(t[0]) + array(t[1], i32))
    )
    value = (
        i16(3)
        + string("connect")
        + i32(1)
        + string("default")
        + string("m-1")
        + i64(TS)
        + i32(1)
        + member_v(3, i16(0) + string("u") + i64(3), assignment)
    )
    member = decode_ok(h("000200086d792d67726f7570"), value).value["members"][0]
    assert member["connect_assignment"] == {
        "version": 0,
        "error": 0,
        "leader": "w1",
        "leader_url": "u",
        "config_offset": 3,
        "assignment": [{"connector": "c", "tasks": [0]}],
    }


# --- KIP-848, share and streams records ----------------------------------------------------------


def test_kip848_worked_examples():
    metadata = decode_ok(h("000300026367"), h("0000000000050100080123456789abcdef"))
    assert metadata.value == {"epoch": 5, "metadata_hash": 0x0123456789ABCDEF}
    current = decode_ok(
        h("00080002636700026d31"),
        h("00000000000500000004000230a5f1d5f224432d89f635c784af26d7030000000000000001000100"),
    )
    assert current.key == {"group_id": "cg", "member_id": "m1"}
    assert current.value == {
        "member_epoch": 5,
        "previous_member_epoch": 4,
        "state": 0,
        # No tag 0 on the wire: assignment_epochs takes its default (an empty list) and, as in Kafka's
        # JSON, a tagged field at its default is not in the record.
        "assigned_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 1]}],
        "partitions_pending_revocation": [],
    }


def task_ids(subtopology: str, partitions: list[int], tagged: dict[int, bytes] | None = None) -> bytes:
    return compact_string(subtopology) + compact_array(partitions, i32) + tags(tagged)


def streams_current_assignment(active: bytes, standby: bytes) -> bytes:
    empty = compact_array([], bytes)
    return i16(0) + i32(7) + i32(6) + i8(1) + active + standby + empty * 4 + tags()


@pytest.mark.parametrize(
    ("standby_tags", "expected_standby"),
    [
        (None, {"subtopology_id": "1", "partitions": [2]}),  # absent: an empty list, not printed
        ({0: compact_array([], i32)}, {"subtopology_id": "1", "partitions": [2]}),  # empty = the default
        ({0: compact_array(None, i32)}, {"subtopology_id": "1", "partitions": [2], "assignment_epochs": None}),
        ({0: compact_array([5], i32)}, {"subtopology_id": "1", "partitions": [2], "assignment_epochs": [5]}),
    ],
)
def test_streams_current_assignment_epochs_default_to_an_empty_list(standby_tags, expected_standby):
    active = compact_array([task_ids("0", [0, 1], {0: compact_array([3, 7], i32)})], bytes)
    standby = compact_array([task_ids("1", [2], standby_tags)], bytes)
    decoded = decode_ok(i16(22) + string("app") + string("m1"), streams_current_assignment(active, standby))
    assert decoded.value["active_tasks"] == [{"subtopology_id": "0", "partitions": [0, 1], "assignment_epochs": [3, 7]}]
    assert decoded.value["standby_tasks"] == [expected_standby]


def test_consumer_current_assignment_epochs_written_by_kafka_4_3_are_read():
    partitions = compact_array([0, 1], i32) + tags({0: compact_array([4, 5], i32)})
    value = i16(0) + i32(5) + i32(4) + i8(0) + compact_array([TOPIC_UUID.bytes + partitions], bytes)
    value += compact_array([], bytes) + tags()
    decoded = decode_ok(h("00080002636700026d31"), value)
    assert decoded.value["assigned_partitions"] == [
        {"topic_id": TOPIC_ID, "partitions": [0, 1], "assignment_epochs": [4, 5]}
    ]


def test_member_metadata_with_classic_member_metadata_tag():
    classic = (
        uvarint(1)
        + i32(45000)
        + compact_array([("range", b"\x00\x01")], lambda p: compact_string(p[0]) + compact_blob(p[1]) + tags())
    )
    value = (
        i16(0)
        + compact_string(None)
        + compact_string("r1")
        + compact_string("c")
        + compact_string("/h")
        + compact_array(["t"], compact_string)
        + compact_string(None)
        + i32(-1)
        + compact_string("uniform")
        + tags({0: classic + tags()})
    )
    decoded = decode_ok(i16(5) + string("g") + string("m"), value)
    assert decoded.value["classic_member_metadata"] == {
        "session_timeout_ms": 45000,
        "supported_protocols": [{"name": "range", "metadata": b"\x00\x01"}],
    }
    assert decoded.value["server_assignor"] == "uniform"


@pytest.mark.parametrize(
    ("tagged", "expected"),
    [
        ({}, {}),  # absent: Kafka's default is an empty struct (its spec's `"default": null`), not printed
        ({0: uvarint(0)}, {"classic_member_metadata": None}),  # a null written on the wire, as Kafka 4.x does
    ],
)
def test_member_metadata_without_classic_member_metadata(tagged, expected):
    value = i16(0) + compact_string(None) * 2 + compact_string("c") + compact_string("/h")
    value += compact_array([], compact_string) + compact_string("") + i32(-1) + compact_string(None) + tags(tagged)
    decoded = decode_ok(i16(5) + string("g") + string("m"), value)
    assert {key: item for key, item in decoded.value.items() if key == "classic_member_metadata"} == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (i16(0) + i32(3) + i64(99) + tags(), {"epoch": 3, "metadata_hash": 99}),
        (i16(0) + i32(3) + tags(), {"epoch": 3}),  # Kafka 4.0 early access: no MetadataHash, same version
    ],
)
def test_share_group_metadata_layout_variants(value, expected):
    assert decode_ok(i16(11) + string("sg"), value).value == expected


def test_streams_member_metadata_user_endpoint():
    value = (
        i16(0)
        + compact_string(None)
        + compact_string(None)
        + compact_string("c")
        + compact_string("/h")
        + i32(1000)
        + i32(1)
        + compact_string("p-1")
        + i8(1)
        + compact_string("host")
        + b"\xff\xfe"
        + tags()
        + compact_array([("k", "v")], lambda kv: compact_string(kv[0]) + compact_string(kv[1]) + tags())
        + tags()
    )
    decoded = decode_ok(i16(19) + string("st") + string("m"), value)
    assert decoded.value["user_endpoint"] == {"host": "host", "port": 65534}
    assert decoded.value["client_tags"] == [{"key": "k", "value": "v"}]


def test_every_record_type_0_to_24_has_a_name():
    from schemas.coordinator_records import RECORD_TYPES

    assert sorted(RECORD_TYPES) == list(range(25))
    assert len({record.name for record in RECORD_TYPES.values()}) == 25


# --- bad bytes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "stage", "reason"),
    [
        (h("0063") + string("g"), None, "key", "unknown record type 99"),
        (h("00"), None, "key", "int16 record type"),
        (KEY_MY_GROUP_ORDERS_3[:-2], None, "key", "4-byte integer"),
        (KEY_MY_GROUP_ORDERS_3, i16(5) + i64(1), "value", "version 5"),
        (KEY_MY_GROUP_ORDERS_3, i16(-1) + i64(1), "value", "version -1"),
        (KEY_MY_GROUP_ORDERS_3, h("0003000000000000002a00000005"), "value", "metadata"),
        (
            KEY_MY_GROUP_ORDERS_3,
            i16(3) + i64(1) + i32(0) + string("ok") + i64(TS) + b"\x00",
            "value",
            "trailing",
        ),
        (KEY_MY_GROUP_ORDERS_3, i16(0) + i64(1) + i16(2) + b"\xff\xfe" + i64(TS), "value", "UTF-8"),
        (KEY_MY_GROUP_ORDERS_3, i16(0) + i64(1) + i16(30000) + b"ab", "value", "30000"),
        (
            h("000200086d792d67726f7570"),
            i16(3) + string("consumer") + i32(1) + string(None) + string(None) + i64(0) + i32(0x7FFFFFFF),
            "value",
            "2147483647 elements",
        ),
        (
            i16(3) + string("g"),
            i16(0) + i32(1) + uvarint(1) + uvarint(0) + uvarint(200),
            "value",
            "tagged field 0",
        ),
        (i16(3) + string("g"), i16(0) + i32(1) + b"\xff\xff\xff\xff\xff\xff", "value", "varint"),
    ],
)
def test_corrupt_records_get_a_reason_instead_of_raising(key, value, stage, reason):
    decoded = decode_record(key, value)
    assert decoded.error is not None and decoded.error_stage == stage
    assert reason in decoded.error


def test_uvarint_reads_at_a_position_inside_a_larger_buffer():
    buf = b"\xaa\xbb" + uvarint(300) + b"\xcc"
    assert read_uvarint(buf, 2) == (300, 4)
    with pytest.raises(CorruptRecordError):
        read_uvarint(b"\x80\x80", 0)


def test_a_reason_names_its_own_record_type_whatever_was_decoded_before():
    """Types 0 and 1 share one key layout; the reader of one must not name the other in its errors."""
    cut_key = string("orders-app") + string("orders") + b"\x00\x00\x00"  # partition one byte short
    legacy, current = decode_record(b"\x00\x00" + cut_key, None), decode_record(b"\x00\x01" + cut_key, None)
    assert legacy.error.startswith("legacy_offset_commit key")
    assert current.error.startswith("offset_commit key")
