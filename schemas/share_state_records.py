"""Every record type Kafka writes to `__share_group_state` (KIP-932), declared once.

The share coordinator keeps each share-partition's delivery state there: a ShareSnapshot (type 0) is
the whole state, a ShareUpdate (type 1) the batches that changed since; a null value (tombstone) ends
the state when the group or the topic is deleted. The wire shape is `__consumer_offsets`'s: key =
int16 type ++ key fields (never flexible), value = int16 version ++ value fields. Types 0 and 1 mean
something else in `__consumer_offsets` (offset commits), so a record is only ever read with the
declarations of the topic it came from.

Layouts follow Kafka's `share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}
{Key,Value}.json`, identical in the 4.2.1 and 4.3.1 kafka-share-coordinator jars: value version 0,
flexible from 0. Field names are Kafka's in snake_case.
"""

from __future__ import annotations

from schemas.layouts import Field, Message, RecordType

SHARE_GROUP_STATE_TOPIC = "__share_group_state"

RECORD_TYPE_SHARE_SNAPSHOT = 0
RECORD_TYPE_SHARE_UPDATE = 1

# Both keys: one share-partition (the group, and the consumed topic's id and partition).
SHARE_PARTITION_KEY = (Field("group_id", "string"), Field("topic_id", "uuid"), Field("partition", "int32"))
# A run of offsets in one delivery state: 0 available, 2 acknowledged, 4 archived (the spec's "about").
STATE_BATCHES = Field(
    "state_batches",
    "[]struct",
    fields=(
        Field("first_offset", "int64"),
        Field("last_offset", "int64"),
        Field("delivery_state", "int8"),
        Field("delivery_count", "int16"),
    ),
)
# KIP-1226 (Kafka 4.2) added it as tag 0 within value version 0, "default": "-1": a 4.1 writer never
# sets it, and Kafka leaves it out of the record (and of DumpLogSegments' JSON) while it is -1.
DELIVERY_COMPLETE_COUNT = Field("delivery_complete_count", "int32", tag=0, tagged_versions="0+", default=-1)

SHARE_SNAPSHOT_VALUE = Message(
    "ShareSnapshotValue",
    valid_versions="0",
    flexible_versions="0+",
    fields=(
        Field("snapshot_epoch", "int32"),
        Field("state_epoch", "int32"),
        Field("leader_epoch", "int32"),
        Field("start_offset", "int64"),
        DELIVERY_COMPLETE_COUNT,
        Field("create_timestamp", "int64"),
        Field("write_timestamp", "int64"),
        STATE_BATCHES,
    ),
)
# Only what changed: no state epoch, no timestamps; start_offset -1 when it did not move.
SHARE_UPDATE_VALUE = Message(
    "ShareUpdateValue",
    valid_versions="0",
    flexible_versions="0+",
    fields=(
        Field("snapshot_epoch", "int32"),
        Field("leader_epoch", "int32"),
        Field("start_offset", "int64"),
        DELIVERY_COMPLETE_COUNT,
        STATE_BATCHES,
    ),
)

SHARE_STATE_RECORD_TYPES: dict[int, RecordType] = {
    RECORD_TYPE_SHARE_SNAPSHOT: RecordType(
        RECORD_TYPE_SHARE_SNAPSHOT, "share_snapshot", SHARE_PARTITION_KEY, SHARE_SNAPSHOT_VALUE
    ),
    RECORD_TYPE_SHARE_UPDATE: RecordType(
        RECORD_TYPE_SHARE_UPDATE, "share_update", SHARE_PARTITION_KEY, SHARE_UPDATE_VALUE
    ),
}
