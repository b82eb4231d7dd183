"""One job run: its id, its counts, its console progress, and its row in `ops.job_runs`.

The row is appended when the run ends, whether it succeeded, failed or was refused, so a scheduler and
a person can both see what each run did. A run that writes tables holds the cluster's lock
(jobs/locks.py) from start to end. Exit codes: 0 succeeded, 1 failed (the message says why),
2 refused because the command line names what the tables do not hold (WrongInput; nothing changed),
75 refused because another run holds the lock (nothing changed; retry later).
"""

from __future__ import annotations

import functools
import json
import re
import sys
import time
import traceback as tracebacks
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.command_line import parse_config
from jobs.config import EXIT_USAGE, REPO_ROOT, Config
from jobs.connect_files import LocalRunLock
from jobs.delta_tables import is_connect
from jobs.lock_store import UnguardedStore
from jobs.locks import EXIT_BUSY, RunLock, RunRefused
from jobs.object_store import StoreUnavailable
from jobs.session import build_session
from jobs.tables import cluster_rows, ensure_table, table_location
from schemas.ops import job_runs_schema

JOB_RUNS = "job_runs"
EXIT_SUCCEEDED, EXIT_FAILED = 0, 1
# A failed run's traceback is for whoever debugs it, not for the console: it goes here, named in the message.
LOG_DIR = REPO_ROOT / "logs"
# py4j and Spark Connect append the JVM's stack to an error's text; its frames belong in the traceback file.
JVM_STACK_FRAME = re.compile(r"\s+at |\s*\.\.\. \d+ more")
__all__ = [
    "EXIT_BUSY",
    "EXIT_FAILED",
    "EXIT_SUCCEEDED",
    "InvariantViolation",
    "JobRun",
    "RunRefused",
    "WrongInput",
    "run_job",
]


class InvariantViolation(RuntimeError):
    """A check that guards against losing records failed; the run must not report success."""


class WrongInput(ValueError):
    """The command line names what the tables do not hold, found once they are read: nothing was
    changed, and the run exits 2 like a mistake found before Spark started, with the message saying what to do."""


def row_counts(spark: SparkSession, config: Config, names: Sequence[str]) -> dict[str, int]:
    """The cluster's rows of each table, counted in one Spark job (a job per table costs about a second)."""
    counted = functools.reduce(
        DataFrame.unionByName,
        [
            cluster_rows(spark, config, name)
            .groupBy()
            .agg(F.count(F.lit(1)).alias("rows"))
            .select(F.lit(name).alias("table"), "rows")
            for name in names
        ],
    )
    return {row["table"]: row["rows"] for row in counted.collect()}


