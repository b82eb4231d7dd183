"""A nightly run killed with SIGKILL part-way, then run again, leaves exactly an uninterrupted run's tables.

The reference is the session's local nightly run of the quickstart capture (conftest `local_nightly`). The
killed run gets a warehouse of its own; it is killed, process group and all, when its log shows a
progress line picked at random from the reference's (so any stage can be hit, and the seed in the
failure message replays it), then run again to the end. Every table but `job_runs` must hold the
reference's rows. The kill and the rerun take minutes: they start in the background as soon as the
reference has ended (conftest `_crash_run_started_with_the_session`) and the test waits for them.
bench/crash_safety.py does the same ten times and more (too slow for CI).
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.tables import ensure_table
from tests.delta_compare import differing_tables
from tests.kill import progress_lines, run_until_progress_line
from tests.test_standalone_cluster import (
    DATABASE,
    NIGHTLY_TIMEOUT_SECONDS,
    NightlyRun,
    Process,
    nightly_command,
    spark_environment,
)


@dataclass(frozen=True)
class CrashRun:
    context: str  # the seed and the line the run was killed at: enough to replay a failure
    killed_at: str
    rerun: Process
    warehouse: Path


class CrashRunInBackground:
    """A run killed at a random progress line of the reference, then run again, in a thread of its own
    that starts once the reference run has ended (the two would only slow each other down)."""

    def __init__(self, reference_run: NightlyRun, workdir: Path) -> None:
        self.reference_run, self.workdir = reference_run, workdir
        self._rerun: Process | None = None
        self._stopped = threading.Event()
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crash-run")
        self._crash = executor.submit(self._kill_then_rerun)
        executor.shutdown(wait=False)

    def _kill_then_rerun(self) -> CrashRun:
        reference = progress_lines(self.reference_run.outputs()[0])
        seed = random.SystemRandom().randrange(1 << 32)
        # The last line is the summary, written after every table: killing there would prove nothing.
        kill_at = random.Random(seed).randrange(1, len(reference))
        command, environment = nightly_command(self.workdir), spark_environment(self.workdir)
        killed_at = run_until_progress_line(command, self.workdir / "killed.log", kill_at, env=environment)
        context = f"seed {seed}: killed at progress line {kill_at} of {len(reference)} ({killed_at})"
        if self._stopped.is_set():
            raise RuntimeError(f"stopped before the rerun; {context}")
        self._rerun = Process.start("rerun", command, self.workdir / "rerun.log", environment)
        self._rerun.popen.wait(NIGHTLY_TIMEOUT_SECONDS)
        return CrashRun(context, killed_at, self._rerun, self.workdir / "warehouse")

    def result(self) -> CrashRun:
        return self._crash.result(2 * NIGHTLY_TIMEOUT_SECONDS)

    def stop(self) -> None:
        self._stopped.set()
        if self._rerun is not None:
            self._rerun.stop()


def test_a_run_killed_at_a_random_point_then_run_again_leaves_the_uninterrupted_tables(spark, local_nightly, crash_run):
    crash = crash_run.result()
    assert crash.killed_at.startswith("[nightly"), crash.context
    assert crash.rerun.popen.returncode == 0, f"{crash.context}; the rerun failed:\n{crash.rerun.log_tail()}"
    assert differing_tables(spark, local_nightly.warehouse, crash.warehouse, DATABASE) == [], crash.context


def test_a_table_whose_creation_was_killed_is_created_again(spark, spark_config):
    # What a kill during the first write leaves: files and an empty _delta_log, no committed version,
    # no table in the catalog. Delta refuses to create a table over such a location by itself.
    name = spark_config.table("killed_during_creation")
    location = Path(spark.catalog.getDatabase(spark_config.database).locationUri.removeprefix("file:"))
    debris = location / "killed_during_creation"
    (debris / "_delta_log").mkdir(parents=True)
    (debris / "_delta_log" / ".00000000000000000000.json.b1946ac9.tmp").write_text("{}")
    (debris / "cluster=sample").mkdir()
    (debris / "cluster=sample" / "part-00000.snappy.parquet").write_bytes(b"PAR1")
    schema = StructType([StructField("cluster", StringType()), StructField("value", LongType())])

    ensure_table(spark, name, schema, partition_by=("cluster",))
    assert spark.table(name).count() == 0
    # What a kill between Delta's first commit and the metastore entry leaves: a committed table at the
    # location, unknown to the catalog. It is never cleared: the table is registered over it.
    committed = spark_config.table("killed_before_registration")
    rows = spark.createDataFrame([("sample", 1)], schema)
    rows.write.format("delta").partitionBy("cluster").save(str(location / "killed_before_registration"))
    ensure_table(spark, committed, schema, partition_by=("cluster",))
    assert spark.table(committed).collect() == [Row(cluster="sample", value=1)]
