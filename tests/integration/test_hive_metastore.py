"""A Hive metastore service shared at once (issue 18 §2, docs/hive.md): scripts/metastore.sh starts the
Hive 3.1.3 standalone metastore on a private PostgreSQL, listening on loopback only (issue 71 §2); while one
real `spark-submit.sh nightly` of the sample writes through it, `./spark-sql.sh` reads a table the nightly has
written and beeline asks the Thrift server, all three on the one service. With the embedded Derby metastore
the second of them exits 75.

One module fixture runs everything once: first a nightly named a port where no service listens (same
warehouse and database: it must fail in bounded time naming the URI and leave nothing behind) while the
service starts; then the good nightly, the Thrift server, spark-sql and beeline while the nightly runs,
and beeline again on the finished tables.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.background_runs import LOOPBACK, Process, spark_environment, wait_until
from tests.conftest import REPO_ROOT
from tests.integration.test_thriftserver import accepts_connections
from tests.kill import progress_lines
from tests.listening import listening_addresses
from tests.s3_runs import SAMPLE, Run, free_port
from tests.small_data import toml_lines

DATABASE = "groupscope_hive"
PASSWORD_ENV = "GROUPSCOPE_METASTORE_DB_PASSWORD"
# spark-sql reads once the nightly has committed its first silver table (decode is the nightly's second step).
READ_AFTER = "offset_commits: written"
# A JVM start (up to a minute on a loaded two-core machine), then the client's bounded attempts: two
# connections a second apart, one retry of the call (jobs/hive_metastore.py).
FAILURE_BOUND_SECONDS = 150
COMMAND_TIMEOUT_SECONDS = 300
# On a bare machine the first start installs PostgreSQL (apt-get) and fetches the metastore from Maven Central.
INSTALL_TIMEOUT_SECONDS = 900


def environment_file(path: Path, uri: str, warehouse: Path) -> Path:
    """conf/hive.toml's settings for one run: this service, this warehouse, a small machine's Spark."""
    path.write_text(f"""\
[catalog]
database = "{DATABASE}"

[storage]
warehouse_dir = {json.dumps(str(warehouse))}
metastore = "hive"

[storage.hive]
uris = "{uri}"
timeout_s = 10

[spark.conf]
{toml_lines()}
[input]
cluster = "sample"
segment_paths = [{json.dumps(str(SAMPLE / "segments"))}]

