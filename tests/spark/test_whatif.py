"""The what-if replay and idle capacity through the history step's own builder, on tiny group histories.

`crash`: the reference example (topics Order with 7 partitions and Stock with 5, consumers C1-C3 under
range; C3 crashes). `idle`: five members on three partitions, one subscribed to a topic that has none;
two generations later the idle ones have left. `lazy`: a member too many for more than a day.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest
from pyspark.sql import functions as F

from jobs.config import GoldSettings
from jobs.steps.history import history_from_scratch
from jobs.steps.views import create_views
from jobs.tables import ensure_table, gold_rows, materialized, replace_cluster_rows
from schemas import gold, ops, silver
from tests.gold_rows import CLUSTER, at, frame, group_tables
from tests.gold_rows import group_record as record

BOTH = ["Order", "Stock"]
DAY_SECONDS = 24 * 3600
RANGE_BEFORE = {"C1": {"Order": [0, 1, 2], "Stock": [0, 1]}, "C2": {"Order": [3, 4], "Stock": [2, 3]},
                "C3": {"Order": [5, 6], "Stock": [4]}}  # fmt: skip
RANGE_AFTER = {"C1": {"Order": [0, 1, 2, 3], "Stock": [0, 1, 2]}, "C2": {"Order": [4, 5, 6], "Stock": [3, 4]}}
HISTORY = [
    record("crash", 0, 10, 1, [(m, None, BOTH, RANGE_BEFORE[m]) for m in ("C1", "C2", "C3")]),
    record("crash", 1, 16.7, 2, [(m, None, BOTH, RANGE_AFTER[m]) for m in ("C1", "C2")], joined_at=16.5),
    record("idle", 2, 100, 1, [("A", None, ["Order"], {"Order": [0]}), ("B", None, ["Order"], {"Order": [1]}),
                               ("C", None, ["Order"], {"Order": [2]}), ("D", None, ["Order"], {}),
                               ("E", None, ["Missing"], {})]),
    record("idle", 3, 200, 2, [("A", None, ["Order"], {"Order": [0]}), ("B", None, ["Order"], {"Order": [1]}),
                               ("C", None, ["Order"], {"Order": [2]}), ("D", None, ["Order"], {}),
                               ("E", None, ["Missing"], {})]),
    record("idle", 4, 300, 3, [("A", None, ["Order"], {"Order": [0]}), ("B", None, ["Order"], {"Order": [1]}),
                               ("C", None, ["Order"], {"Order": [2]})]),
    # lazy: one member too many from t=1000 on; a day later (another group's record) it still has it
    record("lazy", 5, 1000, 1, [("A", None, ["Order"], {"Order": [0]}), ("B", None, ["Order"], {})]),
    record("late", 6, 1000 + DAY_SECONDS + 60, 1, [("A", None, ["Order"], {"Order": [0]})]),
    # uneven: both one-partition topics went to A, B idles with partitions enough for both; then B gets one
    record("uneven", 7, 50, 1, [("A", None, BOTH, {"Order": [0], "Stock": [0]}), ("B", None, BOTH, {})]),
    record("uneven", 8, 60, 2, [("A", None, BOTH, {"Order": [0]}), ("B", None, BOTH, {"Stock": [0]})]),
]  # fmt: skip


@pytest.fixture(scope="module")
def history(spark):
    metadata, members = group_tables(spark, HISTORY)
    tables = {
        "group_metadata": metadata,
        "group_members": members,
        "offset_commits": frame(spark, silver.offset_commits_schema, []),
        "consumer_group_records": frame(spark, silver.consumer_group_records_schema, []),
    }

    def store(name, rows):
        tables[name] = materialized(gold_rows(name, rows))
        return tables[name]

    for name, rows in history_from_scratch(
        tables, spark.createDataFrame([], ops.topic_ids_schema), GoldSettings()
    ).items():
        store(name, rows)
    return tables


def _naive(seconds: float):
    """at(seconds) as Spark returns a UTC timestamp to Python (the session runs in UTC)."""
    return at(seconds).replace(tzinfo=None)


def _whatif(history, group: str, generation: int) -> dict:
    rows = history["rebalance_whatif"].where((F.col("group_id") == group) & (F.col("generation") == generation))
    return {row.assignor: row for row in rows.collect()}


def test_after_c3_crashes_range_moves_five_and_sticky_only_c3s_three(history):
    replayed = _whatif(history, "crash", 2)
    assert set(replayed) == {"range", "roundrobin", "sticky", "cooperative-sticky"}
    actual = replayed["range"]
    assert actual.is_actual_assignor and actual.is_same_as_actual and actual.actual_assignor == "range"
    assert (actual.moved_partition_count, actual.minimal_moves, actual.stickiness, actual.skew) == (5, 3, 0.6, 2)
    sticky = replayed["sticky"]
    assert not sticky.is_actual_assignor and not sticky.is_same_as_actual
    assert (sticky.moved_partition_count, sticky.stickiness, sticky.skew) == (3, 1.0, 0)
    assert {(p.member_key, p.topic, p.partition) for p in actual.assignment} == {
        (member, topic, partition)
        for member, topics in RANGE_AFTER.items()
        for topic, partitions in topics.items()
        for partition in partitions
    }


def test_eager_assignors_revoke_everything_cooperative_sticky_nothing_the_survivors_keep(history):
    replayed = _whatif(history, "crash", 2)
    # C1 and C2 owned 9 partitions: an eager member gives all of them up before it joins
    assert {name: replayed[name].revoked_partition_count for name in ("range", "roundrobin", "sticky")} == {
        "range": 9,
        "roundrobin": 9,
        "sticky": 9,
    }
    cooperative = replayed["cooperative-sticky"]
    assert (cooperative.revoked_partition_count, cooperative.round_count, cooperative.moved_partition_count) == (
        0,
        1,
        3,
    )
    assert cooperative.is_eager is False and cooperative.estimated_pause_ms is None
    assert all(row.member_count == 2 and row.idle_member_count == 0 for row in replayed.values())


def test_replayed_assignors_leave_the_same_members_idle_as_the_group(history):
    replayed = _whatif(history, "idle", 2)
    assert {name: row.idle_member_count for name, row in replayed.items()} == dict.fromkeys(replayed, 2)
    assert all(row.assigned_partition_count == 3 for row in replayed.values())


def test_generation_capacity_names_idle_members_why_and_since_when(history):
    rows = history["generation_capacity"].where(F.col("group_id") == "idle").orderBy("generation").collect()
    assert [(r.generation, r.member_count, r.idle_member_count, r.capacity_used) for r in rows] == [
        (1, 5, 2, 0.6),
        (2, 5, 2, 0.6),
        (3, 3, 0, 1.0),
    ]
    assert [(m.member_id, m.reason) for m in rows[0].idle_members] == [
        ("D", "more_members_than_partitions"),
        ("E", "subscription_matches_nothing"),
    ]
    assert [r.idle_since for r in rows] == [_naive(100), _naive(100), None]
    assert [r.valid_until for r in rows] == [_naive(200), _naive(300), None]
    assert (rows[0].min_partitions_per_member, rows[0].max_partitions_per_member) == (0, 1)
    assert rows[0].avg_partitions_per_member == pytest.approx(0.6)


def test_a_group_without_idle_members_has_full_capacity(history):
    rows = history["generation_capacity"].where(F.col("group_id") == "crash").orderBy("generation").collect()
    assert [(r.generation, r.idle_member_count, r.capacity_used, r.idle_since) for r in rows] == [
        (1, 0, 1.0, None),
        (2, 0, 1.0, None),
    ]
    assert [(r.min_partitions_per_member, r.max_partitions_per_member) for r in rows] == [(3, 5), (5, 7)]


def test_views_sum_moves_per_assignor_list_idle_members_and_flag_groups_idle_for_a_day(spark, spark_config, history):
    config = replace(spark_config, database="groupscope_whatif_views")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {config.database}")
    for name, schema in gold.GOLD_SCHEMAS.items():
        ensure_table(spark, config.table(name), schema, partition_by=("cluster",))
    for name in ("rebalance_whatif", "generation_capacity"):
        replace_cluster_rows(spark, config.table(name), history[name], CLUSTER)
    day = (CLUSTER, "lazy", date(2026, 11, 2), 0, 0, 0, None, None, None, None, None, "stable", None, None,
           False, None, False, False)  # fmt: skip
    daily = spark.createDataFrame([day], gold.group_daily_schema)
    replace_cluster_rows(spark, config.table("group_daily"), daily, CLUSTER)
    create_views(spark, config)

    summary = spark.table(config.table("whatif_summary")).where(
        (F.col("group_id") == "crash") & (F.col("period") == "last_30_days")
    )
    moves = {row.assignor: (row.moved_partition_count, row.is_actual_assignor) for row in summary.collect()}
    assert moves["range"] == (5, True) and moves["sticky"] == (3, False) and len(moves) == 4

    idle = spark.table(config.table("idle_members")).orderBy("group_id", "generation", "member_id").collect()
    assert [(r.group_id, r.generation, r.member_id, r.reason, r.idle_for_ms, r.is_long_idle) for r in idle] == [
        ("idle", 1, "D", "more_members_than_partitions", 100_000, False),
        ("idle", 1, "E", "subscription_matches_nothing", 100_000, False),
        ("idle", 2, "D", "more_members_than_partitions", 200_000, False),
        ("idle", 2, "E", "subscription_matches_nothing", 200_000, False),
        ("lazy", 1, "B", "more_members_than_partitions", (DAY_SECONDS + 60) * 1000, True),
        ("uneven", 1, "B", "assignor_gave_none", 10_000, False),
    ]
    health = spark.table(config.table("group_health")).collect()
    assert [(r.group_id, r.idle_member_count, r.idle_since, r.is_long_idle) for r in health] == [
        ("lazy", 1, _naive(1000), True)
    ]
