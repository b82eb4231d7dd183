"""Nights of real logs: every table after a series of nightlies equals one from-scratch run (`--full`).

Three real lab captures (Kafka 4.2.1; partitions 28, 37 and 27 of one cluster) are cut as the broker's
logs stood at several moments (tests/log_cuts.py) and written night after night into the same paths,
so each nightly meets files it read before, grown. The cuts are found from the bytes:

  night 1  a transaction's offset commits without their COMMIT marker (transactions); a cooperative
           rebalance's revoking round without its assigning round (cooperative-sticky); a KIP-848
           partition targeted to a member that does not own it yet (kip848-handover)
  night 2  nothing new: the same bytes and snapshots again
  night 3  the marker arrives and the next transaction is cut before its ABORT; the next cooperative
           rebalance is cut between its rounds; the next handover too. Partition 37's segment rolled
           right after night 1's assigning round and the older file is gone: the live path lost that
           round. A backup of partition 27 as it stood on night 1 comes as a second --segments path
           (nothing new in it)
  night 4  the whole captures, and a late backup of partition 37's older file, holding the round the
           live path lost (older than everything the group's history already covers)

Then one nightly with `--full` on a database of its own over night 4's inputs: every Delta table must
hold the same rows (tests/delta_compare.py: run ids and job_runs left out, nothing else). Each night's
job_runs row must say how many raw records it decoded: the records that night added (issue 16).
Finally raw retention deletes the oldest raw records, the log has lost them too, and one more night
must leave every silver and gold row as it was.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from jobs.file_states import FILE_STATES, file_states, states_computed_at
from jobs.raw_changes import (
    LANDING_TABLES,
    RETIRED_ID_SUM,
    RETIRED_RECORDS,
    retire,
    retired_rows,
    retired_so_far,
)
from jobs.runs import JOB_RUNS, InvariantViolation, JobRun
from jobs.segment_files import read_paths
from jobs.steps.decode import DECODE
from jobs.steps.nightly import SUMMARY_TABLES, nightly, summary
from jobs.tables import HISTORY_TABLES, METRICS_TABLES, RAW_RECORDS, held_frames
from jobs.watermarks import covered_versions, current_version
from tests import log_cuts
from tests.conftest import REPO_ROOT
from tests.delta_compare import RUN_COLUMNS, canonical, delta_tables, table_rows
from transforms.gold.offsets import filter_invisible_offset_records

CAPTURES = REPO_ROOT / "tests" / "captures" / "kafka-4.2.1"
TRANSACTIONS, COOPERATIVE, HANDOVER = (CAPTURES / name for name in ("transactions", "cooperative-sticky",
                                                                      "kip848-handover"))  # fmt: skip
CLUSTER = "nights"
NIGHTS_DATABASE, FULL_DATABASE = "groupscope_nights", "groupscope_nights_full"
SILVER_AND_GOLD = ("offset_commits", "group_metadata", "group_members", "member_assignments",
                   "consumer_group_records", "quarantine", *HISTORY_TABLES, *METRICS_TABLES)  # fmt: skip


@dataclass(frozen=True)
class Night:
    name: str
    cuts: tuple[log_cuts.Cut, ...]
    backups: tuple[Path, ...] = ()  # extra --segments directories, given from this night on


@dataclass(frozen=True)
class NightRun:
    night: Night
    segment_paths: tuple[str, ...]
    added: int  # records in this night's inputs that no earlier night's inputs held
    counts: dict  # the run's job_runs.counts_json
    printed: str  # what it printed: the summary


def nights_of_the_captures(work: Path) -> list[Night]:
    """The nights above, their cuts found from the captures' bytes."""
    transactions = log_cuts.before_transaction_markers(TRANSACTIONS)
    cooperative = log_cuts.between_cooperative_rounds(COOPERATIVE)
    handovers = sorted(log_cuts.inside_kip848_handovers(HANDOVER), key=lambda cut: cut.moment_ms)
    assert len(transactions) >= 2 and len(cooperative) >= 2 and len(handovers) >= 2
    first = (transactions[0], cooperative[0], handovers[0])
    # The assigning round of night 1's cooperative rebalance is the batch right after its cut: the segment
    # rolls after it, and the file holding it is lost before night 3 reads the log.
    (segment, split), batches = next(iter(cooperative[0].kept.items())), log_cuts.capture_batches(COOPERATIVE)
    roll = next(batch.end for batch in batches[segment] if batch.position == split)
    assert roll < cooperative[1].kept[segment], "the lost round must lie between nights 1 and 3"
    rolled = {"rolled_at": {segment: roll}, "lost": frozenset({segment})}
    cooperative_later = replace(cooperative[1], **rolled)
    cooperative_whole = replace(log_cuts.whole(COOPERATIVE), **rolled)
    early_handover = log_cuts.write_backup(handovers[0], work / "backup-handover-night-1")
    lost_round = log_cuts.write_backup(replace(cooperative[0], kept={segment: roll}), work / "backup-rolled-segment")
    return [
        Night("1: split transaction, rebalance and handover", first),
        Night("2: nothing new", first),
        Night(
            "3: markers, a lost round, an old backup",
            (transactions[1], cooperative_later, handovers[1]),
            (early_handover,),
        ),
        Night(
            "4: the whole logs, a late backup",
            (log_cuts.whole(TRANSACTIONS), cooperative_whole, log_cuts.whole(HANDOVER)),
            (early_handover, lost_round),
        ),
    ]