[end_offsets]
files = [{json.dumps(str(SAMPLE))}]
""")
    return path


class MetastoreService:
    """The service scripts/metastore.sh runs, on free ports, its data in `folder`."""

    def __init__(self, folder: Path, password: str) -> None:
        self.folder, self.password = folder, password
        self.port, self.db_port = free_port(), free_port()
        self.uri = f"thrift://{LOOPBACK}:{self.port}"

    def script(self, action: str, timeout: float = COMMAND_TIMEOUT_SECONDS) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            PASSWORD_ENV: self.password,
            "GROUPSCOPE_METASTORE_PORT": str(self.port),
            "GROUPSCOPE_METASTORE_DB_PORT": str(self.db_port),
            "GROUPSCOPE_METASTORE_DIR": str(self.folder),
        }
        command = [str(REPO_ROOT / "scripts" / "metastore.sh"), action]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)

    def texts(self) -> str:
        """Every file the service and its PostgreSQL wrote (logs, site file, data), and its command line."""
        files = [path for path in self.folder.rglob("*") if path.is_file()]
        command_line = Path(f"/proc/{(self.folder / 'metastore.pid').read_text().strip()}/cmdline").read_bytes()
        return "\n".join([command_line.decode(errors="replace"), *(p.read_text(errors="replace") for p in files)])


def run_sql(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    work = tmp_path_factory.mktemp("hive")
    # As root, PostgreSQL runs as the postgres user, who must be able to enter its folder (pytest's are 0700).
    folder = Path(tempfile.mkdtemp(prefix="groupscope-metastore-"))
    folder.chmod(0o755)
    service = MetastoreService(folder, secrets.token_urlsafe(18))
    warehouse = work / "warehouse"
    conf = environment_file(work / "hive.toml", service.uri, warehouse)
    unreachable_uri = f"thrift://{LOOPBACK}:{free_port()}"
    env = spark_environment(work)  # beeline's too; no password: only the service logs in to PostgreSQL
    thrift_port = free_port()
    thrift = None
    runs: list[Run] = []
    background = ThreadPoolExecutor(2)
    try:
        # The run aimed at a closed port needs no service: it fails while the service starts, and the good
        # nightly comes after it, on the same warehouse and database, as the next night's run would.
        unreachable = Run.start(
            "nightly", environment_file(work / "bad.toml", unreachable_uri, warehouse), work / "bad.out", {}
        )
        runs.append(unreachable)
        unreachable_result = background.submit(unreachable.finish)
        started = service.script("start", INSTALL_TIMEOUT_SECONDS)
        assert started.returncode == 0, f"scripts/metastore.sh start failed:\n{started.stdout}\n{started.stderr}"
        answered_at_start = accepts_connections(service.port)  # start returns once the service answers
        service_listening = listening_addresses(int((folder / "metastore.pid").read_text()))
        bad_code, bad_output, bad_seconds = unreachable_result.result()
        nightly = Run.start("nightly", conf, work / "nightly.out", {})
        runs.append(nightly)
        thrift = Process.start(
            "thrift server",
            [str(REPO_ROOT / "scripts" / "thriftserver.sh"), "--conf", str(conf), "--port", str(thrift_port)],
            work / "thrift.out",
            env,
        )
        beeline = [
            str(REPO_ROOT / ".venv" / "bin" / "beeline"), "-u", f"jdbc:hive2://{LOOPBACK}:{thrift_port}/{DATABASE}",
            "-n", "groupscope", "--silent=true", "--outputformat=csv2",
        ]  # fmt: skip
        while READ_AFTER not in nightly.log.read_text() and nightly.popen.poll() is None:
            time.sleep(0.5)  # polling the run's output for the line; the line, not the time, decides
        assert nightly.popen.poll() is None, (
            f"the nightly ended before the SQL clients read:\n{nightly.log.read_text()}"
        )
        # Both clients at once, beside the nightly: spark-sql in the background, beeline meanwhile.
        spark_sql_query = f"SELECT count(*) AS commits FROM {DATABASE}.offset_commits"
        spark_sql_command = [str(REPO_ROOT / "spark-sql.sh"), "--conf", str(conf), "-e", spark_sql_query]
        spark_sql_run = background.submit(run_sql, spark_sql_command, env)
        wait_until(lambda: accepts_connections(thrift_port), f"the Thrift server listens on {thrift_port}", thrift)
        during = run_sql([*beeline, "-e", "SELECT count(*) AS records FROM raw_records"], env)
        running_after_beeline = nightly.popen.poll() is None
        spark_sql = spark_sql_run.result()
        running_after_spark_sql = nightly.popen.poll() is None
        nightly_code, nightly_output, nightly_seconds = nightly.finish()
        finished_tables = "SELECT job, outcome FROM job_runs; SELECT count(*) AS rebalances FROM rebalance_timeline"
        after = run_sql([*beeline, "-e", finished_tables], env)
        yield {
            "service": service,
            "answered_at_start": answered_at_start,
            "service_listening": service_listening,
            "status": service.script("status"),
            "nightly": (nightly_code, nightly_output, nightly_seconds),
            "running_after_spark_sql": running_after_spark_sql,
            "running_after_beeline": running_after_beeline,
            "nightly_logs": nightly.spark_logs(),
            "unreachable": (bad_code, bad_output, bad_seconds, unreachable_uri),
            "unreachable_logs": unreachable.spark_logs(),
            "spark_sql": spark_sql,
            "beeline_during": during,
            "beeline_after": after,
            "thrift_log": thrift.log,
            "warehouse": warehouse,
            "texts": service.texts(),
        }
    finally:
        for run in runs:  # still running only when the fixture failed part-way
            if run.popen.poll() is None:
                os.killpg(run.popen.pid, signal.SIGKILL)
        background.shutdown()
        if thrift is not None:
            thrift.stop()
        stopped = service.script("stop")
        shutil.rmtree(folder, ignore_errors=True)
        assert stopped.returncode == 0, stopped.stderr


def csv_rows(output: str) -> list[list[str]]:
    """beeline's csv2 rows; a header line may follow its prompt (`0: jdbc:hive2://...> job,outcome`)."""
    lines = [line.split("> ", 1)[-1] if "jdbc:hive2://" in line else line for line in output.splitlines()]
    return [line.split(",") for line in lines if line and not line.startswith(("WARNING", "SLF4J"))]


