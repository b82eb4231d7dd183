"""Metrics: silver offsets + `end_offsets` snapshots + gold history -> lag, status and daily tables.

The first run (and --full) evaluates the cluster from scratch; later ones continue from the tables,
evaluating again only what the night's changes reach (jobs/metrics_increments.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config, GoldSettings
from jobs.metrics_increments import continue_metrics
from jobs.metrics_writes import CARRY, NOTE_TABLE, STEP, can_continue_from, input_versions, metrics_note, write_table
from jobs.runs import JobRun
from jobs.steps.share_backlog import share_backlog
from jobs.tables import (
    END_OFFSETS,
    METRICS_TABLES,
    Materialize,
    cluster_rows,
    held_on_disk,
    materialized,
    table_location,
)
from jobs.watermarks import ChangesUnavailable, covered_versions
from schemas import gold, ops
from transforms.gold import group_daily, lag, metrics_carry, snapshot_horizon, status

# The time column of the tables written in time order (so that a night's replaceWhere touches few files).
TIME_COLUMNS = {"lag": "observed_at", "consumer_status": "evaluated_at"}


def build_metrics(
    offset_commits: DataFrame,
    end_offsets: DataFrame,
    history: Mapping[str, DataFrame],
    settings: GoldSettings,
    as_of: date | None,
    store: Materialize,
    facts: DataFrame | None = None,
    words: DataFrame | None = None,
) -> None:
    """Silver `offset_commits` + `end_offsets` snapshots + gold `generations` and `rebalances` (any clusters)
    -> every table of METRICS_TABLES, handed to `store` in dependency order. `facts`, `words`:
    offset_commits' metrics_carry.group_partition_facts and group_partition_words, when the caller holds
    them already."""
    # lag and consumer_status read only the records near snapshots; found once, kept on disk for both.
    seen = snapshot_horizon.records_seen_by_snapshots(
        offset_commits,
        end_offsets,
        intervals=settings.status_intervals,
        min_distance_ms=settings.status_min_distance_ms,
        hold=materialized,
        facts=facts,
        words=words,
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
        materialized(group_daily.commits_per_day(offset_commits)),
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
    """The consumer groups' metrics, then the share groups' backlog (jobs/steps/share_backlog.py)."""
    consumer_metrics(spark, config, run)
    share_backlog(spark, config, run)


def consumer_metrics(spark: SparkSession, config: Config, run: JobRun) -> None:
    """Continues from the tables when their note says what they cover and the inputs' changes since then
    can be read (jobs/metrics_increments.py); else (first run, --full, changes gone) from scratch."""
    if not spark.catalog.tableExists(config.table(END_OFFSETS)):
        run.progress("lag", f"no {config.table(END_OFFSETS)} table: lag and status stay empty")
    else:
        run.inputs = [*run.inputs, table_location(spark, config.table(END_OFFSETS))]
    versions = input_versions(spark, config)
    covered = None if config.full else covered_versions(spark, config.table(NOTE_TABLE), STEP, config.cluster)
    outputs = (*METRICS_TABLES, CARRY)
    can_continue = can_continue_from(covered) and all(spark.catalog.tableExists(config.table(name)) for name in outputs)
    if can_continue:
        try:
            continue_metrics(spark, config, run, covered, versions)
        except ChangesUnavailable as error:
            run.progress("metrics", f"{error}: evaluating the cluster from scratch")
        else:
            run.count_tables(METRICS_TABLES)
            return
    elif covered is not None and not can_continue_from(covered):
        run.progress("metrics", "the tables were written by an earlier version: evaluating the cluster from scratch")
    metrics_from_scratch(spark, config, run, versions)


def metrics_from_scratch(spark: SparkSession, config: Config, run: JobRun, versions: dict[str, int]) -> None:
    """Every metrics table and the carry for the cluster, from all of its inputs, noting their versions."""
    settings = config.gold_settings()
    offset_commits = cluster_rows(spark, config, "offset_commits")
    history = {
        name: cluster_rows(spark, config, name, gold.GOLD_SCHEMAS[name]) for name in ("generations", "rebalances")
    }
    last_day = (
        config.run_date
        or group_daily.last_activity_day(history["generations"], group_daily.commits_per_day(offset_commits)).first()[0]
    )
    commit_note = metrics_note(config.cluster, versions, last_day)
    # One aggregation of every record for what both the carry and the snapshots' walk start from, and one
    # into their buckets' bitmaps, which both read.
    facts = materialized(
        metrics_carry.group_partition_facts(offset_commits, min_distance_ms=settings.status_min_distance_ms)
    )
    words = held_on_disk(
        metrics_carry.group_partition_words(offset_commits, facts, min_distance_ms=settings.status_min_distance_ms)
    )
    carry = metrics_carry.carry_tails(
        offset_commits,
        intervals=settings.status_intervals,
        min_distance_ms=settings.status_min_distance_ms,
        hold=materialized,
        lives=facts,
        words=words,
    )
    write_table(spark, config, CARRY, carry, commit_note, "")

    def store(name: str, rows: DataFrame) -> DataFrame:
        if name in TIME_COLUMNS:  # files by time: a night's replaceWhere and reads skip the older ones
            rows = rows.repartitionByRange(F.col(TIME_COLUMNS[name]))
        write_table(spark, config, name, rows, commit_note, "")
        return cluster_rows(spark, config, name)

    build_metrics(
        offset_commits,
        cluster_rows(spark, config, END_OFFSETS, ops.end_offsets_schema),
        history,
        settings,
        config.run_date,
        store,
        facts,
        words,
    )
    run.count_tables(METRICS_TABLES)
