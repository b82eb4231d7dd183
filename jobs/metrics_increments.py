"""The metrics step continuing from its tables: a night evaluates again only what its changes reach.

Watermark: every commit of a metrics table carries the note {input table: version covered} for silver
offset_commits, ops end_offsets, gold generations and rebalances, and `last_day` (the last day the
group_daily rows reach, days since 1970-01-01, -1 for none). group_daily is written last, so its note is
the step's: a run killed before it starts again from the same versions, and every table it rewrites
comes out the same (each is rebuilt from inputs, or copied where nothing reached it).

A night, for one cluster (transforms/gold/metrics_carry.py says why each part is exact):
1. Changes: offset_commits and end_offsets through the Change Data Feed since the covered versions;
   generations and rebalances through theirs too, netted to the rows of the few columns group_daily
   reads that differ between the covered version and now (history deletes and writes again unchanged
   rows). A table whose feed was off for part of that range (made by an earlier version) starts the
   step over.
2. lag, consumer_status: each group partition a change reaches, from its start on, from the carried
   records (metrics_carry) + silver's records from the night's earliest start on (late data: the group
   partition's whole history), and its topic partition's snapshots from SNAPSHOT_LOOKBACK before
   (all of them where that may leave out one an evaluation needs).
3. lag_daily from the day of each group topic's start, group_status from the window of each group's,
   group_daily from the first day each group's changes reach, and every group's new days (as_of moved).
Each table is written in one replaceWhere commit from the earliest time rebuilt: the rows rebuilt + the
table's own rows there that nothing reached. With no change at all, nothing is written unless the run
date moved (an Airflow run of another date over the same log); then group_daily alone, which alone
reads the last day.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config, GoldSettings
from jobs.metrics_days import continue_group_daily, last_day_reached
from jobs.metrics_writes import (
    CARRY,
    LAST_DAY,
    STEP,
    as_text,
    day_of,
    earliest,
    metrics_note,
    replace_from_starts,
    rows_since,
    write_table,
)
from jobs.runs import JobRun
from jobs.tables import END_OFFSETS, cluster_rows, held_on_disk, materialized
from jobs.watermarks import ChangesUnavailable, changes_since, net_changes
from schemas import gold, ops
from schemas.metrics_carry import metrics_carry_schema
from transforms.gold import lag, metrics_carry, metrics_reach, status
from transforms.gold.generations import GROUP
from transforms.gold.offsets import OFFSET_KEY, PARTITION
from transforms.gold.snapshot_horizon import records_seen_by_snapshots

# How far before what a night evaluates its snapshots are read; a topic partition where that may not be
# enough (checked before, or found by an uncertain time lag after) is read whole. Read at each call: the
# tests shorten it to make the second case happen.
SNAPSHOT_LOOKBACK = timedelta(days=1)
UNCERTAIN_TIME_LAG = (lag.METHOD_LOWER_BOUND, lag.METHOD_TOO_FEW_POINTS)
# What the night's changed commits are read for (where evaluations start, the days reached, the last
# day): not the columns nothing reads.
CHANGED_COMMIT_COLUMNS = (
    *OFFSET_KEY, "source_partition", "source_offset", "record_at", "is_tombstone", "committed_offset",
    "committed_at", "expires_at", "txn_state", "_change_type",
)  # fmt: skip
HISTORY_COLUMNS = {
    "generations": ("recorded_at", "state", "join_completed_at", "source_offset"),
    "rebalances": ("completed_at", "moved_partition_count"),
}


def input_changes(spark: SparkSession, config: Config, name: str, covered: int, now: int, schema) -> DataFrame:
    """The cluster's rows of a silver or ops input inserted, updated or deleted after version `covered`."""
    if now == covered:
        return spark.createDataFrame([], schema).withColumn("_change_type", F.lit(""))
    if now < covered:
        raise ChangesUnavailable(f"{config.table(name)}: version {now} is before the covered {covered}")
    return changes_since(spark, config.table(name), covered, now).where(F.col("cluster") == F.lit(config.cluster))


def history_changes(spark: SparkSession, config: Config, name: str, covered: int, now: int) -> DataFrame:
    """Rows of a gold history table (the columns group_daily reads) in one of its covered and current
    versions and not the other, with `is_removed` for the covered side, materialized: from the table's
    change feed (the rows history rewrote), not a comparison of the two versions whole, which grew with
    the history."""
    columns = ["cluster", "group_id", *HISTORY_COLUMNS[name]]
    current = cluster_rows(spark, config, name, gold.GOLD_SCHEMAS[name]).select(*columns)
    if covered == now:
        return materialized(current.limit(0).withColumn("is_removed", F.lit(False)))
    if covered < 0:
        return materialized(current.withColumn("is_removed", F.lit(False)))
    if now < covered:
        raise ChangesUnavailable(f"{config.table(name)}: version {now} is before the covered {covered}")
    return net_changes(spark, config.table(name), covered, now, columns).where(
        F.col("cluster") == F.lit(config.cluster)
    )


