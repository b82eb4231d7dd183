"""The group -> __consumer_offsets partition function equals Kafka's, on JDK vectors and on real data (and the
share-partition -> __share_group_state partition function, the same on another key)."""

from __future__ import annotations

import pytest

from jobs.segment_files import read_paths
from schemas.share_state_records import SHARE_GROUP_STATE_TOPIC
from tests.conftest import PUBLIC_FIXTURES, REPO_ROOT
from transforms.decoder.coordinator_records import decode_record
from transforms.decoder.record_batches import topic_from_path
from transforms.partitioning import java_string_hashcode, offsets_partition


# Checked with the JDK's String.hashCode (kafka-record-formats.md section 10).
@pytest.mark.parametrize(
    ("group", "hashcode", "partition"),
    [
        ("my-group", -1906497762, 12),
        ("console-consumer-12345", 158455506, 6),
        ("connect-cluster", 1440343063, 13),
        ("grüße", 98768023, 23),
        ("😀", 1772899, 49),
        ("polygenelubricants", -2147483648, 0),
    ],
)
def test_jdk_vectors(group, hashcode, partition):
    assert java_string_hashcode(group) == hashcode
    assert offsets_partition(group) == partition


def test_every_real_group_sits_in_the_partition_kafka_chose():
    checked = checked_share_state = 0
    roots = [PUBLIC_FIXTURES, REPO_ROOT / "tests" / "captures"]
    for record in read_paths([str(root) for root in roots]):
        topic = topic_from_path(record.source_file)
        decoded = decode_record(record.key, record.value, topic)
        assert decoded.key is not None and record.partition is not None
        group = decoded.key["group"] if "group" in decoded.key else decoded.key["group_id"]  # "" is a valid id
        if topic == SHARE_GROUP_STATE_TOPIC:
            # The share coordinator places a share-partition by "group:topicId:partition"
            # (SharePartitionKey.asCoordinatorKey), with the same function and default of 50 partitions.
            group = f"{group}:{decoded.key['topic_id']}:{decoded.key['partition']}"
            checked_share_state += 1
        assert offsets_partition(group) == record.partition, (group, record.source_file)
        checked += 1
    assert checked > 1000  # not vacuous: public fixtures and every lab capture
    assert checked_share_state > 0  # and the share captures' __share_group_state
