"""Forget: remove one input's raw records and everything derived from them, then bring the derived
tables up to date, as if that input had never been read."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.config import Config
from jobs.delta_tables import DeltaTable
from jobs.file_states import file_states
from jobs.runs import JobRun
from jobs.segment_files import as_source_file
from jobs.steps.decode import decode
from jobs.steps.history import history
from jobs.steps.metrics import metrics
from jobs.steps.views import create_views
from jobs.tables import RAW_RECORDS, cluster_rows, sql_string_literal


def forgotten(source_files: tuple[str, ...], capture_runs: tuple[str, ...]) -> str:
    """The raw records read from those files (or landed tables) or by those runs, as SQL: Delta's delete
    takes it through Spark Connect too, where a Column condition has no SQL form to send."""
    names = dict.fromkeys(
        [*(as_source_file(path) if "://" not in path else path for path in source_files), *source_files]
    )
    clauses = [
        f"{column} IN ({', '.join(sql_string_literal(value) for value in values)})"
        for column, values in (("source_file", names), ("capture_run_id", capture_runs))
        if values
    ]
    return " OR ".join(clauses) or "false"


def forget(
    spark: SparkSession, config: Config, run: JobRun, source_files: tuple[str, ...], capture_runs: tuple[str, ...]
) -> None:
    """Deletes the records in one commit; decode then deletes their silver rows (a delete from raw other
    than by retention is undone downstream), and history and metrics rebuild the groups they touched.
    A kill at any point leaves a state the next run of this job, or the next nightly, completes."""
    condition = f"cluster = {sql_string_literal(config.cluster)} AND ({forgotten(source_files, capture_runs)})"
    count = cluster_rows(spark, config, RAW_RECORDS).where(condition).count()
    run.counts["raw_records_forgotten"] = count
    if count:
        DeltaTable.forName(spark, config.table(RAW_RECORDS)).delete(condition)
        run.progress("forget", f"{count:,} raw record(s) deleted")
    else:
        # Already forgotten (a rerun after a kill, which the steps below complete) or never read.
        run.progress(
            "forget",
            f"no raw record of cluster {config.cluster!r} came from {', '.join([*source_files, *capture_runs])}"
            " (raw_records.source_file and capture_run_id name what was read); bringing the tables up to date",
        )
    file_states(spark, config)  # what raw_records holds of each file, as the next ingest reads on from it
    for stage, step in (("decode", decode), ("history", history), ("metrics", metrics)):
        run.progress(stage)
        step(spark, config, run)
    create_views(spark, config)
    if any("://" not in path for path in source_files):
        run.progress("forget", "remove the file from input.segment_paths, or the next ingest reads it again")
