"""Nightly: every step in order (capture and a live end-offset snapshot when a cluster is configured),
then a summary."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.config import DEFAULT_ENV_FILE, REPO_ROOT, Config, resolve_path
from jobs.kafka_security import capture_configured
from jobs.metrics_writes import CARRY
from jobs.runs import JobRun, row_counts
from jobs.steps.capture import capture
from jobs.steps.decode import SILVER_SCHEMAS, decode
from jobs.steps.end_offsets import live_end_offsets, load_end_offset_files, write_end_offsets
from jobs.steps.history import history
from jobs.steps.ingest import ingest
from jobs.steps.metrics import metrics
from jobs.steps.report import nightly_report
from jobs.steps.views import create_views
from jobs.table_writes import rows_written
from jobs.tables import HISTORY_TABLES, METRICS_TABLES, RAW_RECORDS, cluster_rows, database_tables, releasing_held
from schemas.metrics_carry import metrics_carry_schema
from schemas.share_gold import SHARE_SCHEMAS

SUMMARY_TABLES = (*SILVER_SCHEMAS, *HISTORY_TABLES, *METRICS_TABLES, *SHARE_SCHEMAS)
GROUP_HEALTH = "group_health"  # the view the summary's query opens
QUARANTINE_ORIGINS = 3  # files named in the summary's quarantine line, those with the most records first


def summary(spark: SparkSession, config: Config, counts: dict[str, int], since: datetime) -> str:
    """What the tables hold and what the run that began at `since` wrote to them, one line per table."""
    names = (RAW_RECORDS, *SUMMARY_TABLES)
    # A step that found nothing to do counts no table: the totals it did not count are counted here.
    existing = set(database_tables(spark, config.database))
    uncounted = [name for name in names if name not in counts and name in existing]
    totals = {**dict.fromkeys(names, 0), **(row_counts(spark, config, uncounted) if uncounted else {}), **counts}
    written = rows_written(spark, config, names, since)
    # The metrics carry holds a few records of every group partition with visible offset records: its
    # groups are those, without reading every commit each night (a cost that would grow with the log).
    carried = cluster_rows(spark, config, CARRY, metrics_carry_schema)
    groups = carried.select("group_id").distinct().count()
    quarantined = totals["quarantine"]
    lines = [
        f"groupscope nightly: cluster {config.cluster!r}, database {config.database!r}, warehouse {config.warehouse}",
        f"  {'table':<26} {'rows':>10} {'this run wrote':>15}",
        *(f"  {name:<26} {totals[name]:>10,} {written[name]:>15,}" for name in names),
        f"  groups with commits {groups:,}",  # visible ones: not those of aborted transactions only
        f"  this run: {counts.get('records_decoded', 0):,} raw record(s) decoded,"
        f" {counts.get('groups_folded', 0):,} group(s) folded",
        f"  check: raw {totals[RAW_RECORDS]:,} = decoded {counts.get('decoded', 0):,} + quarantined {quarantined:,}",
        *([quarantine_line(spark, config, quarantined)] if quarantined else []),
        f"  query: {sql_command(config, f'SELECT * FROM {config.table(GROUP_HEALTH)}')}",
    ]
    return "\n".join(lines)


def quarantine_line(spark: SparkSession, config: Config, quarantined: int) -> str:
    """How many records were quarantined, from which files, and the query that shows why."""
    origin = F.coalesce(
        F.col("source_file"), F.concat(F.lit("capture run "), F.col("capture_run_id")), F.lit("an unnamed input")
    )
    by_origin = (
        cluster_rows(spark, config, "quarantine")
        .groupBy(origin.alias("origin"))
        .count()
        .orderBy(F.col("count").desc(), "origin")
        .collect()
    )
    shown = ", ".join(f"{row['count']:,} in {_shown_path(row['origin'])}" for row in by_origin[:QUARANTINE_ORIGINS])
    more = f" and {len(by_origin) - QUARANTINE_ORIGINS:,} more file(s)" if len(by_origin) > QUARANTINE_ORIGINS else ""
    cluster = '"' + config.cluster.replace("\\", "\\\\").replace('"', '\\"') + '"'
    why = (
        f"SELECT source_file, source_offset, stage, reason FROM {config.table('quarantine')}"
        f" WHERE cluster = {cluster} ORDER BY source_file, source_offset"
    )
    return f"  quarantined {quarantined:,} record(s): {shown}{more}; why: {sql_command(config, why)}"


def _shown_path(origin: str) -> str:
    """A local file as a path, relative to the checkout when inside it; other origins as they are."""
    if not origin.startswith("file:"):
        return origin
    path = Path(origin.removeprefix("file:"))
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def sql_command(config: Config, query: str) -> str:
    """The SQL shell's command line that runs `query` on the run's warehouse and metastore."""
    if config.remote:
        # Through Spark Connect the server answers SQL itself, and ./spark-sql.sh would exit 75 while it holds
        # the embedded metastore: the venv's Spark Connect client asks it.
        client = (
            "from pyspark.sql import SparkSession; "
            f"SparkSession.builder.remote({json.dumps(config.remote)}).getOrCreate()"
            f".sql({json.dumps(query)}).show(truncate=False)"
        )
        return f".venv/bin/python -c {shlex.quote(client)}"
    return f"./spark-sql.sh{_environment_option(config)} -e {shlex.quote(query)}"


def _environment_option(config: Config) -> str:
    """The SQL shell opens conf/local.toml's warehouse and metastore unless told the run's own file."""
    env_file = config.source_files[-1] if len(config.source_files) > 1 else DEFAULT_ENV_FILE
    if env_file.resolve() == DEFAULT_ENV_FILE.resolve():
        return ""
    shown = env_file.resolve().relative_to(REPO_ROOT) if env_file.resolve().is_relative_to(REPO_ROOT) else env_file
    return f" --conf {shown}"


def nightly(spark: SparkSession, config: Config, run: JobRun) -> None:
    def step(name: str, action: Callable[[], object], detail: str = "") -> None:
        run.progress(name, detail)
        with releasing_held(spark):  # the next step's sorts get the heap the frames of this one took
            action()

    if capture_configured(config):
        step("capture", lambda: capture(spark, config, run))
        step(
            "end_offsets",
            lambda: write_end_offsets(spark, config, run, live_end_offsets(spark, config, run)),
            "live snapshot",
        )
    step("ingest", lambda: ingest(spark, config, run))
    end_offset_files = [resolve_path(path) for path in config.section("end_offsets").get("files", [])]
    if end_offset_files:
        step(
            "end_offsets",
            lambda: write_end_offsets(spark, config, run, load_end_offset_files(spark, end_offset_files)),
            f"from {len(end_offset_files)} file path(s)",
        )
    step("decode", lambda: decode(spark, config, run))
    step("history", lambda: history(spark, config, run))
    step("metrics", lambda: metrics(spark, config, run))
    step("views", lambda: (create_views(spark, config), nightly_report(spark, config, run)))
    print(summary(spark, config, run.counts, run.started_at), flush=True)
