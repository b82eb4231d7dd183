"""One writing run per cluster at a time; a second one is refused clearly (exit 75) and changes nothing.

Two real `spark-submit.sh nightly` processes started together on one warehouse: one runs, the other is
refused. In process: the cluster lock on the test warehouse refuses a second run, records the refusal
in `job_runs`, and takes over the lock of a run that is provably dead (its process is gone) or too old.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from jobs.locks import EXIT_BUSY, RunRefused, lock_path
from jobs.runs import JobRun
from jobs.session import hold_embedded_metastore
from tests.conftest import REPO_ROOT


def write_lock(config, *, host: str, pid: int, started_at: datetime) -> Path:
    path = Path(lock_path(config))
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = {"run_id": "other-run", "job": "nightly", "host": host, "pid": pid, "started_at": started_at.isoformat()}
    path.write_text(json.dumps(holder))
    return path


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture
def config(spark_config):
    return replace(spark_config, cluster="lock-test")


def runs_of(spark, config, outcome):
    return (
        spark.table(config.table("job_runs"))
        .where((F.col("cluster") == F.lit(config.cluster)) & (F.col("outcome") == F.lit(outcome)))
        .collect()
    )


def test_a_second_run_of_the_cluster_is_refused_and_recorded(spark, config):
    with JobRun(spark, config, "history") as first:
        with pytest.raises(RunRefused) as refusal, JobRun(spark, config, "decode"):
            pytest.fail("the second run must not start")
        assert refusal.value.code == EXIT_BUSY
        assert first.run_id in str(refusal.value) and "history" in str(refusal.value)
    assert first.exit_code == 0
    refused = runs_of(spark, config, "refused")
    assert [row.job for row in refused] == ["decode"] and first.run_id in refused[0].message
    # The first run released the lock: the next one runs.
    with JobRun(spark, config, "decode") as again:
        pass
    assert again.exit_code == 0


def test_the_lock_of_a_dead_run_is_taken_over(spark, config):
    import socket

    write_lock(config, host=socket.gethostname(), pid=dead_pid(), started_at=datetime.now(UTC))
    with JobRun(spark, config, "history") as run:
        pass
    assert run.exit_code == 0
    assert not Path(lock_path(config)).exists(), "the run released the lock it took over"


def empty_lock_created(config, seconds_ago: float) -> Path:
    """The lock file of a run killed between creating it and writing it: empty."""
    path = Path(lock_path(config))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    created = (datetime.now(UTC) - timedelta(seconds=seconds_ago)).timestamp()
    os.utime(path, (created, created))
    return path


def test_a_lock_file_left_empty_by_a_killed_run_is_taken_over_after_a_minute(spark, config):
    path = empty_lock_created(config, seconds_ago=61)
    with JobRun(spark, config, "history") as run:
        pass
    assert run.exit_code == 0
    assert not path.exists(), "the run released the lock it took over"


def test_a_run_waits_out_a_lock_file_not_written_yet_then_takes_it_over(spark, config):
    # Its creator may be a run just starting: the run waits the rest of the minute, then takes over.
    path = empty_lock_created(config, seconds_ago=58)
    with JobRun(spark, config, "history") as run:
        assert json.loads(path.read_text())["run_id"] == run.run_id
    assert run.exit_code == 0
    assert not path.exists()


def test_a_lock_file_written_while_a_run_waits_is_respected(spark, config):
    path = empty_lock_created(config, seconds_ago=50)
    holder = threading.Timer(
        2.0, write_lock, args=(config,), kwargs={"host": "another-host", "pid": 1, "started_at": datetime.now(UTC)}
    )
    holder.start()
    try:
        with pytest.raises(RunRefused, match="another-host"), JobRun(spark, config, "history"):
            pass
    finally:
        holder.join()
    assert json.loads(path.read_text())["host"] == "another-host", "the refused run left the holder's lock alone"
    path.unlink()


def test_a_live_run_elsewhere_is_respected_until_it_is_too_old(spark, config):
    path = write_lock(config, host="another-host", pid=os.getpid(), started_at=datetime.now(UTC))
    with pytest.raises(RunRefused, match="another-host"), JobRun(spark, config, "history"):
        pass
    assert path.exists(), "a refused run leaves the holder's lock alone"
    write_lock(config, host="another-host", pid=os.getpid(), started_at=datetime.now(UTC) - timedelta(days=2))
    with JobRun(spark, config, "history") as run:
        pass
    assert run.exit_code == 0


def test_two_nightly_processes_started_together_one_runs_one_is_refused(local_nightly):
    outputs = local_nightly.outputs()
    assert sorted(outputs) == [0, EXIT_BUSY]
    assert "another groupscope process is using the embedded metastore" in outputs[EXIT_BUSY]
    assert "Traceback" not in outputs[EXIT_BUSY]
    assert "check: raw" in outputs[0]


def test_sql_shells_and_jobs_exclude_each_other_on_the_embedded_metastore(tmp_path):
    lock = tmp_path / ".embedded-metastore.lock"
    with open(lock, "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        holder.write("pid 4242 on a job host\n")
        holder.flush()
        for launcher in (["spark-sql.sh", "-e", "SELECT 1"], ["scripts/thriftserver.sh", "--warehouse", str(tmp_path)]):
            shell = subprocess.run([str(REPO_ROOT / launcher[0]), *launcher[1:]], capture_output=True, text=True,
                                   env={**os.environ, "GROUPSCOPE_WAREHOUSE": str(tmp_path)}, timeout=300)  # fmt: skip
            assert shell.returncode == EXIT_BUSY, shell.stderr[-2000:]
            assert f"embedded metastore of {tmp_path}: pid 4242 on a job host" in shell.stderr

    # The other way round: a job is refused while a shell holds the metastore.
    library = REPO_ROOT / "scripts" / "embedded_metastore.sh"
    script = f"source {library}; hold_embedded_metastore {tmp_path}; echo held; exec sleep 600"
    shell = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert shell.stdout.readline() == "held\n"
        with pytest.raises(RunRefused, match=r"UTC \(bash\)"):
            hold_embedded_metastore(tmp_path)
    finally:
        shell.kill()
        shell.wait()
