"""At the end of every lab scenario, the tables say what `kafka-consumer-groups --describe` said.

The lab ran `kafka-consumer-groups --describe --all-groups` against the live broker right before it
stopped, and snapshotted the end offsets at that moment (the last of the capture's snapshots). For every
partition Kafka listed, the gold tables at that snapshot must give the same committed offset, end
offset, lag and current owner (member id, host, client id); and they must list no partition Kafka did
not. Streams groups are not consumer groups to kafka-consumer-groups, so they are left out of both
sides (their oracle is kafka-streams-groups, not compared here yet); nor are share groups (their oracle,
kafka-share-groups --describe --members, is compared in tests/spark/test_share_history.py).
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tests.lab_tables import Capture, all_captures

DESCRIBE_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
CAPTURES = all_captures()


def parse_describe(text: str) -> dict[tuple[str, str, int], tuple]:
    """(group, topic, partition) -> (committed, end, lag, member_id, host, client_id); '-' becomes None."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or tuple(fields) == DESCRIBE_COLUMNS:
            continue
        assert len(fields) == len(DESCRIBE_COLUMNS), f"unexpected describe line: {line!r}"
        group, topic, partition, *values = (None if value == "-" else value for value in fields)
        committed, end, lag, member_id, host, client_id = values
        rows[(group, topic, int(partition))] = (
            None if committed is None else int(committed),
            None if end is None else int(end),
            None if lag is None else int(lag),
            member_id,
            host,
            client_id,
        )
    return rows


STREAMS_RECORD_TYPES = range(17, 24)  # KIP-1071 streams group records


def streams_groups(lab, capture: Capture):
    """Groups of the streams protocol: kafka-consumer-groups does not list them (kafka-streams-groups does)."""
    is_streams_record = F.col("record_type").isin(*STREAMS_RECORD_TYPES)
    records = lab["consumer_group_records"].where((F.col("cluster") == F.lit(capture.cluster)) & is_streams_record)
    return records.select("group_id").distinct()


def tables_describe(lab, capture: Capture) -> dict[tuple[str, str, int], tuple]:
    """The same view from the gold tables: lag at the capture's end-offset snapshot, and the owners of the
    live generation, for every group not deleted (groups that only commit have no generation at all)."""
    cluster = F.col("cluster") == F.lit(capture.cluster)
    # The capture holds snapshots from the whole scenario; the description was taken at the last one.
    at_description = cluster & (F.col("observed_at") == F.lit(capture.final_observed_at))
    latest = (
        lab["generations"].where(cluster).groupBy("group_id").agg(F.max_by("state", "source_offset").alias("state"))
    )
    deleted_groups = latest.where(F.col("state") == F.lit("deleted")).select("group_id")
    owners = (
        lab["generation_assignments"]
        .where(cluster & F.col("valid_until").isNull() & (F.col("group_protocol") != F.lit("share")))
        .select("group_id", "topic", "partition", "member_id", "client_host", "client_id")
    )
    lag = (
        lab["lag"]
        .where(at_description)
        .select("group_id", "topic", "partition", "committed_offset", "end_offset", "offset_lag")
    )
    end_offsets = (
        lab["end_offsets"].where(at_description).select("topic", "partition", F.col("end_offset").alias("log_end"))
    )
    described = (
        lag.join(owners, on=["group_id", "topic", "partition"], how="full")
        .join(deleted_groups, on="group_id", how="left_anti")
        .join(streams_groups(lab, capture), on="group_id", how="left_anti")
        .join(end_offsets, on=["topic", "partition"], how="left")
    )
    return {
        (r.group_id, r.topic, r.partition): (
            r.committed_offset,
            r.end_offset if r.end_offset is not None else r.log_end,
            r.offset_lag,
            r.member_id,
            r.client_host,
            r.client_id,
        )
        for r in described.collect()
    }


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.cluster for c in CAPTURES])
def test_tables_equal_kafka_consumer_groups_describe(lab, capture):
    kafka = parse_describe((capture.path / "describe.txt").read_text())
    committing = lab["offset_commits"].where(F.col("cluster") == F.lit(capture.cluster)).select("group_id").distinct()
    only_streams_groups_commit = committing.join(streams_groups(lab, capture), "group_id", "left_anti").isEmpty()
    assert kafka or only_streams_groups_commit, "the capture's describe output lists no partition"
    ours = tables_describe(lab, capture)
    differences = {
        key: {"kafka": kafka.get(key), "groupscope": ours.get(key)}
        for key in kafka.keys() | ours.keys()
        if kafka.get(key) != ours.get(key)
    }
    assert not differences, differences
