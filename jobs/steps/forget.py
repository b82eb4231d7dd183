"""Forget: remove one input's raw records and everything derived from them, then bring the derived
tables up to date, as if that input had never been read."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.config import Config
from jobs.delta_tables import DeltaTable
from jobs.file_states import file_states
from jobs.runs import JobRun, WrongInput
from jobs.segment_files import as_source_file
from jobs.steps.decode import decode
from jobs.steps.history import history
from jobs.steps.metrics import metrics
from jobs.steps.views import create_views
from jobs.tables import RAW_RECORDS, cluster_rows, sql_string_literal
from jobs.watermarks import note, noted_commits, noting

STEP = "forget"
FORGOTTEN = "forgotten"  # the note's list of names whose records the commit deleted


def source_names(source_files: tuple[str, ...]) -> tuple[str, ...]:
    """The names raw_records may hold for those files: as given, and a local path as ingest names it."""
    local = [as_source_file(path) for path in source_files if "://" not in path]
    return tuple(dict.fromkeys([*local, *source_files]))


def forgotten(source_files: tuple[str, ...], capture_runs: tuple[str, ...]) -> str:
    """The raw records read from those files (or landed tables) or by those runs, as SQL: Delta's delete
    takes it through Spark Connect too, where a Column condition has no SQL form to send."""
    clauses = [
        f"{column} IN ({', '.join(sql_string_literal(value) for value in values)})"
        for column, values in (("source_file", source_names(source_files)), ("capture_run_id", capture_runs))
        if values
    ]
    return " OR ".join(clauses) or "false"


def forgotten_before(spark: SparkSession, config: Config, names: tuple[str, ...]) -> bool:
    """Whether an earlier forget deleted the records of any of `names` (its delete commit notes them)."""
    noted = noted_commits(spark, config.table(RAW_RECORDS), STEP, config.cluster)
    return any(set(names) & set(commit_note.get(FORGOTTEN, ())) for _, commit_note in noted)


def forget(
    spark: SparkSession, config: Config, run: JobRun, source_files: tuple[str, ...], capture_runs: tuple[str, ...]
) -> None:
    """Deletes the records in one commit; decode then deletes their silver rows (a delete from raw other
    than by retention is undone downstream), and history and metrics rebuild the groups they touched.
    A kill at any point leaves a state the next run of this job, or the next nightly, completes.
    Names that match no record and no earlier forget are a mistake (WrongInput): nothing is changed."""
    condition = f"cluster = {sql_string_literal(config.cluster)} AND ({forgotten(source_files, capture_runs)})"
    count = cluster_rows(spark, config, RAW_RECORDS).where(condition).count()
    run.counts["raw_records_forgotten"] = count
    names = (*source_names(source_files), *capture_runs)
    if count:
        with noting(spark, note(STEP, config.cluster, {}, **{FORGOTTEN: sorted(names)})):
            DeltaTable.forName(spark, config.table(RAW_RECORDS)).delete(condition)
        run.progress("forget", f"{count:,} raw record(s) deleted")
    elif forgotten_before(spark, config, names):  # a rerun after a kill: the steps below complete it
        run.progress("forget", "already deleted by an earlier forget; bringing the tables up to date")
    else:
        raise WrongInput(
            f"no raw record of cluster {config.cluster!r} came from {', '.join([*source_files, *capture_runs])},"
            " and no earlier forget named it; nothing was changed. Name each .log file read, not its directory:"
            f" SELECT DISTINCT source_file, capture_run_id FROM {config.table(RAW_RECORDS)}"
            f" WHERE cluster = {sql_string_literal(config.cluster)}"
        )
    file_states(spark, config)  # what raw_records holds of each file, as the next ingest reads on from it
    for stage, step in (("decode", decode), ("history", history), ("metrics", metrics)):
        run.progress(stage)
        step(spark, config, run)
    create_views(spark, config)
    if any("://" not in path for path in source_files):
        run.progress("forget", "remove the file from input.segment_paths, or the next ingest reads it again")
