"""The whole nightly job, run for real in the background while the other tests run: the local
`spark-submit.sh nightly` of the quickstart capture (with a rival on its warehouse), a second night over
a grown log killed part-way and run again, and a run on a standalone Spark cluster on loopback. conftest
starts them with the session, in that order, and the tests that use them (test_standalone_cluster,
test_crash_safety, test_locks, test_sql_views, test_thriftserver) wait for them.

Every run reads the capture's log from one live path of the session (`live_log`), not from the capture
itself: the crash run grows that log night by night (tests/log_cuts.py), and tables name the files their
records came from, so runs compared with each other must have read the same paths.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyspark

from jobs.locks import EXIT_BUSY
from lab.broker import free_port
from schemas.share_gold import SHARE_SCHEMAS
from tests import log_cuts
from tests.conftest import REPO_ROOT
from tests.kill import progress_lines, run_until_progress_line
from tests.small_data import SMALL_DATA_SPARK_CONF, toml_lines

SPARK_HOME = Path(pyspark.__file__).resolve().parent
LOOPBACK = "127.0.0.1"
CAPTURE = REPO_ROOT / "tests" / "captures" / "kafka-4.2.1" / "quickstart"
DATABASE = "groupscope_cluster"
# The tables a nightly of the sample leaves empty: it has neither share nor streams groups, no offset
# commit of it names a topic id (v4), and it has no bad bytes.
EMPTY_FOR_THE_SAMPLE = ("quarantine", "share_group_state", *SHARE_SCHEMAS, "streams_members", "commit_topic_names")
CLUSTER = "quickstart"
NIGHTLY_APP_NAME = "groupscope-nightly"
# A bound on a hung run, counted from the run's start: a nightly of this capture takes about 3 minutes alone,
# but the session's first one shares two cores with four more Spark JVMs and brokers, and took over 20
# minutes in CI (stop 64).
NIGHTLY_TIMEOUT_SECONDS = 2700
START_TIMEOUT_SECONDS = 180
STOP_TIMEOUT_SECONDS = 30
POLL_SECONDS = 0.5
LIVE_LOG = "quickstart-log"  # beside the runs' work directories: <live>/segments, <live>/end_offsets


# The README's nightly (the local run) keeps the shipped settings' compiled expressions, so the suite runs
# the production path too; it only leaves out the web UI and uses few shuffle partitions.
README_RUN_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
}


def test_environment(live: Path, spark_conf: dict[str, str]) -> str:
    """A small capture with `spark_conf` (no web UI in any: runs side by side would otherwise compete for
    port 4040 and up). The log's end-offset snapshots are loaded, so lag and status are computed and
    compared too."""
    return f"""\
[spark.conf]
{toml_lines(spark_conf)}
[end_offsets]
files = [{json.dumps(str(live / "end_offsets"))}]
"""


def live_log(workdir: Path) -> Path:
    """The session's live copy of the capture's log, beside every run's work directory; written whole
    the first time it is asked for."""
    live = workdir.parent / LIVE_LOG
    if not live.exists():
        log_cuts.write_night([log_cuts.whole(CAPTURE)], live / "segments", live / "end_offsets")
    return live


def reset_live_log(live: Path, cut: log_cuts.Cut) -> None:
    """The live log as it stood at an earlier moment (a new broker's log, from the crash run's view)."""
    for segment in (live / "segments").glob("__consumer_offsets-*/*.log"):
        segment.unlink()
    log_cuts.write_night([cut], live / "segments", live / "end_offsets")


@dataclass
class Process:
    """A process this test started, in a process group of its own, writing its output to `log`."""

    name: str
    popen: subprocess.Popen
    log: Path
    started: float  # time.monotonic() when it started

    @classmethod
    def start(cls, name: str, command: list[str], log: Path, env: dict[str, str]) -> Process:
        with open(log, "wb") as output:
            popen = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT, start_new_session=True
            )
        return cls(name, popen, log, time.monotonic())

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def wait(self, timeout_seconds: float) -> None:
        code = self.exit_code(timeout_seconds)
        assert code == 0, f"{self.name} exited with {code}:\n{self.log_tail()}"

    def exit_code(self, seconds_from_start: float) -> int:
        """Its exit code once it has ended; stopped, and the test failed, if it runs longer than
        `seconds_from_start` since it started (however late the test began to wait)."""
        try:
            return self.popen.wait(max(0.0, self.started + seconds_from_start - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            tail = self.log_tail()
            raise AssertionError(f"{self.name} still running after {seconds_from_start} s:\n{tail}") from None

    def stop(self) -> None:
        """SIGTERM to its group (the JVM and the processes it started), SIGKILL if it is still there."""
        if self.popen.poll() is not None:
            return
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(STOP_TIMEOUT_SECONDS)


@dataclass
class NightlyRun:
    process: Process
    warehouse: Path
    # A second run started with it on the same warehouse (the local run only): one of the two must run
    # and the other be refused (tests/integration/test_locks.py), so whichever won holds the tables.
    rival: Process | None = None

    def wait(self) -> Path:
        if self.rival is None:
            self.process.wait(NIGHTLY_TIMEOUT_SECONDS)
            return self.warehouse
        codes = sorted(process.exit_code(NIGHTLY_TIMEOUT_SECONDS) for process in (self.process, self.rival))
        assert codes == [0, EXIT_BUSY], f"exit codes {codes}:\n{self.process.log_tail()}\n{self.rival.log_tail()}"
        return self.warehouse

    def outputs(self) -> dict[int, str]:
        """Each process's output by its exit code, once both have ended."""
        self.wait()
        return {process.popen.returncode: process.log.read_text() for process in (self.process, self.rival)}