def night_config(spark_config, database: str, segment_paths, offsets_dir: Path, full: bool = False):
    sections = {**spark_config.sections, "end_offsets": {**spark_config.section("end_offsets"),
                                                         "files": [str(offsets_dir)]}}  # fmt: skip
    return replace(spark_config, database=database, cluster=CLUSTER, segment_paths=tuple(map(str, segment_paths)),
                   full=full, sections=sections)  # fmt: skip


def run_nightly(spark, config) -> tuple[dict, str]:
    """One nightly in this session, as `spark-submit.sh nightly` runs it; its job_runs counts and what it printed."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {config.database}")
    held_before = set(held_frames(spark))
    with JobRun(spark, config, "nightly") as run, contextlib.redirect_stdout(io.StringIO()) as printed:
        nightly(spark, config, run)
    # Each step releases the frames it held: a later step's sorts get the heap (jobs.tables.releasing_held).
    assert set(held_frames(spark)) <= held_before, "a nightly left frames held"
    (row,) = spark.table(config.table(JOB_RUNS)).where(F.col("run_id") == run.run_id).collect()
    assert row.outcome == "succeeded", row.message
    return json.loads(row.counts_json), printed.getvalue()


def record_positions(paths) -> set[tuple[int, int]]:
    return {(record.partition, record.offset) for record in read_paths(list(paths)) if record.error is None}


def database_tables(spark, database: str) -> dict[str, Path]:
    """The database's Delta tables (tests/delta_compare.py: job_runs left out)."""
    location = Path(spark.catalog.getDatabase(database).locationUri.removeprefix("file:"))
    return delta_tables(location.parent, database)


@pytest.fixture(scope="module")
def nights(spark, spark_config, tmp_path_factory) -> list[NightRun]:
    work = tmp_path_factory.mktemp("nights")
    live, offsets = work / "live", work / "end_offsets"
    runs, seen = [], set()
    for night in nights_of_the_captures(work):
        log_cuts.write_night(night.cuts, live, offsets)
        paths = (live, *night.backups)
        positions = record_positions(paths)
        counts, printed = run_nightly(spark, night_config(spark_config, NIGHTS_DATABASE, paths, offsets))
        runs.append(NightRun(night, tuple(map(str, paths)), len(positions - seen), counts, printed))
        seen |= positions
    return runs


@pytest.fixture(scope="module")
def full_run(spark, spark_config, nights, tmp_path_factory) -> dict:
    """One from-scratch run over the last night's inputs (its files as they are now), on a database of its own."""
    offsets = Path(nights[-1].segment_paths[0]).parent / "end_offsets"
    config = night_config(spark_config, FULL_DATABASE, nights[-1].segment_paths, offsets, full=True)
    return run_nightly(spark, config)[0]


def test_after_any_nights_every_table_equals_one_full_run(spark, nights, full_run):
    nights_tables, full_tables = (database_tables(spark, name) for name in (NIGHTS_DATABASE, FULL_DATABASE))
    assert sorted(nights_tables) == sorted(full_tables)
    # ingest_file_states holds what raw_records holds of each file: which file's copy of a record read
    # from a backup and the live path was kept (see compared_rows) decides which file it counts for.
    # Its own proof is that it equals the states computed from raw_records' rows (below).
    differences = [
        difference(name, compared_rows(spark, nights_tables[name]), compared_rows(spark, full_tables[name]))
        for name in sorted(full_tables)
        if name != FILE_STATES
    ]
    assert [found for found in differences if found] == []


