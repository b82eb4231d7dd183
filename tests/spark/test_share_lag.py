"""share_lag against Kafka: at the snapshot taken just before `kafka-share-groups --describe --offsets`
at the end of the share scenario (real 4.2.1, 4.3.1 and 4.4.0 brokers), every row the tool printed, every
column as printed ('-' included), and no other row.

The expected rows are the tool's output committed with each capture (describe-share.txt); the tables are
built in-process from the capture's segments by the jobs' own readers and decoder.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import functions as F

from jobs.steps.share_backlog import status_settings
from jobs.tables import materialized
from lab.scenarios import capture_folders
from schemas import ops
from tests.lab_tables import CAPTURES, Capture, all_captures, decoded_captures
from transforms import silver
from transforms.gold import share_state

SHARE_CAPTURES = [Capture(CAPTURES / folder / "share") for folder in sorted(capture_folders("share"))]
# What ShareGroupCommand prints for --describe --offsets (without --verbose), in this order.
DESCRIBE_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
PRINTED = {"GROUP": "group_id", "TOPIC": "topic", "PARTITION": "partition", "START-OFFSET": "start_offset",
           "LAG": "lag"}  # fmt: skip


def described(capture: Capture) -> tuple[list[str], list[tuple[str, ...]]]:
    lines = [line.split() for line in (capture.path / "describe-share.txt").read_text().splitlines() if line.strip()]
    return lines[0], [tuple(line) for line in lines[1:]]


def printed(value) -> str:
    return "-" if value is None else str(value)


@pytest.fixture(scope="module")
def share_tables(spark, spark_config):
    # The share captures' rows of the decode the `lab` fixture made of every capture: decoded once a session.
    share_clusters = [capture.cluster for capture in SHARE_CAPTURES]
    decoded = decoded_captures(spark, all_captures()).where(F.col("cluster").isin(share_clusters))
    states = materialized(share_state.share_partition_states(silver.filter_share_group_state(decoded)))
    topic_ids = spark.createDataFrame([], ops.topic_ids_schema)
    names = share_state.share_topic_names(silver.filter_consumer_group_records(decoded), topic_ids)
    end_offsets = spark.createDataFrame(
        [row for capture in SHARE_CAPTURES for row in capture.end_offset_rows()], ops.end_offsets_schema
    )
    return {
        "states": states,
        "share_lag": materialized(share_state.share_lag(states, end_offsets, names, **status_settings(spark_config))),
    }


@pytest.mark.parametrize("capture", SHARE_CAPTURES, ids=lambda capture: capture.cluster)
def test_share_lag_at_the_describe_is_what_kafka_share_groups_printed(share_tables, capture):
    header, kafka_rows = described(capture)
    assert header == DESCRIBE_COLUMNS, "the tool prints a column share_lag does not hold"
    at_describe = (
        share_tables["share_lag"]
        .where((F.col("cluster") == capture.cluster) & (F.col("observed_at") == F.lit(capture.final_observed_at)))
        .collect()
    )
    ours = sorted(tuple(printed(row[PRINTED[name]]) for name in header) for row in at_describe)
    assert kafka_rows and ours == sorted(kafka_rows)


def test_a_backlog_is_stuck_once_its_start_offset_has_not_moved_for_the_stretch_and_storms_count_deliveries(spark):
    """Rule: a stretch is the consecutive snapshots with lag > 0 and one start offset; stuck when it has
    lasted 2 minutes here; a storm when a record was delivered more than 3 times."""
    at = [datetime(2026, 11, 1, 0, minute) for minute in range(6)]
    key = ("c", "g", "id", 0)
    rows = [  # observed_at, start_offset, lag, max_delivery_count
        (at[0], 5, 0, None), (at[1], 5, 2, 1), (at[2], 5, 2, 3), (at[3], 5, 3, 4), (at[4], 7, 1, 1),
        (at[5], None, None, None),
    ]  # fmt: skip
    frame = spark.createDataFrame(
        [(*key, *row) for row in rows],
        "cluster string, group_id string, topic_id string, partition int, observed_at timestamp, "
        "start_offset long, lag long, max_delivery_count int",
    )
    out = share_state.with_status(frame, stuck_after_minutes=2, redelivery_limit=3).orderBy("observed_at").collect()
    assert [row["backlog_since"] for row in out] == [None, at[1], at[1], at[1], at[4], None]
    assert [row["is_start_offset_stuck"] for row in out] == [False, False, False, True, False, False]
    assert [row["is_redelivery_storm"] for row in out] == [False, False, False, True, False, False]
