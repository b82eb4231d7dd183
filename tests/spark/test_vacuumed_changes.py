"""A history run whose silver changes were vacuumed starts over from silver, before it writes anything.

The pipeline stops after decode for longer than VACUUM's retention (history failing for a week, say)
while the weekly maintenance compacts the silver tables and vacuums: the files the night's appends
added are gone, though their rows are in the compacted files. Delta would fail only as it read them,
halfway through the step; the run must see it first, rebuild the cluster's history from silver and
leave what `--full` leaves. The lab captures and their nights are tests/history_nights.py's.
"""

from __future__ import annotations

from dataclasses import replace

from delta.tables import DeltaTable

from jobs.steps.decode import SILVER_SCHEMAS
from jobs.tables import SILVER_INPUTS, ensure_table
from tests.history_nights import append_night, history_tables, lab_silver
from tests.spark.test_history_fold_nights import run_history

DATABASE = "groupscope_vacuumed_changes"
CLUSTER = "nights"
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"  # as maintenance sets it


def compact_and_vacuum(spark, config, name: str) -> None:
    """What maintenance does, at a retention of no hours (which the job itself refuses; only the age differs)."""
    spark.conf.set(RETENTION_CHECK, "false")
    spark.conf.set(LISTING_TASKS, "8")
    try:
        table = DeltaTable.forName(spark, config.table(name))
        table.optimize().executeCompaction()
        table.vacuum(0)
    finally:
        spark.conf.unset(RETENTION_CHECK)
        spark.conf.unset(LISTING_TASKS)


def test_a_run_after_its_changes_were_vacuumed_rebuilds_the_cluster(spark, spark_config):
    config = replace(spark_config, database=DATABASE, cluster=CLUSTER)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    for name in SILVER_INPUTS:
        ensure_table(spark, config.table(name), SILVER_SCHEMAS[name], partition_by=("cluster",), change_feed=True)
    lab = lab_silver(spark)
    append_night(spark, config, lab, 1)
    run_history(spark, config)
    append_night(spark, config, lab, 2)
    compact_and_vacuum(spark, config, "offset_commits")  # one table whose files are gone is enough

    counts = run_history(spark, config)
    rebuilt = history_tables(spark, config)

    # Night 2 touches 6 of the groups: a run that read its changes would fold those alone.
    from_scratch = run_history(spark, replace(config, full=True))
    assert counts["groups_refolded"] == from_scratch["groups_refolded"] > 6, (counts, from_scratch)
    assert history_tables(spark, config) == rebuilt
