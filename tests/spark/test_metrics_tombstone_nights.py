"""Group partitions whose offsets are deleted (tombstones) after more commits than the metrics carry keeps:
nights continued from the carry's tail give, row by row, the tables one run from scratch gives.

The lab captures hold no such group partition (none commits more than four times before a tombstone), so
this cluster's offset records are written here, as the group coordinator writes them: commits every two
seconds, offset deletions (tombstones) after them, log positions growing with time, but for two groups
whose records come out of order (a tombstone appended behind records already in the log, the way a
backup of an older segment lands; a commit stamped before the tombstone that precedes it in the log, the
way a clock stepped back does). Each record is in the log by one of four nights; end-offset snapshots
every five seconds. transforms/gold/metrics_carry.py says why each night may continue.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import functions as F

from jobs.metrics_writes import CARRY
from jobs.steps.decode import SILVER_SCHEMAS
from jobs.tables import END_OFFSETS, METRICS_TABLES, ensure_table
from schemas import gold, ops
from tests.spark.test_incremental_metrics import _append, _config, run_metrics, tables_of

DATABASE, FULL_DATABASE = "tombstone_nights", "tombstone_nights_full"
START = datetime(2026, 11, 3, 12, 0, tzinfo=UTC)
SOURCE_PARTITION = 7


# Per group: (second of the record, log position, is a tombstone, the night it is in the log by). Positions
# are unique in the one __consumer_offsets partition all these groups share.
def _commits(base: int, seconds: range) -> list[tuple[int, int, bool, int]]:
    return [(second, base + second, False, 1 if second <= 40 else 2) for second in seconds]


GROUPS = {
    "plain": [*_commits(1_000, range(0, 80, 2)), *((s, 1_000 + s, False, 3 + (s > 100)) for s in range(80, 120, 2))],
    "deleted": [
        *_commits(2_000, range(0, 60, 2)),  # 30 buckets, more than the carry keeps
        (70, 2_070, True, 2),  # its first tombstone, after everything: continued from the tail
        *((second, 2_000 + second, False, 3) for second in range(90, 110, 2)),  # a new life after it
    ],
    "backup": [
        *((second, 3_000 + 2 * second, False, 1 if second <= 40 else 2) for second in range(0, 60, 2)),
        (65, 3_001, True, 3),  # a tombstone behind the group's commits in the log: read whole
    ],
    "skewed": [
        *_commits(4_000, range(0, 60, 2)),
        (62, 4_062, True, 2),  # continued from the tail
        (50, 4_500, False, 4),  # after the tombstone in the log, before it in time: read whole
    ],
}
SNAPSHOTS_UP_TO = (40, 80, 110, 120)  # seconds, night by night
GOLD = {"status_intervals": 3}


def at(second: float) -> datetime:
    return START + timedelta(seconds=second)


def offset_records(spark):
    """(silver rows, {record_id: the night it arrives})."""
    rows, rows_nights = [], {}
    for group, records in GROUPS.items():
        for second, position, is_tombstone, night in records:
            committed = None if is_tombstone else 10 * position
            rows_nights[f"{group}/{position}"] = night
            rows.append((
                "synthetic", f"{group}/{position}", SOURCE_PARTITION, position, at(second), group, "orders", 0,
                is_tombstone, committed, 0, "", None if is_tombstone else at(second), None, None,
                1, 3, None, None,
            ))  # fmt: skip
    return spark.createDataFrame(rows, SILVER_SCHEMAS["offset_commits"]), rows_nights


def snapshots(spark):
    rows = [("synthetic", "orders", 0, 10 * 2_000 + 200 * second, at(second)) for second in range(0, 125, 5)]
    return spark.createDataFrame(rows, ops.end_offsets_schema)


def night_rows(spark, commits, rows_nights: dict[str, int], snapshot_rows, night: int):
    arrived = spark.createDataFrame(
        [(key,) for key, first in rows_nights.items() if first <= night], "record_id string"
    )
    up_to = at(SNAPSHOTS_UP_TO[night - 1])
    return commits.join(arrived, on="record_id", how="left_semi"), snapshot_rows.where(F.col("observed_at") <= up_to)


def _ensure_inputs(spark, config) -> None:
    ensure_table(
        spark, config.table("offset_commits"), SILVER_SCHEMAS["offset_commits"], partition_by=("cluster",),
        change_feed=True,
    )  # fmt: skip
    ensure_table(spark, config.table(END_OFFSETS), ops.end_offsets_schema, partition_by=("cluster",), change_feed=True)
    for name in ("generations", "rebalances"):  # the feed on, as the history step makes them
        ensure_table(spark, config.table(name), gold.GOLD_SCHEMAS[name], partition_by=("cluster",), change_feed=True)


@pytest.fixture(scope="module")
def nights(spark, spark_config):
    """Runs every night; per night: the run's counts and the carry's rows."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    config = replace(
        _config(spark_config, DATABASE), cluster="synthetic", sections={**spark_config.sections, "gold": GOLD}
    )
    _ensure_inputs(spark, config)
    (commits, rows_nights), snapshot_rows = offset_records(spark), snapshots(spark)
    results = []
    for night in range(1, len(SNAPSHOTS_UP_TO) + 1):
        night_commits, night_snapshots = night_rows(spark, commits, rows_nights, snapshot_rows, night)
        for name, rows, key in (
            ("offset_commits", night_commits, ["record_id"]),
            (END_OFFSETS, night_snapshots, ["cluster", "topic", "partition", "observed_at"]),
        ):
            _append(spark, config.table(name), rows.join(spark.table(config.table(name)), on=key, how="left_anti"))
        counts = run_metrics(spark, config)
        carry = {
            row.group_id: row.holds for row in spark.table(config.table(CARRY))
            .groupBy("group_id").agg(F.min("holds_every_record").alias("holds")).collect()
        }  # fmt: skip
        results.append((counts, carry))
    return config, results


@pytest.fixture(scope="module")
def from_scratch(spark, spark_config, nights):
    final_config, _ = nights
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {FULL_DATABASE}")
    config = replace(final_config, database=FULL_DATABASE, full=True)
    _ensure_inputs(spark, config)
    for name in ("offset_commits", END_OFFSETS):
        _append(spark, config.table(name), spark.table(final_config.table(name)))
    run_metrics(spark, config)
    return tables_of(spark, config), tables_of(spark, final_config)


def test_a_first_tombstone_after_every_record_continues_from_the_carry_s_tail(nights):
    _, results = nights
    (_, carried_1), (second, carried_2) = results[0], results[1]
    assert carried_1["deleted"] is False and carried_1["skewed"] is False  # the carry holds their last buckets
    assert second["metrics_group_partitions_whole"] == 0
    assert second["metrics_group_partitions_continued"] == len(GROUPS)
    assert carried_2["deleted"] is False  # tombstoned now, and still not every record


def test_a_new_life_after_it_continues_and_records_out_of_log_order_are_read_whole(nights):
    _, results = nights
    assert results[2][0]["metrics_group_partitions_whole"] == 1  # backup: a tombstone behind its commits
    assert results[3][0]["metrics_group_partitions_whole"] == 1  # skewed: a commit before its tombstone's time


@pytest.mark.parametrize("table", [*METRICS_TABLES, CARRY])
def test_nights_equal_one_run_from_scratch(from_scratch, table):
    full, nightly = from_scratch
    assert full[table], f"{table} is empty: the comparison would prove nothing"
    assert nightly[table] == full[table]