def wait_until(condition: Callable[[], bool], what: str, process: Process) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not condition():
        if process.popen.poll() is not None:
            raise AssertionError(f"{process.name} exited before {what}:\n{process.log_tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no sign after {START_TIMEOUT_SECONDS} s that {what}:\n{process.log_tail()}")
        time.sleep(POLL_SECONDS)


def spark_environment(workdir: Path) -> dict[str, str]:
    environment = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(workdir),  # no stray spark-defaults.conf or spark-env.sh
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_LOCAL_DIRS": str(workdir / "local"),
        "SPARK_DAEMON_MEMORY": "512m",
        "PATH": f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    environment.pop("GROUPSCOPE_MASTER", None)
    # tests/integration/test_spark_connect.py sets it for its own client while its tests run; a background
    # run started meanwhile would inherit it and refuse to build a classic session (CONNECT_URL_NOT_SET).
    environment.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return environment


def nightly_command(
    workdir: Path, master: str | None = None, spark_conf: dict[str, str] = SMALL_DATA_SPARK_CONF
) -> list[str]:
    """`./spark-submit.sh [--master URL] nightly` on the live log into a warehouse of its own in `workdir`."""
    live = live_log(workdir)
    environment_file = workdir / "test.toml"
    environment_file.write_text(test_environment(live, spark_conf))
    return [
        str(REPO_ROOT / "spark-submit.sh"),
        *(["--master", master] if master else []),
        "nightly",
        "--conf",
        str(environment_file),
        "--warehouse",
        str(workdir / "warehouse"),
        "--database",
        DATABASE,
        "--cluster",
        CLUSTER,
        "--segments",
        str(live / "segments"),
    ]


def start_nightly(workdir: Path, master: str | None, spark_conf: dict[str, str] = SMALL_DATA_SPARK_CONF) -> NightlyRun:
    name = f"nightly on {master or 'the local master'}"
    command = nightly_command(workdir, master, spark_conf)
    return NightlyRun(
        Process.start(name, command, workdir / "nightly.log", spark_environment(workdir)), workdir / "warehouse"
    )


_local_runs: dict[str, NightlyRun] = {}


def local_nightly_run(tmp_path_factory) -> NightlyRun:
    """The nightly run with the local master, started once per test session together with a rival on
    the same warehouse: this module, the Thrift server, lock and crash tests all use it (a run costs
    minutes on a small machine)."""
    if CLUSTER not in _local_runs:
        workdir = tmp_path_factory.mktemp("local-nightly")
        run = start_nightly(workdir, master=None, spark_conf=README_RUN_SPARK_CONF)
        command = nightly_command(workdir, spark_conf=README_RUN_SPARK_CONF)
        environment = spark_environment(workdir)
        run.rival = Process.start("rival nightly", command, workdir / "rival.log", environment)
        _local_runs[CLUSTER] = run
    return _local_runs[CLUSTER]


def bound_port(process: Process, service: str) -> int | None:
    pattern = rf"Successfully started service '{service}' on port (\d+)\."
    found = re.search(pattern, process.log.read_text(errors="replace"))
    return int(found.group(1)) if found else None


def master_state(ui_port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{ui_port}/json/", timeout=5) as response:
            return json.load(response)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def has_alive_worker(ui_port: int) -> bool:
    state = master_state(ui_port)
    return state is not None and any(worker["state"] == "ALIVE" for worker in state["workers"])


@dataclass(frozen=True)
class StandaloneCluster:
    url: str
    ui_port: int


@contextlib.contextmanager
def standalone_cluster(workdir: Path) -> Iterator[StandaloneCluster]:
    """A master and a worker on loopback, stopped on leaving."""
    environment = spark_environment(workdir)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_class = "org.apache.spark.deploy.master.Master"
    master_command = [spark_class, master_class, "--host", LOOPBACK, "--port", str(free_port())]
    master_command += ["--webui-port", str(free_port())]
    master = Process.start("master", master_command, workdir / "master.log", environment)
    worker = None
    try:
        # Spark moves a service to the next port when the one asked for was taken meanwhile (a CI run's
        # master answered another process's HTML there), so the ports are the ones its log says it bound.
        wait_until(lambda: bound_port(master, "MasterUI") is not None, "the master's web UI is bound", master)
        port, ui_port = bound_port(master, "sparkMaster"), bound_port(master, "MasterUI")
        wait_until(lambda: master_state(ui_port) is not None, "the master answers on its web port", master)
        url = f"spark://{LOOPBACK}:{port}"
        worker_command = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK, "--webui-port", "0"]
        worker_command += ["--cores", "2", "--memory", "1536m", "--work-dir", str(workdir / "work"), url]
        worker = Process.start("worker", worker_command, workdir / "worker.log", environment)
        wait_until(lambda: has_alive_worker(ui_port), "a worker is ALIVE at the master", worker)
        yield StandaloneCluster(url, ui_port)
    finally:
        if worker is not None:
            worker.stop()
        master.stop()


