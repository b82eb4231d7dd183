"""Coordinator records as brokers write them to `__consumer_offsets`: keys and values, byte-exact.

Written imperatively from kafka-record-formats.md (sections 3-6) with `bench.encoding`, not from
the declarations in schemas/, so Kafka's own DumpLogSegments is the judge of these bytes, not our
decoder. Offset commits are the hot path of the generator (nearly every record is one): their values
are packed with one precompiled struct where the metadata is empty.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from bench.encoding import (
    array,
    blob,
    compact_array,
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

OFFSET_COMMIT, GROUP_METADATA = 1, 2
CONSUMER_GROUP_METADATA, CONSUMER_GROUP_MEMBER_METADATA = 3, 5
TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT = 6, 7, 8
REGULAR_EXPRESSION = 16
# ConsumerGroupCurrentMemberAssignmentValue.State (MemberState.java).
MEMBER_STABLE, MEMBER_UNREVOKED_PARTITIONS, MEMBER_UNRELEASED_PARTITIONS = 0, 1, 2

TopicPartitions = Sequence[tuple[str, Sequence[int]]]  # (topic, partitions), in assignment order
TopicIdPartitions = Sequence[tuple[bytes, Sequence[int]]]  # (16-byte topic id, partitions)

_V3_EMPTY_METADATA = struct.Struct(">hqihq")  # version, offset, leader epoch, "" (int16 0), commit time
_V4_EMPTY_METADATA = struct.Struct(">hqiBqB")  # version, offset, leader epoch, "" (uvarint 1), time, no tags
_V3_HEAD, _V4_HEAD, _V1_HEAD = struct.Struct(">hqih"), struct.Struct(">hqi"), struct.Struct(">hqh")
_INT64, _INT64_PAIR = struct.Struct(">q"), struct.Struct(">qq")


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return i16(OFFSET_COMMIT) + string(group) + string(topic) + i32(partition)


def offset_commit_value(
    version: int, offset: int, leader_epoch: int, metadata: bytes, commit_ms: int, expire_ms: int = -1
) -> bytes:
    """OffsetCommitValue v1 (a commit with a retention), v3 (brokers 2.1-4.0) or v4 (4.1+, no topic id tag)."""
    if version == 3:
        if not metadata:
            return _V3_EMPTY_METADATA.pack(3, offset, leader_epoch, 0, commit_ms)
        return _V3_HEAD.pack(3, offset, leader_epoch, len(metadata)) + metadata + _INT64.pack(commit_ms)
    if version == 4:
        if not metadata:
            return _V4_EMPTY_METADATA.pack(4, offset, leader_epoch, 1, commit_ms, 0)
        head = _V4_HEAD.pack(4, offset, leader_epoch) + uvarint(len(metadata) + 1)
        return head + metadata + _INT64.pack(commit_ms) + b"\0"  # no tagged fields
    if version == 1:
        return _V1_HEAD.pack(1, offset, len(metadata)) + metadata + _INT64_PAIR.pack(commit_ms, expire_ms)
    raise ValueError(f"brokers write OffsetCommitValue v1, v3 or v4, not v{version}")


def group_metadata_key(group: str) -> bytes:
    return i16(GROUP_METADATA) + string(group)


def consumer_subscription(
    version: int,
    topics: Sequence[str],
    user_data: bytes | None,
    owned: TopicPartitions = (),
    generation_id: int = -1,
    rack_id: str | None = None,
) -> bytes:
    """ConsumerProtocolSubscription v0 (kafka-python), v1 or v3 (Java 3.4+, librdkafka)."""
    out = i16(version) + array(list(topics), string) + blob(user_data)
    if version >= 1:
        out += array(list(owned), _topic_partition_list)
    if version >= 2:
        out += i32(generation_id)
    if version >= 3:
        out += string(rack_id)
    return out


def consumer_assignment(version: int, assigned: TopicPartitions, user_data: bytes | None) -> bytes:
    return i16(version) + array(list(assigned), _topic_partition_list) + blob(user_data)


def sticky_user_data(previous: TopicPartitions, generation: int) -> bytes:
    """StickyAssignor V1 user data (no version prefix); librdkafka's cooperative-sticky sends it too."""
    return array(list(previous), _topic_partition_list) + i32(generation)


