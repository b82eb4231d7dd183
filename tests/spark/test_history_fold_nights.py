"""The history step (one fold per group, jobs/steps/history.py), night after night on the lab's nights
(tests/history_nights.py), equals a `--full` run row by row: cooperative rounds on two nights, a KIP-848
handover, streams and share epochs across nights, transactions resolved a night later, a late backup, a
forgotten group, a night of commits only and a night with nothing new.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.sql import functions as F

from jobs.runs import JobRun
from jobs.steps import history as history_step
from jobs.steps.decode import SILVER_SCHEMAS
from jobs.tables import HISTORY_TABLES, SILVER_INPUTS, cluster_rows, ensure_table
from jobs.watermarks import current_version
from tests.history_nights import (
    CLUSTER,
    FORGOTTEN_GROUP,
    NIGHTS,
    PENDING_NIGHT,
    TOPIC_NAMES,
    append_night,
    forget,
    history_tables,
    lab_silver,
    resolve_transactions,
)

DATABASE = "groupscope_fold_nights"


def run_history(spark, config) -> dict:
    with JobRun(spark, config, "history") as run:
        history_step.history(spark, config, run)
    assert run.exit_code == 0, "the history run failed; its traceback is in logs/"
    return dict(run.counts)


def cooperative_rounds(spark, config) -> list[tuple]:
    """(first round, closing generation, round count) of the cooperative-sticky group's rebalances."""
    rows = cluster_rows(spark, config, "rebalances").where(F.col("group_id") == F.lit("cooperative-sticky"))
    return sorted(tuple(row) for row in rows.select("first_round_generation", "generation", "round_count").collect())


@pytest.fixture(scope="module")
def nights(spark, spark_config):
    """Per night: the run's counts, its tables and the cooperative group's rounds."""
    config = replace(spark_config, database=DATABASE, cluster=CLUSTER)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    for name in SILVER_INPUTS:
        ensure_table(spark, config.table(name), SILVER_SCHEMAS[name], partition_by=("cluster",), change_feed=True)
    lab = lab_silver(spark)
    results = []
    for night in range(1, NIGHTS + 1):
        append_night(spark, config, lab, night)
        if night == PENDING_NIGHT + 1:
            resolve_transactions(spark, config, lab)
        if night == 3:
            forget(spark, config, FORGOTTEN_GROUP)
        counts = run_history(spark, config)
        versions = {name: current_version(spark, config.table(name)) for name in history_step.WRITTEN_TABLES}
        results.append((counts, history_tables(spark, config), cooperative_rounds(spark, config), versions))
    return config, results


def test_each_night_folds_the_groups_it_touched(nights):
    _, results = nights
    folded = [counts["groups_folded"] for counts, *_ in results]
    refolded = [counts["groups_refolded"] for counts, *_ in results]
    print("folded per night:", folded, "from their first record:", refolded)
    # 1: every group of the night (11), from its first record. 3: the late backup (life-empty), the
    #    forgotten group (life-expired) and the transactions resolved before txn-app's state are folded anew.
    # 5: nothing new.
    assert folded[0] == refolded[0] == 11
    assert folded[2] > refolded[2] >= 2
    assert folded[4] == refolded[4] == 0
    assert all(counts["groups_not_folded"] == 0 for counts, *_ in results)


def test_each_night_reports_what_its_tables_hold(nights):
    """Night 1 folds every group and counts what it wrote; a later night counts the tables; the night with
    nothing new counts nothing (the summary does)."""
    _, results = nights
    reported = [{name: counts[name] for name in HISTORY_TABLES if name in counts} for counts, *_ in results]
    held = [{name: len(tables[name]) for name in HISTORY_TABLES} for _, tables, *_ in results]
    assert reported[:4] == held[:4] and reported[4] == {}
    assert held[0]["rebalance_whatif"] > 0


def test_later_nights_name_topic_ids_from_the_kept_pairs_and_their_own_commits(nights):
    _, results = nights
    assert [counts["commit_topic_names_continued"] for counts, *_ in results] == [0, 1, 1, 1, 1]
    pairs = [len(tables[TOPIC_NAMES]) for _, tables, *_ in results]
    assert 0 < pairs[0] <= pairs[2] == pairs[3] == pairs[4], pairs


def test_a_cooperative_rebalance_whose_rounds_fall_on_two_nights_is_one_rebalance(nights):
    _, results = nights
    night_one, night_two = results[0][2], results[1][2]
    assert (2, 2, 1) in night_one  # generation 2, a revoke round with nothing after it yet, closes one
    assert (2, 3, 2) in night_two and (2, 2, 1) not in night_two  # generation 3 makes the two one


def test_a_night_with_nothing_new_changes_nothing(nights):
    """Nor does it commit: every table's note already covers the inputs as they are."""
    _, results = nights
    assert results[4][1] == results[3][1]
    assert results[4][3] == results[3][3]


def test_the_forgotten_group_leaves_no_row(nights):
    _, results = nights
    forgotten = f"('group_id', '{FORGOTTEN_GROUP}')"
    assert any(forgotten in row for row in results[1][1]["generations"])
    assert not any(forgotten in row for tables in (results[2][1],) for rows in tables.values() for row in rows)


def test_streams_and_share_groups_follow_their_epochs_across_nights(nights):
    _, results = nights
    first, last = results[0][1], results[-1][1]
    streams_lab, share_lab = "('group_id', 'streams-lab')", "('group_id', 'share-lab')"
    assert (
        0
        < sum(streams_lab in row for row in first["streams_members"])
        < sum(streams_lab in row for row in last["streams_members"])
    )
    assert any(streams_lab in row and "('standby_tasks', ())" not in row for row in last["streams_members"])
    assert (
        0 < sum(share_lab in row for row in first["generations"]) < sum(share_lab in row for row in last["generations"])
    )
    deleted = "('group_id', 'share-lab-deleted')"
    assert any(deleted in row and "('state', 'deleted')" in row for row in last["generations"])


def test_a_full_run_gives_the_same_tables(spark, nights):
    config, results = nights
    incremental = results[-1][1]
    counts = run_history(spark, replace(config, full=True))
    from_scratch = history_tables(spark, config)
    assert counts["groups_folded"] == counts["groups_refolded"] > 0
    for name, rows in from_scratch.items():
        assert rows == incremental[name], f"{name}: the nights' rows differ from a --full run"
    cooperative = "('group_id', 'cooperative-sticky')"  # the equality would hold for empty tables too
    assert sum(cooperative in row for row in from_scratch["rebalance_whatif"]) >= 4
    assert any(cooperative in row for row in from_scratch["generation_capacity"])
    assert run_history(spark, config)["groups_folded"] == 0  # the full run noted what it covered