@dataclass(frozen=True)
class ClusterRun:
    warehouse: Path
    applications: list[dict]  # the master's completed applications once the run had ended


class ClusterNightlyInBackground:
    """The nightly run on a standalone cluster, in a thread of its own that starts once `after` has
    returned (runs started together would only slow each other down)."""

    def __init__(self, after: Callable[[], object], workdir: Path) -> None:
        self._after, self.workdir = after, workdir
        self._nightly: NightlyRun | None = None
        self._stopped = threading.Event()
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cluster-run")
        self._run = executor.submit(self._run_on_a_cluster)
        executor.shutdown(wait=False)

    def _run_on_a_cluster(self) -> ClusterRun:
        with contextlib.suppress(Exception):  # what it waited for reports its own failure
            self._after()
        cluster_workdir = self.workdir / "cluster"
        cluster_workdir.mkdir()
        with standalone_cluster(cluster_workdir) as cluster:
            if self._stopped.is_set():
                raise RuntimeError("stopped before the nightly run started")
            self._nightly = start_nightly(self.workdir, master=cluster.url)
            try:
                warehouse = self._nightly.wait()
            finally:
                self._nightly.process.stop()
            return ClusterRun(warehouse, master_state(cluster.ui_port)["completedapps"])

    def result(self) -> ClusterRun:
        return self._run.result(2 * NIGHTLY_TIMEOUT_SECONDS)

    def stop(self) -> None:
        self._stopped.set()
        if self._nightly is not None:
            self._nightly.process.stop()


@dataclass(frozen=True)
class CrashRun:
    context: str  # the cut, the seed and the line the run was killed at: enough to replay a failure
    killed_at: str
    first_night: Process
    rerun: Process
    warehouse: Path


def first_night_cut() -> log_cuts.Cut:
    """The capture's log halfway through its time: the first night; the second night reads it whole."""
    times = [batch.max_timestamp_ms for batches in log_cuts.capture_batches(CAPTURE).values() for batch in batches]
    return log_cuts.cut_at(CAPTURE, (min(times) + max(times)) // 2, "halfway through the capture")


class CrashRunInBackground:
    """Two nights into a warehouse of its own, the second killed at a random progress line then run again,
    in a thread of its own that starts once the reference run has ended (the two would only slow each
    other down). The first night reads the live log cut halfway; the second, the whole log (the same
    bytes the reference read, at the same path), so the second night is an incremental run over a grown
    log, killed anywhere in it."""

    def __init__(self, reference_run: NightlyRun, workdir: Path) -> None:
        self.reference_run, self.workdir = reference_run, workdir
        self._process: Process | None = None
        self._stopped = threading.Event()
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crash-run")
        self._crash = executor.submit(self._kill_then_rerun)
        executor.shutdown(wait=False)

    def _kill_then_rerun(self) -> CrashRun:
        reference = progress_lines(self.reference_run.outputs()[0])
        command, environment = nightly_command(self.workdir), spark_environment(self.workdir)
        live, cut = live_log(self.workdir), first_night_cut()
        reset_live_log(live, cut)
        try:
            first_night = self._run("first night", command, environment, self.workdir / "first-night.log")
            if first_night.popen.returncode != 0:
                return CrashRun(f"the first night ({cut.why}) failed", "", first_night, first_night, self.workdir)
        finally:
            log_cuts.write_night([log_cuts.whole(CAPTURE)], live / "segments", live / "end_offsets")
        night_lines = min(len(reference), len(progress_lines(first_night.log.read_text())))
        seed = random.SystemRandom().randrange(1 << 32)
        # The last line is the summary, written after every table: killing there would prove nothing.
        kill_at = random.Random(seed).randrange(1, night_lines)
        killed_at = run_until_progress_line(command, self.workdir / "killed.log", kill_at, env=environment)
        context = f"first night {cut.why}; seed {seed}: second night killed at progress line {kill_at} ({killed_at})"
        rerun = self._run("rerun", command, environment, self.workdir / "rerun.log")
        return CrashRun(context, killed_at, first_night, rerun, self.workdir / "warehouse")

    def _run(self, name: str, command: list[str], environment: dict[str, str], log: Path) -> Process:
        if self._stopped.is_set():
            raise RuntimeError(f"stopped before the {name}")
        self._process = Process.start(name, command, log, environment)
        self._process.exit_code(NIGHTLY_TIMEOUT_SECONDS)
        return self._process

    def result(self) -> CrashRun:
        return self._crash.result(3 * NIGHTLY_TIMEOUT_SECONDS)

    def stop(self) -> None:
        self._stopped.set()
        if self._process is not None:
            self._process.stop()
