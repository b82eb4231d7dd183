"""Metrics: silver offsets + `end_offsets` snapshots + gold history -> lag, status and daily tables."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from jobs.config import Config, GoldSettings
from jobs.runs import JobRun
from jobs.tables import END_OFFSETS, Materialize, cluster_rows, table_location, write_gold
from schemas import gold, ops
from transforms.gold import group_daily, lag, snapshot_horizon, status


def build_metrics(
    offset_commits: DataFrame,
    end_offsets: DataFrame,
    history: Mapping[str, DataFrame],
    settings: GoldSettings,
    as_of: date | None,
    store: Materialize,
) -> None:
    """Silver `offset_commits` + `end_offsets` snapshots + gold `generations` and `rebalances` (any clusters)
    -> every table of METRICS_TABLES, handed to `store` in dependency order."""
    # lag and consumer_status read only the records near snapshots; found once, kept on disk for both.
    seen = snapshot_horizon.records_seen_by_snapshots(
        offset_commits,
        end_offsets,
        intervals=settings.status_intervals,
        min_distance_ms=settings.status_min_distance_ms,
    ).persist(StorageLevel.DISK_ONLY)
    try:
        lag_rows = store("lag", lag.lag(seen, end_offsets))
        store("lag_daily", lag.lag_daily(lag_rows))
        partition_status = store(
            "consumer_status",
            status.consumer_status(
                lag_rows,
                seen,
                end_offsets,
                intervals=settings.status_intervals,
                min_distance_ms=settings.status_min_distance_ms,
                allowed_lag=settings.status_allowed_lag,
                minimum_complete=settings.status_minimum_complete,
            ),
        )
    finally:
        seen.unpersist()
    group_rows = store("group_status", status.group_status(partition_status, settings.status_window_minutes))
    daily = group_daily.group_daily(
        history["generations"],
        offset_commits,
        history["rebalances"],
        lag_rows,
        group_rows,
        as_of=as_of,
        stale_after_days=settings.stale_after_days,
        offsets_retention_minutes=settings.offsets_retention_minutes,
        expiry_warning_hours=settings.expiry_warning_hours,
    )
    store("group_daily", daily)


def metrics(spark: SparkSession, config: Config, run: JobRun) -> None:
    if not spark.catalog.tableExists(config.table(END_OFFSETS)):
        run.progress("lag", f"no {config.table(END_OFFSETS)} table: lag and status stay empty")
    else:
        run.inputs = [*run.inputs, table_location(spark, config.table(END_OFFSETS))]
    build_metrics(
        cluster_rows(spark, config, "offset_commits"),
        cluster_rows(spark, config, END_OFFSETS, ops.end_offsets_schema),
        {
            "generations": cluster_rows(spark, config, "generations", gold.generations_schema),
            "rebalances": cluster_rows(spark, config, "rebalances", gold.rebalances_schema),
        },
        config.gold_settings(),
        config.run_date,
        lambda name, rows: write_gold(spark, config, run, name, rows),
    )
