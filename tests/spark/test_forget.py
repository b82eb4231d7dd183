"""forget: a mistaken input undone leaves every table as a run that never saw it would have."""

from __future__ import annotations

import json
import random
from dataclasses import replace

from pyspark.sql import functions as F

from jobs.runs import JOB_RUNS, JobRun
from jobs.steps.forget import forget
from jobs.steps.nightly import nightly
from jobs.tables import database_tables
from tests.conftest import REPO_ROOT
from tests.delta_compare import table_rows

QUICKSTART = REPO_ROOT / "tests" / "captures" / "kafka-4.2.1" / "quickstart"
CLUSTER = "forgetful"
FORGOTTEN_PARTITION = "__consumer_offsets-38"  # holds the static group alone
FORGOTTEN_GROUP = "static"


def run_step(spark, config, job, step) -> dict:
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {config.database}")
    with JobRun(spark, config, job) as run:
        step(spark, config, run)
    (row,) = spark.table(config.table(JOB_RUNS)).where(F.col("run_id") == run.run_id).collect()
    assert row.outcome == "succeeded", row.message
    return json.loads(row.counts_json)


def raw_count(spark, config) -> int:
    return spark.table(config.table("raw_records")).where(F.col("cluster") == F.lit(CLUSTER)).count()


def tables(spark, database: str) -> dict[str, list[str]]:
    """Every Delta table of the database but job_runs, row by row (capture run ids left out)."""
    names = database_tables(spark, database)
    location = spark.catalog.getDatabase(database).locationUri.removeprefix("file:")
    return {name: table_rows(spark, f"{location}/{name}") for name in names if name != JOB_RUNS}


def test_forgetting_a_junk_file_and_a_real_segment_leaves_the_tables_of_a_run_that_never_read_them(
    spark, spark_config, tmp_path
):
    junk = tmp_path / "mistake" / "00000000000000000000.log"
    junk.parent.mkdir()
    junk.write_bytes(random.Random(20).randbytes(3000))
    # A real input read by mistake: the static group's whole log (its generations, rebalances, commits, lag).
    mistaken_partition = QUICKSTART / "segments" / FORGOTTEN_PARTITION
    (segment,) = mistaken_partition.glob("*.log")
    kept = tuple(str(path) for path in sorted((QUICKSTART / "segments").iterdir()) if path != mistaken_partition)
    sections = {**spark_config.sections, "end_offsets": {"files": [str(QUICKSTART / "end_offsets.json")]}}
    never_read = replace(spark_config, cluster=CLUSTER, database="forget_never", sections=sections, segment_paths=kept)
    mistaken = replace(never_read, database="forget_undone", segment_paths=(*kept, str(mistaken_partition), str(junk)))

    run_step(spark, never_read, "nightly", nightly)
    counts = run_step(spark, mistaken, "nightly", nightly)
    assert counts["quarantine"] > 0, "the junk file's bytes are quarantined"
    mistaken_groups = spark.table(mistaken.table("generations")).select("group_id").distinct().collect()
    assert FORGOTTEN_GROUP in {row.group_id for row in mistaken_groups}, "the mistaken segment made history"

    raw_before_forget = raw_count(spark, mistaken)

    def forget_both(s, c, r):
        forget(s, c, r, source_files=(str(junk), str(segment)), capture_runs=())

    forgotten = run_step(spark, mistaken, "forget", forget_both)

    # Every raw record the never-read run lacks, the junk's fragments and the segment's records alike.
    assert forgotten["raw_records_forgotten"] == raw_before_forget - raw_count(spark, never_read) > counts["quarantine"]
    never, undone = tables(spark, "forget_never"), tables(spark, "forget_undone")
    assert sorted(never) == sorted(undone) and len(never) > 15
    differing = {
        name: {"never read": sorted(set(never[name]) - set(rows)), "forgotten": sorted(set(rows) - set(never[name]))}
        for name, rows in undone.items()
        if rows != never[name]
    }
    assert differing == {}

    # Again (a rerun after a kill finds nothing to delete and completes the rest): still equal.
    again = run_step(spark, mistaken, "forget", forget_both)
    assert again["raw_records_forgotten"] == 0
    assert tables(spark, "forget_undone") == never