def test_the_file_states_carried_over_the_nights_are_those_of_raw_records(spark, spark_config, nights):
    config = night_config(spark_config, NIGHTS_DATABASE, nights[-1].segment_paths, Path("unused"))
    noted = file_states(spark, config)
    assert noted.computed == 0, noted.how
    assert noted.states == states_computed_at(spark, config, current_version(spark, config.table(RAW_RECORDS)))


def test_the_summary_counts_the_groups_with_visible_offset_records(spark, spark_config, nights):
    """Read from the metrics carry, not from every commit: the same groups."""
    config = night_config(spark_config, NIGHTS_DATABASE, nights[-1].segment_paths, Path("unused"))
    printed = summary(spark, config, nights[-1].counts, datetime.now(UTC))
    (shown,) = re.findall(r"groups with commits +([\d,]+)", printed)
    commits = spark.table(config.table("offset_commits")).where(F.col("cluster") == F.lit(CLUSTER))
    visible = filter_invisible_offset_records(commits).select("group_id").distinct().count()
    assert int(shown.replace(",", "")) == visible > 0


def summary_tables(printed: str) -> dict[str, tuple[int, int]]:
    """The summary's table lines: each table's rows and what the night wrote to it."""
    lines = re.findall(r"^  (\w+) +([\d,]+) +([\d,]+)$", printed, flags=re.MULTILINE)
    return {name: (int(rows.replace(",", "")), int(written.replace(",", ""))) for name, rows, written in lines}


def test_the_summary_shows_what_each_table_holds_and_what_the_night_wrote(nights):
    """Night 2 brought nothing: every table holds what it held after night 1, and the night wrote nothing."""
    first, nothing_new = (summary_tables(run.printed) for run in nights[:2])
    assert sorted(first) == sorted((RAW_RECORDS, *SUMMARY_TABLES))
    assert first["raw_records"][0] == nights[0].counts["raw_records"]
    assert first["generations"][0] == first["generations"][1] > 0  # night 1 wrote every row
    assert nothing_new == {name: (rows, 0) for name, (rows, _) in first.items()}


def compared_rows(spark, path: Path) -> list[str]:
    """A table's rows as tests/delta_compare.py gives them; raw_records also without `source_file`: a record
    read from both a backup and the live path is one record, and which file's copy a run kept (the first it
    read, night after night; either, in one run over both) names where it was read, not what it holds."""
    if path.name != RAW_RECORDS:
        return table_rows(spark, path)
    rows = spark.read.format("delta").load(str(path)).drop(*RUN_COLUMNS, "source_file").collect()
    return sorted(repr(canonical(row)) for row in rows)


def difference(name: str, nights_rows: list[str], full_rows: list[str], shown: int = 3) -> str:
    """What differs, for the failure message: counts, and a few rows found on one side only."""
    only_nights, only_full = sorted(set(nights_rows) - set(full_rows)), sorted(set(full_rows) - set(nights_rows))
    if nights_rows == full_rows:
        return ""
    lines = [f"{name}: {len(nights_rows)} rows after the nights, {len(full_rows)} after one full run"]
    lines += [f"  only after the nights: {row[:600]}" for row in only_nights[:shown]]
    lines += [f"  only after the full run: {row[:600]}" for row in only_full[:shown]]
    return "\n".join(lines)


def test_each_night_decodes_the_records_it_added_and_no_more(nights):
    decoded = [(run.night.name, run.counts.get("records_decoded")) for run in nights]
    assert decoded == [(run.night.name, run.added) for run in nights]