def test_the_service_answers_when_start_returns(shared):
    assert shared["answered_at_start"]
    assert shared["status"].returncode == 0, shared["status"].stdout + shared["status"].stderr


def test_the_service_listens_on_loopback_only(shared):
    # Hive 3.1's own entry point took the port on every interface (issue 71 §2).
    assert shared["service_listening"] == {(LOOPBACK, shared["service"].port)}


def test_the_nightly_writes_its_tables_through_the_service(shared):
    code, output, seconds = shared["nightly"]
    print(f"nightly through the service: exit {code} after {seconds:.0f} s")  # shown with pytest -rP
    assert code == 0, output[-3000:]
    assert "check: raw 170 = decoded 170 + quarantined 0" in output
    assert (shared["warehouse"] / f"{DATABASE}.db" / "offset_commits" / "_delta_log").is_dir()


def test_spark_sql_reads_a_table_while_the_nightly_runs(shared):
    finished = shared["spark_sql"]
    assert finished.returncode == 0, finished.stderr[-3000:]
    lines = finished.stdout.splitlines()
    assert int(lines[lines.index("commits") + 1]) > 0, finished.stdout
    assert shared["running_after_spark_sql"], "the nightly had ended: nothing ran side by side"


def test_beeline_reads_through_the_thrift_server_while_the_nightly_runs(shared):
    finished = shared["beeline_during"]
    assert finished.returncode == 0, finished.stdout + finished.stderr[-3000:]
    assert csv_rows(finished.stdout) == [["records"], ["170"]], finished.stdout
    assert shared["running_after_beeline"], "the nightly had ended: nothing ran side by side"


def test_the_thrift_server_sees_what_the_nightly_created_after_it_started(shared):
    finished = shared["beeline_after"]
    assert finished.returncode == 0, finished.stdout + finished.stderr[-3000:]
    rows = csv_rows(finished.stdout)
    runs = rows[1 : rows.index(["rebalances"])]
    # The unreachable run shared the warehouse and the database, and left no row: only the good nightly's.
    assert runs == [["nightly", "succeeded"]], rows
    assert int(rows[rows.index(["rebalances"]) + 1][0]) > 0, rows


def test_an_unreachable_metastore_fails_the_run_in_bounded_time_naming_it(shared):
    code, output, seconds, uri = shared["unreachable"]
    print(f"nightly at {uri}: exit {code} after {seconds:.0f} s")
    assert code == 1, output[-3000:]
    message = [line for line in output.splitlines() if "cannot reach the Hive metastore" in line]
    assert len(message) == 1 and message[0].startswith(f"groupscope: cannot reach the Hive metastore at {uri}: "), (
        output
    )
    assert "Connection refused" in message[0] and "Nothing was written" in message[0]
    assert "Traceback" not in output and not progress_lines(output), output[-3000:]
    assert seconds < FAILURE_BOUND_SECONDS, f"took {seconds:.0f} s"


def test_the_database_password_is_in_no_log_file_or_command_line(shared):
    password = shared["service"].password
    assert f"${{env.{PASSWORD_ENV}}}" in shared["texts"], "the service's site file names the variable"
    assert password not in shared["texts"]
    clients = [shared["nightly"][1], shared["nightly_logs"], shared["unreachable"][1], shared["unreachable_logs"]]
    clients += [
        shared["thrift_log"].read_text(errors="replace"),
        shared["spark_sql"].stdout + shared["spark_sql"].stderr,
    ]
    assert all(password not in text for text in clients)