class JobRun:
    def __init__(self, spark: SparkSession, config: Config, job: str, exclusive: bool = True) -> None:
        """`exclusive`: the run writes tables that another run of the cluster may write too (most jobs)."""
        self.spark, self.config, self.job = spark, config, job
        self.run_id = f"{job}-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        lock = LocalRunLock if is_connect(spark) else RunLock  # a Spark Connect client has no Hadoop FileSystem
        self._lock = lock(spark, config, self.run_id, job) if exclusive else None
        self.inputs: list[str] = []
        self.counts: dict[str, int] = {}
        self.exit_code = EXIT_FAILED
        self._query_tag: str | None = None  # through Spark Connect: the tag naming the current step's queries
        self._started = time.monotonic()
        self.started_at = datetime.now(UTC)

    def progress(self, stage: str, detail: str = "") -> None:
        elapsed = time.monotonic() - self._started
        print(
            f"[{self.job} {elapsed:7.1f}s] {stage}{': ' + detail if detail else ''}",
            file=sys.stderr,
            flush=True,
        )
        if not detail:
            self._name_queries(f"{self.job}: {stage}")

    def _name_queries(self, description: str | None) -> None:
        """Spark's UI and event log show each query under the step that ran it (bench/scans.py reads them):
        as its description in a classic session; through Spark Connect, which sends none, as a tag of the
        session's operations (the server's event log has it in the query's jobTags)."""
        if not is_connect(self.spark):
            self.spark.sparkContext.setJobDescription(description)
            return
        if self._query_tag:
            self.spark.removeTag(self._query_tag)
        self._query_tag = description
        if description:
            self.spark.addTag(description)

    def count_rows(self, name: str) -> int:
        return self.count_tables((name,))[name]

    def count_tables(self, names: Sequence[str]) -> dict[str, int]:
        counts = row_counts(self.spark, self.config, names)
        self.record_counts(counts)
        return counts

    def record_counts(self, counts: Mapping[str, int]) -> None:
        """Each table's rows for the cluster, as the step knows them (count_tables: as counted)."""
        for name, rows in counts.items():
            self.counts[name] = rows
            self.progress(name, f"{rows:,} rows for cluster {self.config.cluster!r}")

    def __enter__(self) -> JobRun:
        self.progress("started", f"run {self.run_id}")
        self._name_queries(self.job)
        if self._lock is not None:
            try:
                self._lock.acquire()
            except RunRefused as refusal:
                self.exit_code = EXIT_BUSY
                if self._lock.records_refusals:
                    self._record("refused", str(refusal))
                self.progress("refused", str(refusal))
                raise
            if self._lock.took_over is not None:
                self.progress("lock", f"took over the lock of a dead run: {self._lock.took_over.describe()}")
        return self

    def __exit__(self, error_type, error, traceback) -> bool:
        outcome = "succeeded" if error is None else "failed"
        self.exit_code = EXIT_SUCCEEDED if error is None else EXIT_FAILED
        message = None if error is None else f"{error_type.__name__}: {error_text(error)}"
        if isinstance(error, WrongInput):
            outcome, self.exit_code, message = "refused", EXIT_USAGE, str(error)
        elif error is not None and not isinstance(error, InvariantViolation):
            message += f" (traceback in {self._write_traceback(error_type, error, traceback)})"
        try:
            self._record(outcome, message)
        finally:
            self._name_queries(None)
            if self._lock is not None:
                self._lock.release()
        self.progress(outcome, message or json.dumps(self.counts))
        # A failure is reported through the exit code and the job_runs row, not a traceback.
        return error is not None and isinstance(error, Exception)

    def _write_traceback(self, error_type, error, traceback) -> str:
        """Where the traceback went: its file, or the console when the file cannot be written (the
        failure being reported must not be replaced by this one)."""
        text = "".join(tracebacks.format_exception(error_type, error, traceback))
        path = LOG_DIR / f"{self.run_id}.log"
        try:
            LOG_DIR.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as unwritable:
            print(text, file=sys.stderr, flush=True)
            return f"the console above; {path} could not be written: {unwritable.strerror}"
        return str(path)

    def _record(self, outcome: str, message: str | None) -> None:
        table = self.config.table(JOB_RUNS)
        ensure_table(self.spark, table, job_runs_schema)
        counts = self.counts
        row = (
            self.run_id,
            self.job,
            self.config.cluster,
            self.started_at,
            datetime.now(UTC),
            outcome,
            self.inputs,
            counts.get("raw_records"),
            counts.get("decoded"),
            counts.get("quarantine"),
            json.dumps(counts, sort_keys=True),
            message,
            round(time.monotonic() - self._started, 3),
            self.config.run_date,
        )
        rows = self.spark.createDataFrame([row], job_runs_schema)
        # mergeSchema: a job_runs table written by an older groupscope gains the new columns.
        rows.write.format("delta").mode("append").option("mergeSchema", "true").save(table_location(self.spark, table))


Step = Callable[[SparkSession, Config, JobRun], None]


def run_job(job: str, step: Step, argv: Sequence[str] | None, description: str) -> int:
    """A job's whole `main()`: its checked command line, one session, one recorded run, the exit code."""
    config = parse_config(argv, description, job)
    try:
        spark = build_session(config, f"groupscope-{job.replace('_', '-')}")
    except (StoreUnavailable, UnguardedStore) as unusable:  # its message names the store and carries no secret
        print(f"groupscope: {unusable}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    try:
        with JobRun(spark, config, job) as run:
            step(spark, config, run)
        return run.exit_code
    finally:
        spark.stop()


def error_text(error: BaseException) -> str:
    """The error's own lines, causes included, without the JVM frames the py4j and Connect texts carry."""
    text = str(error).split("JVM stacktrace:")[0]
    return " ".join(line.strip() for line in text.splitlines() if line.strip() and not JVM_STACK_FRAME.match(line))