def evaluate_group_partitions(
    spark: SparkSession,
    config: Config,
    run: JobRun,
    starts: DataFrame,
    settings: GoldSettings,
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The lag and consumer_status rows of the group partitions in `starts` from their start on, and
    their new carry rows."""
    commits = cluster_rows(spark, config, "offset_commits")
    hows = {row["how"]: row["count"] for row in starts.groupBy("how").count().collect()}
    run.counts["metrics_group_partitions_continued"] = hows.get(metrics_carry.CONTINUE, 0)
    run.counts["metrics_group_partitions_whole"] = hows.get(metrics_carry.WHOLE, 0)
    continuing_from = earliest(starts.where(F.col("how") == F.lit(metrics_carry.CONTINUE)))
    recent = commits.limit(0)
    if continuing_from is not None:
        recent = commits.where(
            (F.col("record_at") >= F.lit(continuing_from).cast("timestamp")) | F.col("record_at").isNull()
        )
    whole = commits if hows.get(metrics_carry.WHOLE) else commits.limit(0)
    carry = cluster_rows(spark, config, CARRY, metrics_carry_schema)
    # Not held: each pass reads the few columns it needs from the files again, which cost less than
    # writing a night's records whole to local disk first (a fifth of a continuing night's metrics).
    records = metrics_carry.records_to_evaluate(carry, recent, whole, starts)
    facts = materialized(metrics_carry.group_partition_facts(records, min_distance_ms=settings.status_min_distance_ms))
    # The records' buckets as bitmaps, once for both the snapshots' walk and the carry's cut.
    words = held_on_disk(
        metrics_carry.group_partition_words(records, facts, min_distance_ms=settings.status_min_distance_ms)
    )

    end_offsets = cluster_rows(spark, config, END_OFFSETS, ops.end_offsets_schema)
    needed = metrics_reach.snapshots_needed_from(facts, starts).localCheckpoint()
    lookback_micros = F.lit(int(SNAPSHOT_LOOKBACK.total_seconds() * 1_000_000))
    window_from = needed.agg(
        as_text(F.timestamp_micros(F.unix_micros(F.min("needed_from_at")) - lookback_micros))
    ).first()[0]
    window = end_offsets.join(needed.select(*PARTITION), on=list(PARTITION), how="left_semi")
    if window_from is not None:
        window = window.where(F.col("observed_at") >= F.lit(window_from).cast("timestamp"))
    window = window.localCheckpoint()
    whole_partitions = metrics_reach.partitions_short_of_snapshots(
        window, needed, intervals=settings.status_intervals
    ).localCheckpoint()
    snapshots = (
        window.join(whole_partitions, on=list(PARTITION), how="left_anti")
        .unionByName(end_offsets.join(whole_partitions, on=list(PARTITION), how="left_semi"))
        .localCheckpoint()
    )
    seen, lag_rows = _lag_of(records, facts, words, snapshots, starts, settings)
    # A time lag found without a point at or below the committed offset may have one before the window:
    # those topic partitions are evaluated again from all their snapshots (each is evaluated on its own).
    uncertain = (
        lag_rows.where(F.col("time_lag_method").isin(*UNCERTAIN_TIME_LAG))
        .select(*PARTITION)
        .distinct()
        .join(whole_partitions, on=list(PARTITION), how="left_anti")
        .localCheckpoint()
    )
    run.counts["metrics_topic_partitions_read_again"] = uncertain.count()
    if run.counts["metrics_topic_partitions_read_again"]:
        all_snapshots = end_offsets.join(uncertain, on=list(PARTITION), how="left_semi").localCheckpoint()
        seen_again, lag_again = _lag_of(
            records.join(uncertain, on=list(PARTITION), how="left_semi"),
            facts.join(uncertain, on=list(PARTITION), how="left_semi"),
            words,
            all_snapshots,
            starts,
            settings,
        )
        snapshots, seen, lag_rows = (
            kept.join(uncertain, on=list(PARTITION), how="left_anti").unionByName(again).localCheckpoint()
            for kept, again in ((snapshots, all_snapshots), (seen, seen_again), (lag_rows, lag_again))
        )
        whole_partitions = whole_partitions.unionByName(uncertain)
    run.counts["metrics_topic_partitions_read_whole"] = whole_partitions.count()
    status_rows = status.consumer_status(
        lag_rows,
        seen,
        snapshots,
        intervals=settings.status_intervals,
        min_distance_ms=settings.status_min_distance_ms,
        allowed_lag=settings.status_allowed_lag,
        minimum_complete=settings.status_minimum_complete,
    )
    tails = metrics_carry.carry_tails(
        records,
        intervals=settings.status_intervals,
        min_distance_ms=settings.status_min_distance_ms,
        partial=metrics_carry.partial_carries(carry, starts),
        hold=materialized,
        lives=facts,
        words=words,
    )
    carry_rows = carry.join(starts, on=list(OFFSET_KEY), how="left_anti").unionByName(tails.select(*carry.columns))
    return lag_rows, status_rows, carry_rows


def _lag_of(
    records: DataFrame,
    facts: DataFrame,
    words: DataFrame,
    snapshots: DataFrame,
    starts: DataFrame,
    settings: GoldSettings,
) -> tuple[DataFrame, DataFrame]:
    """(records seen by the snapshots, lag rows from each group partition's start on), materialised.
    `facts`, `words`: the records' metrics_carry.group_partition_facts and group_partition_words."""
    seen = held_on_disk(
        records_seen_by_snapshots(
            records,
            snapshots,
            intervals=settings.status_intervals,
            min_distance_ms=settings.status_min_distance_ms,
            hold=materialized,
            facts=facts,
            words=words,
        )
    )
    return seen, held_on_disk(metrics_reach.filter_before_start(lag.lag(seen, snapshots), starts, "observed_at"))


def continue_metrics(
    spark: SparkSession,
    config: Config,
    run: JobRun,
    covered: dict[str, int],
    versions: dict[str, int],
) -> None:
    """One night from the covered versions to `versions` (see the module docstring). Raises
    ChangesUnavailable when an input's changes since then cannot be read: the caller starts over."""
    settings = config.gold_settings()
    commits_changed = (
        input_changes(
            spark, config, "offset_commits", covered["offset_commits"], versions["offset_commits"],
            cluster_rows(spark, config, "offset_commits").schema,
        )
        .select(*CHANGED_COMMIT_COLUMNS)
    )  # fmt: skip
    # What the starts and the days read of the changed commits (nearly all the night's rows): read once
    # into a row per group partition, not the rows held (last_day_reached reads them only without a run date).
    earliest_commit_changes = materialized(metrics_carry.earliest_changes(commits_changed))
    snapshots_changed = input_changes(
        spark, config, END_OFFSETS, covered[END_OFFSETS], versions[END_OFFSETS], ops.end_offsets_schema
    ).localCheckpoint()
    history_changed = {
        name: history_changes(spark, config, name, covered[name], versions[name]) for name in HISTORY_COLUMNS
    }
    covered_last_day = day_of(covered[LAST_DAY])
    changed = (earliest_commit_changes, snapshots_changed, *history_changed.values())
    nothing_changed = all(rows.isEmpty() for rows in changed)
    if nothing_changed and config.run_date in (None, covered_last_day):
        # Every table is a function of these inputs and the last day (the run date, else carried), so each
        # would be written again as it is. The note stays: the next night reads these empty changes again.
        run.progress(STEP, "no input row changed since the versions the tables cover, and the same last day")
        run.counts.update(metrics_group_partitions_continued=0, metrics_group_partitions_whole=0)
        return
    carry = cluster_rows(spark, config, CARRY, metrics_carry_schema)
    starts = metrics_carry.group_partition_starts(
        earliest_commit_changes, snapshots_changed, carry, min_distance_ms=settings.status_min_distance_ms
    ).localCheckpoint()
    last_day = last_day_reached(spark, config, covered_last_day, commits_changed, history_changed["generations"])
    commit_note = metrics_note(config.cluster, versions, last_day)
    if nothing_changed:
        # Only group_daily reads the last day (an Airflow run of another date over the same log): the other
        # tables would be written again as they are, so they keep their rows and notes.
        run.progress(STEP, f"no input row changed since the versions the tables cover: group_daily to {last_day}")
        run.counts.update(metrics_group_partitions_continued=0, metrics_group_partitions_whole=0)
    else:
        continue_group_partitions(spark, config, run, starts, settings, commit_note)
    days_changed = metrics_reach.group_change_days(
        earliest_commit_changes, history_changed["generations"], history_changed["rebalances"], starts
    )
    continue_group_daily(spark, config, run, days_changed, covered_last_day, last_day, commit_note)


def continue_group_partitions(
    spark: SparkSession, config: Config, run: JobRun, starts: DataFrame, settings: GoldSettings, commit_note: str
) -> None:
    """The carry, lag, consumer_status, lag_daily and group_status from the night's `starts` on."""
    lag_rows, status_rows, carry_rows = evaluate_group_partitions(spark, config, run, starts, settings)
    write_table(spark, config, CARRY, carry_rows.localCheckpoint(), commit_note, "")
    replace_from_starts(spark, config, "lag", lag_rows, starts, "observed_at", OFFSET_KEY, commit_note)
    replace_from_starts(spark, config, "consumer_status", status_rows, starts, "evaluated_at", OFFSET_KEY, commit_note)

    topic_days = metrics_reach.topic_day_starts(starts).localCheckpoint()
    lag_since = rows_since(
        cluster_rows(spark, config, "lag"), topic_days, "observed_at", ("cluster", "group_id", "topic")
    )
    replace_from_starts(
        spark, config, "lag_daily", lag.lag_daily(lag_since), topic_days.withColumn("start_at", F.to_date("start_at")),
        "day", ("cluster", "group_id", "topic"), commit_note,
    )  # fmt: skip
    windows = metrics_reach.group_window_starts(starts, settings.status_window_minutes).localCheckpoint()
    status_since = rows_since(
        cluster_rows(spark, config, "consumer_status"), windows.drop("start_at"), "evaluated_at", GROUP, "read_from_at"
    )
    replace_from_starts(
        spark, config, "group_status", status.group_status(status_since, settings.status_window_minutes), windows,
        "evaluated_at", GROUP, commit_note,
    )  # fmt: skip
