"""The metrics step continued night by night gives, row by row, the tables one run from scratch over the
final inputs gives (jobs/metrics_increments.py).

Five real lab captures (kafka-4.2.1), one a day, each starting 20 s before midnight so that its days
split it, are one cluster's history (group ids and record ids prefixed with the scenario to keep them
apart; topic names are shared, as on one broker, so groups of earlier days stay on as stopped
consumers of later snapshots). Silver offset_commits and ops end_offsets are real Delta tables with the
Change Data Feed on, changed night by night the way the decode and end_offsets steps change them
(appends; a transaction resolved later is an UPDATE of txn_state; a forget is a DELETE); gold
generations and rebalances are the jobs' own history builder over the same cut. Nights: a first run from
scratch; transactional commits appended pending; new snapshots only, with those transactions resolved
(committed and aborted); nothing new (the same night again: idempotence); late commits and a late
snapshot with rows deleted from silver; the run date moving, with a snapshot arriving late (before what
the carry of a group partition with more commits than it keeps can answer for).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest
from delta.tables import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from jobs.config import load_config
from jobs.metrics_writes import CARRY
from jobs.runs import JobRun
from jobs.steps.decode import SILVER_SCHEMAS
from jobs.steps.history import history_from_scratch
from jobs.steps.ingest import read_inputs
from jobs.steps.metrics import metrics
from jobs.tables import (
    END_OFFSETS,
    METRICS_TABLES,
    ensure_table,
    gold_rows,
    materialized,
    replace_cluster_rows,
    table_location,
)
from jobs.watermarks import covered_versions
from schemas import gold, ops
from tests.delta_compare import table_rows
from tests.lab_tables import CAPTURES, Capture
from tests.scan_metrics import files_read_since, last_execution_id
from transforms import silver
from transforms.gold.offsets import OFFSET_KEY, filter_invisible_offset_records

DATABASE, FULL_DATABASE = "incremental_metrics", "incremental_metrics_full"
CLUSTER = "nights"
SCENARIOS = ("lifecycle", "transactions", "cooperative-sticky", "kip848-handover", "quickstart")
FIRST_DAY = date(2026, 11, 1)
HISTORY_SILVER = ("group_metadata", "group_members", "consumer_group_records")
# Small enough that the captures cross every path: carried windows, a carry that does not hold every
# record (more than `status_intervals` + 1 buckets), stale and expiring groups.
GOLD = {"status_intervals": 2, "stale_after_days": 2, "offsets_retention_minutes": 2 * 1440}
LATE_GROUP = "lifecycle/life-empty"  # its commits after the first cut arrive on night 5
FORGOTTEN_GROUP = "lifecycle/life-expired"  # its commits before the first cut are deleted on night 6
EARLY_TOPIC = "orders"  # a snapshot of it amid the cooperative-sticky group's commits arrives on night 6


def _shift_timestamps(rows: DataFrame, micros: int) -> DataFrame:
    return rows.withColumns(
        {
            field.name: F.timestamp_micros(F.unix_micros(field.name) + F.lit(micros))
            for field in rows.schema.fields
            if isinstance(field.dataType, TimestampType)
        }
    )


def _relabelled(rows: DataFrame, scenario: str) -> DataFrame:
    changes = {"cluster": F.lit(CLUSTER)}
    if "record_id" in rows.columns:
        changes["record_id"] = F.concat(F.lit(f"{scenario}/"), "record_id")
    if "group_id" in rows.columns:
        changes["group_id"] = F.concat(F.lit(f"{scenario}/"), "group_id")
    return rows.withColumns(changes)


def _epoch_micros(day: date) -> int:
    return int(datetime.combine(day, datetime.min.time(), UTC).timestamp()) * 1_000_000


@pytest.fixture(scope="module")
def lab(spark):
    """Every capture's silver rows and snapshots, relabelled and shifted to its day (in memory), and each
    capture's first and last snapshot (microseconds since the epoch)."""
    tables: dict[str, DataFrame] = {}
    spans = []
    for day, scenario in enumerate(SCENARIOS):
        capture = Capture(CAPTURES / "kafka-4.2.1" / scenario)
        config = load_config(overrides={"input": {"cluster": capture.cluster, "segment_paths": [str(capture.path)]}})
        decoded = materialized(silver.decode_raw_records(read_inputs(spark, config, "nights")))
        snapshots = spark.createDataFrame(capture.end_offset_rows(), ops.end_offsets_schema)
        first, last = snapshots.agg(F.min(F.unix_micros("observed_at")), F.max(F.unix_micros("observed_at"))).first()
        shift = _epoch_micros(FIRST_DAY + timedelta(days=day)) - 20_000_000 - first
        spans.append((first + shift, last + shift))
        parts = {
            "offset_commits": silver.filter_offset_commits(decoded),
            "group_metadata": silver.filter_group_metadata(decoded),
            "group_members": silver.explode_group_members(decoded),
            "consumer_group_records": silver.filter_consumer_group_records(decoded),
            END_OFFSETS: snapshots,
        }
        for name, rows in parts.items():
            rows = _relabelled(_shift_timestamps(rows, shift), scenario)
            tables[name] = rows if name not in tables else tables[name].unionByName(rows)
    return {name: materialized(rows) for name, rows in tables.items()}, spans


