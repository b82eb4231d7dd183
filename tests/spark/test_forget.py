"""forget: a mistaken input undone leaves every table as a run that never saw it would have."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from functools import partial

from pyspark.sql import functions as F

from jobs.runs import JOB_RUNS, JobRun
from jobs.steps.forget import forget, forgotten
from jobs.steps.nightly import nightly
from jobs.tables import database_tables
from tests.conftest import REPO_ROOT
from tests.delta_compare import table_rows

QUICKSTART = REPO_ROOT / "tests" / "captures" / "kafka-4.2.1" / "quickstart"
CLUSTER = "forgetful"
FORGOTTEN_PARTITION = "__consumer_offsets-38"  # holds the static group alone
FORGOTTEN_GROUP = "static"


def run_step(spark, config, job, step) -> tuple[dict, str]:
    """(the run's counts, its run id)."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {config.database}")
    with JobRun(spark, config, job) as run:
        step(spark, config, run)
    (row,) = spark.table(config.table(JOB_RUNS)).where(F.col("run_id") == run.run_id).collect()
    assert row.outcome == "succeeded", row.message
    return json.loads(row.counts_json), run.run_id


def raw_count(spark, config) -> int:
    return spark.table(config.table("raw_records")).where(F.col("cluster") == F.lit(CLUSTER)).count()


def tables(spark, database: str) -> dict[str, list[str]]:
    """Every Delta table of the database but job_runs, row by row (capture run ids left out)."""
    names = database_tables(spark, database)
    location = spark.catalog.getDatabase(database).locationUri.removeprefix("file:")
    return {name: table_rows(spark, f"{location}/{name}") for name in names if name != JOB_RUNS}


def test_forgetting_a_junk_file_and_a_capture_run_leaves_the_tables_of_a_run_that_never_read_them(
    spark, spark_config, tmp_path, capsys
):
    junk = tmp_path / "mistake" / "00000000000000000000.log"
    junk.parent.mkdir()
    junk.write_bytes(random.Random(20).randbytes(3000))
    # A real input read by mistake: the static group's whole log (its generations, rebalances, commits, lag).
    mistaken_partition = QUICKSTART / "segments" / FORGOTTEN_PARTITION
    (segment,) = mistaken_partition.glob("*.log")
    kept = tuple(str(path) for path in sorted((QUICKSTART / "segments").iterdir()) if path != mistaken_partition)
    sections = {**spark_config.sections, "end_offsets": {"files": [str(QUICKSTART / "end_offsets.json")]}}
    first_night = replace(
        spark_config, cluster=CLUSTER, database="forget_undone", sections=sections, segment_paths=kept
    )
    mistaken = replace(first_night, segment_paths=(*kept, str(mistaken_partition), str(junk)))

    run_step(spark, first_night, "nightly", nightly)
    assert "  quarantined " not in capsys.readouterr().out
    # The tables of a run that never read the mistakes: the first night's, before the mistaken one.
    never, never_raw = tables(spark, "forget_undone"), raw_count(spark, first_night)
    counts, mistaken_run = run_step(spark, mistaken, "nightly", nightly)
    assert counts["quarantine"] > 0, "the junk file's bytes are quarantined"
    # The summary says how many, from which file, and the query that shows why.
    (quarantined,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  quarantined ")]
    assert quarantined.startswith(
        f"  quarantined {counts['quarantine']:,} record(s): {counts['quarantine']:,} in {junk}; why: ./spark-sql.sh"
    )
    assert quarantined.endswith(
        """ -e 'SELECT source_file, source_offset, stage, reason FROM forget_undone.quarantine"""
        """ WHERE cluster = "forgetful" ORDER BY source_file, source_offset'"""
    )
    mistaken_groups = spark.table(mistaken.table("generations")).select("group_id").distinct().collect()
    assert FORGOTTEN_GROUP in {row.group_id for row in mistaken_groups}, "the mistaken segment made history"
    mistaken_records = raw_count(spark, mistaken) - never_raw

    # The junk named by its file, and everything the mistaken night read named by that run's id (the junk
    # and the segment): each names its records, and one forget removes both.
    raw = spark.table(mistaken.table("raw_records")).where(F.col("cluster") == F.lit(CLUSTER))
    assert raw.where(forgotten((str(junk),), ())).count() == counts["quarantine"]
    assert raw.where(forgotten((), (mistaken_run,))).count() == mistaken_records > counts["quarantine"]
    both, _ = run_step(
        spark, mistaken, "forget", partial(forget, source_files=(str(junk),), capture_runs=(mistaken_run,))
    )

    assert both["raw_records_forgotten"] == mistaken_records
    assert_same_tables(never, tables(spark, "forget_undone"))

    # Again (a rerun after a kill finds nothing to delete and completes the rest): still equal.
    again, _ = run_step(
        spark, mistaken, "forget", partial(forget, source_files=(str(junk), str(segment)), capture_runs=(mistaken_run,))
    )
    assert again["raw_records_forgotten"] == 0
    assert_same_tables(never, tables(spark, "forget_undone"))

    # Names never read (a typo; the directory given to --segments, not its files) change nothing and exit 2.
    never_read = (str(tmp_path / "typo.log"), str(mistaken_partition))
    with JobRun(spark, mistaken, "forget") as refused:
        forget(spark, mistaken, refused, source_files=never_read, capture_runs=())
    (row,) = spark.table(mistaken.table(JOB_RUNS)).where(F.col("run_id") == refused.run_id).collect()
    assert (refused.exit_code, row.outcome) == (2, "refused")
    assert row.message.startswith(f"no raw record of cluster '{CLUSTER}' came from {', '.join(never_read)}, ")
    assert "\n" not in row.message and raw_count(spark, mistaken) == never_raw


def assert_same_tables(never: dict[str, list[str]], undone: dict[str, list[str]]) -> None:
    assert sorted(never) == sorted(undone) and len(never) > 15
    differing = {
        name: {"never read": sorted(set(never[name]) - set(rows)), "forgotten": sorted(set(rows) - set(never[name]))}
        for name, rows in undone.items()
        if rows != never[name]
    }
    assert differing == {}
