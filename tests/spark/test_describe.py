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

from tests.lab_tables import all_captures

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


def streams_groups(lab):
    """(cluster, group_id) of the streams protocol: kafka-consumer-groups does not list them
    (kafka-streams-groups does)."""
    is_streams_record = F.col("record_type").isin(*STREAMS_RECORD_TYPES)
    return lab["consumer_group_records"].where(is_streams_record).select("cluster", "group_id").distinct()


def tables_describe(spark, lab) -> dict[str, dict[tuple[str, str, int], tuple]]:
    """The same view from the gold tables, every capture at once (cluster -> view): lag at the capture's
    last end-offset snapshot, and the owners of the live generation, for every group not deleted
    (groups that only commit have no generation at all)."""
    # The capture holds snapshots from the whole scenario; the description was taken at the last one.
    descriptions = spark.createDataFrame(
        [(capture.cluster, capture.final_observed_at) for capture in CAPTURES], "cluster string, observed_at timestamp"
    )
    latest = lab["generations"].groupBy("cluster", "group_id").agg(F.max_by("state", "source_offset").alias("state"))
    deleted_groups = latest.where(F.col("state") == F.lit("deleted")).select("cluster", "group_id")
    owners = (
        lab["generation_assignments"]
        .where(F.col("valid_until").isNull() & (F.col("group_protocol") != F.lit("share")))
        .select("cluster", "group_id", "topic", "partition", "member_id", "client_host", "client_id")
    )
    lag = (
        lab["lag"]
        .join(descriptions, on=["cluster", "observed_at"], how="left_semi")
        .select("cluster", "group_id", "topic", "partition", "committed_offset", "end_offset", "offset_lag")
    )
    end_offsets = (
        lab["end_offsets"]
        .join(descriptions, on=["cluster", "observed_at"], how="left_semi")
        .select("cluster", "topic", "partition", F.col("end_offset").alias("log_end"))
    )
    described = (
        lag.join(owners, on=["cluster", "group_id", "topic", "partition"], how="full")
        .join(deleted_groups, on=["cluster", "group_id"], how="left_anti")
        .join(streams_groups(lab), on=["cluster", "group_id"], how="left_anti")
        .join(end_offsets, on=["cluster", "topic", "partition"], how="left")
    )
    views: dict[str, dict[tuple[str, str, int], tuple]] = {capture.cluster: {} for capture in CAPTURES}
    for r in described.collect():
        views[r.cluster][(r.group_id, r.topic, r.partition)] = (
            r.committed_offset,
            r.end_offset if r.end_offset is not None else r.log_end,
            r.offset_lag,
            r.member_id,
            r.client_host,
            r.client_id,
        )
    return views


@pytest.fixture(scope="module")
def described_by_tables(spark, lab) -> tuple[dict, set[str]]:
    """(every capture's view from the tables, the clusters where a group other than a streams group commits),
    in two Spark jobs for all captures rather than several per capture."""
    committing = lab["offset_commits"].select("cluster", "group_id").distinct()
    non_streams = committing.join(streams_groups(lab), on=["cluster", "group_id"], how="left_anti")
    return tables_describe(spark, lab), {r.cluster for r in non_streams.select("cluster").distinct().collect()}


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.cluster for c in CAPTURES])
def test_tables_equal_kafka_consumer_groups_describe(described_by_tables, capture):
    views, clusters_with_consumer_commits = described_by_tables
    kafka = parse_describe((capture.path / "describe.txt").read_text())
    only_streams_groups_commit = capture.cluster not in clusters_with_consumer_commits
    assert kafka or only_streams_groups_commit, "the capture's describe output lists no partition"
    ours = views[capture.cluster]
    differences = {
        key: {"kafka": kafka.get(key), "groupscope": ours.get(key)}
        for key in kafka.keys() | ours.keys()
        if kafka.get(key) != ours.get(key)
    }
    assert not differences, differences
