"""The history step as one fold per group (jobs/steps/history_fold.py), night after night, equals a
`--full` run, row by row, on the nights of tests/spark/test_incremental_history.py: a cooperative
rebalance whose rounds fall on two nights, a KIP-848 handover across nights, transactions resolved the
next night, a late backup, a forgotten group, nights of commits only and a night with nothing new.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.runs import JobRun
from jobs.steps import history_fold
from jobs.steps.decode import SILVER_SCHEMAS
from jobs.tables import HISTORY_TABLES, SILVER_INPUTS, ensure_table
from tests.spark.test_incremental_history import (
    CLUSTER,
    FORGOTTEN_GROUP,
    NIGHTS,
    PENDING_NIGHT,
    append_night,
    forget,
    history_tables,
    lab_silver,
    resolve_transactions,
)

DATABASE = "groupscope_fold_nights"
FOLDED_TABLES = HISTORY_TABLES


def run_history(spark, config) -> dict:
    with JobRun(spark, config, "history") as run:
        history_fold.history(spark, config, run)
    assert run.exit_code == 0, "the history run failed; its traceback is in logs/"
    return dict(run.counts)


@pytest.fixture(scope="module")
def nights(spark, spark_config):
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
        results.append((counts, {name: history_tables(spark, config)[name] for name in FOLDED_TABLES}))
    return config, results


def test_each_night_folds_the_groups_it_touched(nights):
    _, results = nights
    folded = [counts["groups_folded"] for counts, _ in results]
    refolded = [counts["groups_refolded"] for counts, _ in results]
    print("folded per night:", folded, "from their first record:", refolded)
    assert folded[0] == refolded[0] > 0
    assert folded[4] == 0  # nothing new


def test_a_night_with_nothing_new_changes_nothing(nights):
    _, results = nights
    assert results[4][1] == results[3][1]


def test_a_full_run_gives_the_same_tables(spark, nights):
    config, results = nights
    incremental = results[-1][1]
    counts = run_history(spark, replace(config, full=True))
    from_scratch = {name: history_tables(spark, config)[name] for name in FOLDED_TABLES}
    assert counts["groups_folded"] == counts["groups_refolded"] > 0
    for name in FOLDED_TABLES:
        assert from_scratch[name] == incremental[name], f"{name}: the nights' rows differ from a --full run"
    assert sum(len(rows) for rows in from_scratch.values()) > 100
    assert run_history(spark, config)["groups_folded"] == 0  # the full run noted what it covered