def cooperative_sticky_user_data(generation: int) -> bytes:
    """Java's CooperativeStickyAssignor: the generation alone."""
    return i32(generation)


def _topic_partition_list(item: tuple[str, Sequence[int]]) -> bytes:
    return topic_partitions(item[0], list(item[1]))


def group_member(
    member_id: str,
    instance_id: str | None,
    client_id: str,
    client_host: str,
    rebalance_timeout_ms: int,
    session_timeout_ms: int,
    subscription: bytes,
    assignment: bytes,
) -> bytes:
    """One member of GroupMetadataValue v3."""
    return (
        string(member_id)
        + string(instance_id)
        + string(client_id)
        + string(client_host)
        + i32(rebalance_timeout_ms)
        + i32(session_timeout_ms)
        + blob(subscription)
        + blob(assignment)
    )


def group_metadata_value(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    state_changed_ms: int,
    members: Sequence[bytes],
) -> bytes:
    """GroupMetadataValue v3, the version every broker from 2.3 to 4.x writes; members from `group_member`."""
    return (
        i16(3)
        + string(protocol_type)
        + i32(generation)
        + string(protocol)
        + string(leader)
        + i64(state_changed_ms)
        + i32(len(members))
        + b"".join(members)
    )


def group_key(record_type: int, group: str) -> bytes:
    """Keys of the KIP-848 group-level records (types 3, 4, 6)."""
    return i16(record_type) + string(group)


def member_key(record_type: int, group: str, member_id: str) -> bytes:
    """Keys of the KIP-848 member-level records (types 5, 7, 8)."""
    return i16(record_type) + string(group) + string(member_id)


def regular_expression_key(group: str, regex: str) -> bytes:
    return i16(REGULAR_EXPRESSION) + string(group) + string(regex)


def consumer_group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    """Type 3; the metadata hash (4.1+) is a tag written only when it is not 0."""
    return i16(0) + i32(epoch) + tags({0: i64(metadata_hash)} if metadata_hash else None)


def member_metadata_value(
    client_id: str,
    client_host: str,
    subscribed_topics: Sequence[str],
    subscribed_regex: str | None,
    rebalance_timeout_ms: int,
    instance_id: str | None = None,
    rack_id: str | None = None,
    server_assignor: str | None = None,
) -> bytes:
    """Type 5, ConsumerGroupMemberMetadataValue v0.

    Brokers write the ClassicMemberMetadata tag even for a member of the new protocol: tag 0 holding
    the null marker (seen in the lab's 4.2.1 captures).
    """
    return (
        i16(0)
        + compact_string(instance_id)
        + compact_string(rack_id)
        + compact_string(client_id)
        + compact_string(client_host)
        + compact_array(list(subscribed_topics), compact_string)
        + compact_string(subscribed_regex)
        + i32(rebalance_timeout_ms)
        + compact_string(server_assignor)
        + tags({0: uvarint(0)})
    )


def target_assignment_metadata_value(assignment_epoch: int) -> bytes:
    """Type 6 (before 4.3: no assignment timestamp tag)."""
    return i16(0) + i32(assignment_epoch) + tags()


def _topic_id_partitions(item: tuple[bytes, Sequence[int]]) -> bytes:
    return item[0] + compact_array(list(item[1]), i32) + tags()


def target_assignment_member_value(assigned: TopicIdPartitions) -> bytes:
    """Type 7."""
    return i16(0) + compact_array(list(assigned), _topic_id_partitions) + tags()


def current_member_assignment_value(
    member_epoch: int,
    previous_member_epoch: int,
    state: int,
    assigned: TopicIdPartitions,
    pending_revocation: TopicIdPartitions = (),
) -> bytes:
    """Type 8."""
    return (
        i16(0)
        + i32(member_epoch)
        + i32(previous_member_epoch)
        + i8(state)
        + compact_array(list(assigned), _topic_id_partitions)
        + compact_array(list(pending_revocation), _topic_id_partitions)
        + tags()
    )


def regular_expression_value(topics: Sequence[str], metadata_version: int, resolved_ms: int) -> bytes:
    """Type 16: the topics a subscription regex resolved to."""
    return i16(0) + compact_array(list(topics), compact_string) + i64(metadata_version) + i64(resolved_ms) + tags()