@pytest.fixture(scope="module")
def after_retention(spark, spark_config, nights, full_run) -> tuple[dict, dict, int]:
    """Silver and gold before and after raw retention deleted the raw records older than night 1 and a
    night ran on a log that has lost them too (the cleaner removed every segment; the backups are gone)."""
    before = {name: table_rows(spark, path) for name, path in silver_and_gold(spark).items()}
    cutoff_ms = max(cut.moment_ms for cut in nights[0].night.cuts)
    live = Path(nights[-1].segment_paths[0])
    offsets = live.parent / "end_offsets"
    config = night_config(spark_config, NIGHTS_DATABASE, (live,), offsets)
    raw_count = spark.table(f"{NIGHTS_DATABASE}.{RAW_RECORDS}").where(F.col("cluster") == CLUSTER).count()
    # What maintenance.raw_retention_days does, with a cutoff these hours-old records can reach.
    deleted = retire(spark, config, F.col("record_at") < F.timestamp_millis(F.lit(cutoff_ms)))
    assert 0 < deleted < raw_count
    for segment in live.glob("__consumer_offsets-*/*.log"):
        segment.unlink()
    counts, _ = run_nightly(spark, config)
    after = {name: table_rows(spark, path) for name, path in silver_and_gold(spark).items()}
    return before, after, counts


def silver_and_gold(spark) -> dict[str, Path]:
    return {name: path for name, path in database_tables(spark, NIGHTS_DATABASE).items() if name in SILVER_AND_GOLD}


def test_history_outlives_raw_retention(after_retention):
    before, after, _ = after_retention
    assert sorted(before) == sorted(SILVER_AND_GOLD)
    assert lost_rows(before, after) == {}
    assert after == before


def lost_rows(before: dict, after: dict) -> dict[str, int]:
    lost = {name: len(set(rows) - set(after[name])) for name, rows in before.items()}
    return {name: count for name, count in lost.items() if count}


@pytest.fixture(scope="module")
def after_vacuum(spark, spark_config, nights, after_retention) -> tuple[dict, dict, dict, int]:
    """Retention deletes more, then the weekly maintenance compacts raw_records and vacuums (at a retention
    of no hours, so that the next nightly meets what one a week late meets): decode's change feed no longer
    reaches its last run, and it decodes every raw record again."""
    _, before, _ = after_retention
    live = Path(nights[-1].segment_paths[0])
    config = night_config(spark_config, NIGHTS_DATABASE, (live,), live.parent / "end_offsets")
    cutoff_ms = max(cut.moment_ms for cut in nights[2].night.cuts)
    assert retire(spark, config, F.col("record_at") < F.timestamp_millis(F.lit(cutoff_ms))) > 0
    raw = DeltaTable.forName(spark, config.table(RAW_RECORDS))
    raw.optimize().executeCompaction()
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", "8")  # as maintenance lists
    try:
        raw.vacuum(0)
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
        spark.conf.unset("spark.sql.sources.parallelPartitionDiscovery.parallelism")
    raw_count = spark.table(config.table(RAW_RECORDS)).where(F.col("cluster") == CLUSTER).count()
    counts, _ = run_nightly(spark, config)
    after = {name: table_rows(spark, path) for name, path in silver_and_gold(spark).items()}
    return before, after, counts, raw_count


def test_a_night_whose_raw_changes_were_vacuumed_keeps_what_retention_deleted(after_vacuum):
    before, after, counts, raw_count = after_vacuum
    assert counts["records_decoded"] == raw_count  # every raw record decoded again, not the night's none
    assert lost_rows(before, after) == {}
    assert after == before


def test_silver_keeps_only_the_records_retention_deleted(spark, spark_config, nights, after_vacuum):
    """What silver keeps when decoding raw again must be exactly what retention's commits say it deleted: a
    record raw lost otherwise (a forget whose decode never ran) stops the run instead of staying in silver."""
    live = Path(nights[-1].segment_paths[0])
    config = night_config(spark_config, NIGHTS_DATABASE, (live,), live.parent / "end_offsets")
    noted = covered_versions(spark, config.table("offset_commits"), DECODE, CLUSTER)
    baseline = {key: noted.get(key, 0) for key in (RETIRED_RECORDS, RETIRED_ID_SUM)}
    raw = spark.table(config.table(RAW_RECORDS)).where(F.col("cluster") == CLUSTER)
    kept = retired_rows(spark, config, raw, baseline, LANDING_TABLES)
    retired = retired_so_far(spark, config)[RETIRED_RECORDS] - baseline[RETIRED_RECORDS]
    assert kept is not None and sum(kept[name].count() for name in LANDING_TABLES) == retired > 0
    still_held = raw.select("record_id").first()["record_id"]
    with pytest.raises(InvariantViolation, match="a forget whose decode never ran"):
        retired_rows(spark, config, raw.where(F.col("record_id") != still_held), baseline, LANDING_TABLES)