def _micros(column: str) -> F.Column:
    return F.unix_micros(column)


def nights_inputs(lab: dict[str, DataFrame], spans: list[tuple[int, int]]) -> list[dict]:
    """Per night: the run date and the silver offset_commits, end_offsets and history silver as they stand."""

    def within(day: int, fraction: float) -> int:
        first, last = spans[day]
        return first + int((last - first) * fraction)

    commits = lab["offset_commits"]
    transactional = commits.where(F.col("txn_state").isNotNull() & _micros("record_at").between(*spans[1]))
    last_transactional = transactional.agg(F.max(_micros("record_at"))).first()[0]
    # The second cut follows the transactions capture's last transactional commit: all are pending that night.
    cut_1, cut_2, cut_3, cut_4 = within(0, 0.6), last_transactional, within(2, 0.5), spans[-1][1]
    held_snapshot = sorted(
        row[0] for row in lab[END_OFFSETS].where(_micros("observed_at") < F.lit(cut_1))
        .select(_micros("observed_at")).distinct().collect()
    )[1]  # fmt: skip
    is_late = (F.col("group_id") == F.lit(LATE_GROUP)) & (_micros("record_at") > F.lit(cut_1))
    is_forgotten = (F.col("group_id") == F.lit(FORGOTTEN_GROUP)) & (_micros("record_at") <= F.lit(cut_1))
    cooperative_span = (
        commits.where(F.col("group_id") == F.lit("cooperative-sticky/cooperative-sticky"))
        .agg(F.min(_micros("record_at")), F.max(_micros("record_at"))).first()
    )  # fmt: skip
    amid_cooperative = sorted(
        row[0] for row in lab[END_OFFSETS]
        .where((F.col("topic") == F.lit(EARLY_TOPIC)) & _micros("observed_at").between(*cooperative_span))
        .select(_micros("observed_at")).distinct().collect()
    )  # fmt: skip
    is_early_snapshot = (F.col("topic") == F.lit(EARLY_TOPIC)) & (
        _micros("observed_at") == F.lit(amid_cooperative[len(amid_cooperative) // 2])
    )
    first_pending = F.col("txn_state").isNotNull() & _micros("record_at").between(cut_1 + 1, cut_2)
    day_after = [FIRST_DAY + timedelta(days=day + 1) for day in range(len(SCENARIOS))]
    plan = [
        # (commit cut, snapshot cut, pending, late held back, late snapshot held back, early snapshot held
        #  back, forgotten, run date)
        (cut_1, cut_1, False, True, True, True, False, day_after[0]),
        (cut_2, cut_2, True, True, True, True, False, day_after[1]),  # transactional commits appended pending
        (cut_2, cut_3, False, True, True, True, False, day_after[1]),  # new snapshots only; transactions resolved
        (cut_2, cut_3, False, True, True, True, False, day_after[1]),  # nothing new: the same night again
        (cut_4, cut_4, False, False, False, True, True, day_after[4]),  # late commits and snapshot; rows deleted
        (cut_4, cut_4, False, False, False, False, True, day_after[4] + timedelta(days=3)),  # time; early snapshot
    ]
    nights = []
    for commit_cut, snapshot_cut, pending, late, late_snapshot, early, forgotten, run_date in plan:
        rows = commits.where(_micros("record_at") <= F.lit(commit_cut))
        if late:
            rows = rows.where(~is_late)
        if forgotten:
            rows = rows.where(~is_forgotten)
        if pending:
            rows = rows.withColumn("txn_state", F.when(first_pending, F.lit("pending")).otherwise(F.col("txn_state")))
        snapshots = lab[END_OFFSETS].where(_micros("observed_at") <= F.lit(snapshot_cut))
        if late_snapshot:
            snapshots = snapshots.where(_micros("observed_at") != F.lit(held_snapshot))
        if early:
            snapshots = snapshots.where(~is_early_snapshot)
        history = {name: lab[name].where(_micros("record_at") <= F.lit(commit_cut)) for name in HISTORY_SILVER}
        nights.append(
            {"offset_commits": rows, END_OFFSETS: snapshots, **history, "run_date": run_date, "cut": commit_cut}
        )
    return nights


def apply_changes(spark, config, night: dict, history_changed: bool) -> set[str]:
    """Silver and ops as the decode and end_offsets steps leave them: new rows appended, transactions
    resolved by an UPDATE of txn_state, forgotten rows deleted; gold history rebuilt over the same cut."""
    name = config.table("offset_commits")
    current = spark.table(name)
    target = night["offset_commits"]
    _append(spark, name, target.join(current.select("record_id"), on="record_id", how="left_anti"))
    resolved = (
        target.alias("t").join(current.alias("c"), on="record_id")
        .where(~F.col("t.txn_state").eqNullSafe(F.col("c.txn_state")))
        .select("record_id", F.col("t.txn_state").alias("txn_state")).collect()
    )  # fmt: skip
    for state in {row.txn_state for row in resolved}:
        ids = [row.record_id for row in resolved if row.txn_state == state]
        DeltaTable.forName(spark, name).update(F.col("record_id").isin(ids), {"txn_state": F.lit(state)})
    gone = [
        row.record_id for row in current.join(target, on="record_id", how="left_anti").select("record_id").collect()
    ]
    if gone:
        DeltaTable.forName(spark, name).delete(F.col("record_id").isin(gone))
    snapshots = spark.table(config.table(END_OFFSETS))
    night[END_OFFSETS].join(
        snapshots, on=["cluster", "topic", "partition", "observed_at"], how="left_anti"
    ).write.format("delta").mode("append").saveAsTable(config.table(END_OFFSETS))
    states = {row.txn_state for row in resolved}
    if not history_changed and not resolved and not gone:
        return states
    silver_now = {"offset_commits": spark.table(name), **{key: night[key] for key in HISTORY_SILVER}}

    def store(table: str, rows: DataFrame) -> DataFrame:
        kept = materialized(gold_rows(table, rows))
        if table in ("generations", "rebalances"):
            ensure_table(  # the feed on, as the history step makes them
                spark, config.table(table), gold.GOLD_SCHEMAS[table], partition_by=("cluster",), change_feed=True
            )
            replace_cluster_rows(spark, config.table(table), kept, CLUSTER)
        return kept

    no_topic_ids = spark.createDataFrame([], ops.topic_ids_schema)
    for name, rows in history_from_scratch(silver_now, no_topic_ids, config.gold_settings()).items():
        store(name, rows)
    return states


def _append(spark, table: str, rows: DataFrame) -> None:
    rows.write.format("delta").mode("append").save(table_location(spark, table))


def run_metrics(spark, config) -> dict[str, int]:
    with JobRun(spark, config, "metrics") as run:
        metrics(spark, config, run)
    assert run.exit_code == 0, "the metrics run failed; see its job_runs row"
    return run.counts


def tables_of(spark, config) -> dict[str, list[str]]:
    return {name: table_rows(spark, _location(spark, config, name)) for name in (*METRICS_TABLES, CARRY)}


def _location(spark, config, name):
    return DeltaTable.forName(spark, config.table(name)).detail().first()["location"]


def _config(spark_config, database: str, **changes):
    return replace(
        spark_config, database=database, cluster=CLUSTER, sections={**spark_config.sections, "gold": GOLD}, **changes
    )


@pytest.fixture(scope="module")
def nights(spark, spark_config, lab):
    """Runs every night; per night: the run's counts and its tables."""
    tables, spans = lab
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    config = _config(spark_config, DATABASE)
    ensure_table(
        spark, config.table("offset_commits"), SILVER_SCHEMAS["offset_commits"], partition_by=("cluster",),
        change_feed=True,
    )  # fmt: skip
    ensure_table(spark, config.table(END_OFFSETS), ops.end_offsets_schema, partition_by=("cluster",), change_feed=True)
    results, cuts = [], []
    for night in nights_inputs(tables, spans):
        night_config = replace(config, run_date=night["run_date"])
        resolved = apply_changes(spark, night_config, night, history_changed=night["cut"] not in cuts[-1:])
        cuts.append(night["cut"])
        before = last_execution_id(spark)
        counts = run_metrics(spark, night_config)
        files = {
            "offset_commits files read": files_read_since(spark, before).get("offset_commits", []),
            "offset_commits files": spark.sql(f"DESCRIBE DETAIL {config.table('offset_commits')}").first()["numFiles"],
        }
        pending = spark.table(config.table("offset_commits")).where(F.col("txn_state") == F.lit("pending")).count()
        results.append(({**counts, **files, "resolved": resolved, "pending": pending}, tables_of(spark, night_config)))
    return night_config, results


@pytest.fixture(scope="module")
def from_scratch(spark, spark_config, nights):
    """One run from scratch over the final inputs, in a database of its own."""
    final_config, _ = nights
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {FULL_DATABASE}")
    config = _config(spark_config, FULL_DATABASE, run_date=final_config.run_date, full=True)
    for name, schema in (
        ("offset_commits", SILVER_SCHEMAS["offset_commits"]),
        (END_OFFSETS, ops.end_offsets_schema),
        ("generations", gold.generations_schema),
        ("rebalances", gold.rebalances_schema),
    ):
        ensure_table(spark, config.table(name), schema, partition_by=("cluster",))
        _append(spark, config.table(name), spark.table(final_config.table(name)))
    run_metrics(spark, config)
    return tables_of(spark, config)


def test_every_night_after_the_first_continues_from_the_tables(spark, nights):
    config, results = nights
    assert "metrics_group_partitions_continued" not in results[0][0]  # the first night: from scratch
    for counts, _ in results[1:]:
        assert "metrics_group_partitions_continued" in counts
    assert covered_versions(spark, config.table("group_daily"), "metrics", CLUSTER) is not None


def test_the_same_night_twice_evaluates_nothing_again_and_changes_nothing(nights):
    _, results = nights
    counts = results[3][0]
    assert counts["metrics_group_partitions_continued"] + counts["metrics_group_partitions_whole"] == 0
    assert results[3][1] == results[2][1]


def test_a_night_of_new_snapshots_reads_only_the_commit_files_they_reach(nights):
    """offset_commits is written by partition, then time, so Delta skips the earlier nights' files before what
    a night evaluates again (issue 16 §5: the plans prune); a night with nothing new reads none."""
    _, results = nights
    new_snapshots, nothing_new = results[2][0], results[3][0]
    assert new_snapshots["offset_commits files"] >= 3
    assert new_snapshots["offset_commits files read"], "the night evaluates commits: it reads some"
    assert max(new_snapshots["offset_commits files read"]) < new_snapshots["offset_commits files"]
    assert nothing_new["offset_commits files read"] == []


def test_transactions_appended_pending_are_resolved_committed_and_aborted_the_next_night(nights):
    _, results = nights
    assert results[1][0]["pending"] > 0
    assert results[2][0]["resolved"] >= {"committed", "aborted"}


def test_new_snapshots_continue_and_late_data_rebuilds_group_partitions_whole(nights):
    _, results = nights
    assert results[2][0]["metrics_group_partitions_continued"] > 0  # new snapshots, transactions resolved
    # Late commits and a snapshot, deleted rows: every carry there holds all its group partition's records.
    assert results[4][0]["metrics_group_partitions_whole"] == 0
    assert results[4][0]["metrics_group_partitions_continued"] > 0
    assert results[5][0]["metrics_group_partitions_whole"] > 0  # a snapshot before what a carry answers for


def test_after_the_nights_a_group_partition_that_had_a_tombstone_carries_all_its_records(spark, nights):
    """The lab's tombstones each follow a few commits, fewer than the carry keeps before one, so each such
    group partition is carried whole (tests/spark/test_metrics_carry.py has the rules)."""
    config, _ = nights
    visible = filter_invisible_offset_records(spark.table(config.table("offset_commits")))
    tombstoned = visible.where("is_tombstone").select(*OFFSET_KEY).distinct()
    per_key = F.count(F.lit(1)).alias("records")
    held = visible.join(tombstoned, on=list(OFFSET_KEY), how="left_semi").groupBy(*OFFSET_KEY).agg(per_key)
    carried = spark.table(config.table(CARRY)).join(tombstoned, on=list(OFFSET_KEY), how="left_semi")
    assert tombstoned.count() > 0
    assert sorted(carried.groupBy(*OFFSET_KEY).agg(per_key).collect()) == sorted(held.collect())


def test_a_time_lag_left_uncertain_by_the_snapshots_read_reads_its_partitions_again(nights):
    """Groups of earlier days stay on the shared topics with old commits: a day's lookback has no snapshot
    at or below their committed offsets, so their topic partitions are evaluated again from all of them
    (and the tables still equal a run from scratch, below)."""
    _, results = nights
    assert max(counts.get("metrics_topic_partitions_read_again", 0) for counts, _ in results[1:]) > 0


def test_time_alone_adds_days_to_every_group(nights):
    _, results = nights
    assert results[5][0]["metrics_groups_rebuilt"] > 0
    assert len(results[5][1]["group_daily"]) > len(results[4][1]["group_daily"])


@pytest.mark.parametrize("table", [*METRICS_TABLES, CARRY])
def test_nights_equal_one_run_from_scratch_over_the_final_inputs(nights, from_scratch, table):
    _, results = nights
    assert from_scratch[table], f"{table} is empty: the comparison would prove nothing"
    assert results[-1][1][table] == from_scratch[table]
