"""Payloads embedded in classic `GroupMetadataValue.members[].subscription/assignment` bytes.

The broker treats them as opaque; their layout depends on the group's protocol type and assignor.
Sources: Kafka's `ConsumerProtocolSubscription.json` / `ConsumerProtocolAssignment.json`,
`StickyAssignor.java`, `CooperativeStickyAssignor.java` and Connect's `ConnectProtocol.java` /
`IncrementalCooperativeConnectProtocol.java` (reference: kafka-record-formats.md section 5).
"""

from __future__ import annotations

from schemas.layouts import Field, Message

TOPIC_PARTITION_LIST = (Field("topic", "string"), Field("partitions", "[]int32"))

# Versions above 3 are read with the v3 layout and trailing bytes ignored, as ConsumerProtocol does.
CONSUMER_PROTOCOL_SUBSCRIPTION = Message(
    "ConsumerProtocolSubscription",
    valid_versions="0-3",
    read_newer_as_latest=True,
    fields=(
        Field("topics", "[]string"),
        Field("user_data", "bytes", nullable_versions="0+", default=None),
        Field("owned_partitions", "[]struct", versions="1+", fields=TOPIC_PARTITION_LIST),
        Field("generation_id", "int32", versions="2+", default=-1),
        Field("rack_id", "string", versions="3+", nullable_versions="3+", default=None),
    ),
)
CONSUMER_PROTOCOL_ASSIGNMENT = Message(
    "ConsumerProtocolAssignment",
    valid_versions="0-3",
    read_newer_as_latest=True,
    fields=(
        Field("assigned_partitions", "[]struct", fields=TOPIC_PARTITION_LIST),
        Field("user_data", "bytes", nullable_versions="0+", default=None),
    ),
)

# Assignor user data. Java's carries no version prefix: StickyAssignor tries V1, then V0; Java's
# cooperative-sticky sends only the generation. Clients differ: librdkafka's cooperative-sticky sends the
# StickyAssignor V1 layout, and kafka-python's sticky prefixes V1 with an int16 version. Layouts are
# tried in order; the first that reads the bytes exactly wins.
STICKY_USER_DATA_V1 = (
    Field("previous_assignment", "[]struct", fields=TOPIC_PARTITION_LIST),
    Field("generation", "int32"),
)
STICKY_USER_DATA_V0 = (Field("previous_assignment", "[]struct", fields=TOPIC_PARTITION_LIST),)
STICKY_USER_DATA_VERSIONED = (Field("version", "int16"), *STICKY_USER_DATA_V1)
COOPERATIVE_STICKY_USER_DATA = (Field("generation", "int32"),)
USER_DATA_LAYOUTS: dict[str, tuple[tuple[Field, ...], ...]] = {
    "sticky": (STICKY_USER_DATA_V1, STICKY_USER_DATA_V0, STICKY_USER_DATA_VERSIONED),
    "cooperative-sticky": (COOPERATIVE_STICKY_USER_DATA, STICKY_USER_DATA_V1),
}

CONNECTOR_TASKS = (Field("connector", "string"), Field("tasks", "[]int32"))
# Connect protocols: default = v0 (eager), compatible = v1 (KIP-415), sessioned = v2 (KIP-507).
# Trailing v1/v2 fields may be missing (TOLERATE_MISSING_FIELDS_WITH_DEFAULTS): they are declared
# as versions "1+", and `missing_trailing_ok` lets the interpreter stop cleanly at the buffer's end.
CONNECT_SUBSCRIPTION = Message(
    "ConnectProtocolSubscription",
    valid_versions="0-2",
    read_newer_as_latest=True,
    missing_trailing_ok=True,
    fields=(
        Field("url", "string"),
        Field("config_offset", "int64"),
        Field("allocation", "bytes", versions="1+", nullable_versions="1+", default=None),
    ),
)
CONNECT_ASSIGNMENT = Message(
    "ConnectProtocolAssignment",
    valid_versions="0-2",
    read_newer_as_latest=True,
    missing_trailing_ok=True,
    fields=(
        Field("error", "int16"),
        Field("leader", "string"),
        Field("leader_url", "string"),
        Field("config_offset", "int64"),
        Field("assignment", "[]struct", fields=CONNECTOR_TASKS),
        Field("revoked", "[]struct", versions="1+", nullable_versions="1+", default=None, fields=CONNECTOR_TASKS),
        Field("scheduled_delay", "int32", versions="1+", default=0),
    ),
)

PROTOCOL_TYPE_CONSUMER = "consumer"
PROTOCOL_TYPE_CONNECT = "connect"
