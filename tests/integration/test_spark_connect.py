"""The nightly through a real Spark Connect server: the pinned pyspark's own SparkConnectServer, started by
scripts/connect.sh on loopback with Delta and groupscope.DecoderExtension, the job a thin client
(`spark.remote`). Its tables must equal, row by row, the session's classic nightly of the same capture
(tests/background_runs.py's local run: the quickstart capture, which samples/kafka-4.2.1 is a copy of).

One module fixture does the heavy work once: one server JVM; while it starts, runs aimed at a closed port
and at one that never answers (no JVM: they fail before any); then the nightly. The fallback test reuses
the server: it asks it for a function name it lacks, as a server started without the extension would answer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pyspark.sql.types import StructType

from bench.scans import queries
from jobs.connect import REACH_TIMEOUT_S
from tests.background_runs import (
    CLUSTER,
    DATABASE,
    EMPTY_FOR_THE_SAMPLE,
    SPARK_HOME,
    free_port,
    live_log,
    spark_environment,
)
from tests.conftest import REPO_ROOT
from tests.delta_compare import RUN_COLUMNS, canonical, delta_tables
from tests.kill import progress_lines
from tests.small_data import SMALL_DATA_SPARK_CONF, toml_lines

LOOPBACK = "127.0.0.1"
SAMPLE = REPO_ROOT / "samples" / "kafka-4.2.1"
COMMAND_TIMEOUT_SECONDS = 1200  # the nightly through the server at load ~16 took 7 minutes with default settings
FAILURE_BOUND_SECONDS = 60  # a closed port fails at the first connection: no JVM starts on the client's side
FAST_PATH_WARNING = "WARNING: the Spark Connect server"


def environment_file(path: Path, remote: str, warehouse: Path, event_log: Path | None = None) -> Path:
    """The sample into `warehouse` through `remote`, under the reference run's database and cluster names;
    the server started with it writes its event log into `event_log`."""
    settings = {**SMALL_DATA_SPARK_CONF}
    if event_log is not None:
        settings |= {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(event_log)}
    path.write_text(f"""\
[catalog]
database = "{DATABASE}"

[spark]
remote = "{remote}"

[spark.conf]
{toml_lines(settings)}
[storage]
warehouse_dir = {json.dumps(str(warehouse))}

[input]
cluster = "{CLUSTER}"
segment_paths = [{json.dumps(str(SAMPLE / "segments"))}]

[end_offsets]
files = [{json.dumps(str(SAMPLE))}]
""")
    return path


def run(
    command: list[str], env: dict[str, str], timeout: float = COMMAND_TIMEOUT_SECONDS, stderr: Path | None = None
) -> tuple[int, str, float]:
    """The command's exit code, output and seconds; its stderr in the output, or in the file `stderr`."""
    started = time.monotonic()
    with (
        open(stderr, "w") if stderr else contextlib.nullcontext(subprocess.STDOUT) as errors,
        subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=errors, text=True,
            start_new_session=True,
        ) as process,
    ):  # fmt: skip
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            raise AssertionError(f"{command[:2]} still running after {timeout} s:\n{output[-3000:]}") from None
    return process.returncode, output, time.monotonic() - started


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    work = tmp_path_factory.mktemp("connect")
    port = free_port()
    remote = f"sc://{LOOPBACK}:{port}"
    warehouse = work / "warehouse"
    event_log = work / "events"
    event_log.mkdir()
    conf = environment_file(work / "connect.toml", remote, warehouse, event_log)
    env = {
        **spark_environment(work),
        "GROUPSCOPE_CONNECT_PORT": str(port),
        "GROUPSCOPE_CONNECT_DIR": str(work / "server"),
    }
    script = str(REPO_ROOT / "scripts" / "connect.sh")
    nightly_command = [str(REPO_ROOT / "spark-submit.sh"), "nightly", "--conf"]
    closed, silent = f"sc://{LOOPBACK}:{free_port()}", Listener()
    failing = ThreadPoolExecutor(2)
    try:
        # The runs that must fail take no CPU (no JVM on the client's side): they run while the server starts.
        failures = {
            remote_: failing.submit(
                run, [*nightly_command, str(environment_file(work / f"{name}.toml", remote_, warehouse))], env
            )
            for name, remote_ in (("closed", closed), ("silent", silent.remote))
        }
        started = run([script, "start", "--conf", str(conf)], env)
        assert started[0] == 0, f"scripts/connect.sh start failed:\n{started[1]}"
        failed = {remote_: (*future.result(), remote_) for remote_, future in failures.items()}
        # Nothing of theirs on the server's warehouse, and the good run comes after them.
        written_by_failures = sorted(
            path.name for path in warehouse.glob("*") if path.name in (f"{DATABASE}.db", "_groupscope")
        )
        status = run([script, "status"], env)
        pid = status[1].split("(pid ", 1)[-1].split(")", 1)[0]
        server_command = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() if pid.isdigit() else ""
        )
        nightly = run([*nightly_command, str(conf)], env, stderr=work / "nightly.stderr")
        yield {
            "remote": remote,
            "status": status,
            "server_command": server_command,
            "closed": failed[closed],
            "silent": failed[silent.remote],
            "written_by_failures": written_by_failures,
            "nightly": nightly,
            "nightly_stderr": (work / "nightly.stderr").read_text(),
            "event_log": event_log,
            "env": env,
            "warehouse": warehouse,
            "conf": conf,
        }
    finally:
        failing.shutdown()
        silent.close()
        stopped = run([script, "stop"], env)
        assert stopped[0] == 0, stopped[1]


class Listener:
    """A port that accepts connections and never answers (a server hung, or not speaking gRPC)."""

    def __init__(self) -> None:
        self._socket = socket.create_server((LOOPBACK, 0))
        self.remote = f"sc://{LOOPBACK}:{self._socket.getsockname()[1]}"
        self._accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                self._accepted.append(self._socket.accept()[0])

    def close(self) -> None:
        for connection in self._accepted:
            connection.close()
        self._socket.close()


@pytest.fixture(scope="module")
def client(connect):
    """A Spark Connect session of this test process on the server (a client: no JVM here).

    The integration process also holds a classic session (other modules' `spark`): pyspark's common builder
    refuses a remote one beside it (SESSION_ALREADY_EXIST), and its functions build Connect columns whenever
    SPARK_CONNECT_MODE_ENABLED is set. So Connect's own builder makes the client, and the variable is set for
    this module's tests only: the classic tests after it get classic columns again."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
        session = RemoteSparkSession.builder.remote(connect["remote"]).getOrCreate()
        yield session
        session.stop()


def test_the_server_runs_from_the_pinned_pyspark(connect):
    code, output, _ = connect["status"]
    assert code == 0 and "server: running" in output, output
    command = connect["server_command"]
    assert "--class org.apache.spark.sql.connect.service.SparkConnectServer" in command, command
    assert f"{SPARK_HOME}/jars/*" in command, command  # the pinned pyspark's jars, spark-connect_2.13 among them
    assert any((SPARK_HOME / "jars").glob("spark-connect_2.13-*.jar"))
    assert "groupscope.DecoderExtension" in command and "groupscope-decoder.jar" in command, command
    # conf/defaults.toml's settings are the server's too (runtime bloom filters off: docs/connect.md).
    assert "spark.sql.optimizer.runtime.bloomFilter.enabled=false" in command, command


def test_the_nightly_runs_through_the_server_with_the_java_fast_path(connect):
    code, output, seconds = connect["nightly"]
    print(f"nightly through {connect['remote']}: exit {code} after {seconds:.0f} s")
    assert code == 0, output[-5000:] + connect["nightly_stderr"][-3000:]
    assert FAST_PATH_WARNING not in output, output[-5000:]
    assert "check: raw 170 = decoded 170 + quarantined 0" in output, output[-5000:]
    # Its progress on stdout, as a classic run's (spark-submit's Python runner joins a job's stderr to it).
    assert progress_lines(output) and not progress_lines(connect["nightly_stderr"]), connect["nightly_stderr"]


def test_the_servers_event_log_names_each_query_by_the_step_that_ran_it(connect):
    # Spark Connect sends no job description: the run tags its queries, and bench.scans reads the tags.
    steps = {query.step for query in queries(connect["event_log"])}
    assert {"ingest", "decode", "history", "metrics", "views"} <= steps, steps


def test_the_query_the_nightly_suggests_runs_through_the_server(connect):
    # ./spark-sql.sh would exit 75 while the server holds the embedded metastore.
    suggested = [line.split("query: ", 1)[1] for line in connect["nightly"][1].splitlines() if "  query: " in line]
    assert len(suggested) == 1 and not suggested[0].startswith("./spark-sql.sh"), suggested
    code, output, _ = run(["bash", "-c", suggested[0]], connect["env"], timeout=120)
    assert code == 0, output[-3000:]
    assert "|group_id" in output and "|kip848 " in output, output[-3000:]


def test_its_tables_equal_a_classic_nightlys_row_by_row(connect, client, local_nightly):
    assert connect["nightly"][0] == 0, connect["nightly"][1][-3000:]
    classic_warehouse = local_nightly.wait()
    # Both read the same bytes, the reference at the session's live copy of the capture: paths are data
    # (raw_records.source_file), so the reference's are written as this run's before comparing.
    classic_segments = str(live_log(classic_warehouse.parent) / "segments")
    connect_segments = str(SAMPLE / "segments")
    classic_tables = delta_tables(classic_warehouse, DATABASE)
    connect_tables = delta_tables(connect["warehouse"], DATABASE)
    assert connect_tables.keys() == classic_tables.keys()
    assert {"raw_records", "offset_commits", "generations", "rebalances", "group_daily", "lag"} <= classic_tables.keys()
    for name, path in sorted(classic_tables.items()):
        classic_rows, classic_schema = rows_and_schema(client, path)
        classic_rows = [row.replace(classic_segments, connect_segments) for row in classic_rows]
        assert classic_rows or name in EMPTY_FOR_THE_SAMPLE, name
        connect_rows, connect_schema = rows_and_schema(client, connect_tables[name])
        assert connect_rows == classic_rows, name
        # Created by SQL through the server, by delta-spark's builder in the classic run: the same columns.
        assert connect_schema == classic_schema, name


def rows_and_schema(client, path: Path) -> tuple[list[str], StructType]:
    """tests.delta_compare.table_rows, and the table's schema from the same read."""
    table = client.read.format("delta").load(str(path))
    return sorted(repr(canonical(row)) for row in table.drop(*RUN_COLUMNS).collect()), table.schema


@pytest.mark.parametrize(
    ("case", "reason", "bound_seconds"),
    [
        ("closed", "Connection refused", FAILURE_BOUND_SECONDS),
        ("silent", f"no gRPC answer within {REACH_TIMEOUT_S} s", REACH_TIMEOUT_S + FAILURE_BOUND_SECONDS),
    ],
)
def test_an_unreachable_server_fails_the_run_in_bounded_time_naming_it(connect, case, reason, bound_seconds):
    code, output, seconds, remote = connect[case]
    print(f"nightly at {remote} ({case}): exit {code} after {seconds:.0f} s")
    assert code == 1, output[-3000:]
    message = [line for line in output.splitlines() if "cannot reach the Spark Connect server" in line]
    assert message == [
        f"groupscope: cannot reach the Spark Connect server at {remote}: {reason}. Nothing was written; "
        "check spark.remote and that the server runs (scripts/connect.sh status)"
    ], output
    assert "Traceback" not in output and not progress_lines(output), output[-3000:]
    assert seconds < bound_seconds, f"took {seconds:.0f} s"
    # Nothing written (the server's warehouse holds only what the server made at its start), and the good run
    # that followed succeeded (test_the_nightly_runs_through_the_server_with_the_java_fast_path).
    assert connect["written_by_failures"] == [], connect["written_by_failures"]


def test_a_server_without_the_extension_makes_the_run_fall_back_loudly(connect, client, monkeypatch, capsys):
    from jobs import connect as remote
    from transforms import silver

    raw = client.read.format("delta").load(str(connect["warehouse"] / f"{DATABASE}.db" / "raw_records"))
    with_fast_path = sorted(map(repr, silver.decode_raw_records(raw).collect()))
    # The names a server without groupscope.DecoderExtension does not know.
    monkeypatch.setattr(silver, "FAST_PATH_FUNCTION", "groupscope_missing_fast_path")
    monkeypatch.setattr(remote, "VERSIONS_FUNCTION", "groupscope_missing_fast_path_versions")
    remote.register_remote_decoder(client, connect["remote"])
    warning = [line for line in capsys.readouterr().err.splitlines() if FAST_PATH_WARNING in line]
    assert len(warning) == 1 and "spark.sql.extensions lacks groupscope.DecoderExtension" in warning[0], warning
    # The reference decoder alone gives every row the fast path gave.
    assert sorted(map(repr, silver.decode_raw_records(raw).collect())) == with_fast_path
    assert len(with_fast_path) == 170


def test_a_server_with_another_build_of_the_decoder_is_refused(connect, client, monkeypatch):
    from jobs import connect as remote
    from schemas.coordinator_records import OFFSET_COMMIT_VALUE

    claimed = dataclasses.replace(OFFSET_COMMIT_VALUE.fast_path, versions="0-5")
    monkeypatch.setattr(remote, "OFFSET_COMMIT_VALUE", dataclasses.replace(OFFSET_COMMIT_VALUE, fast_path=claimed))
    with pytest.raises(RuntimeError, match=r"for versions 0-4; this groupscope expects .* for 0-5: the server loads"):
        remote.register_remote_decoder(client, connect["remote"])


def test_a_classic_run_on_the_servers_warehouse_is_refused_naming_the_server(connect, tmp_path):
    # The server holds the embedded metastore: a job with its own driver must wait, as beside the Thrift server.
    classic = tmp_path / "classic.toml"
    classic.write_text(connect["conf"].read_text().replace(f'remote = "{connect["remote"]}"', 'remote = ""'))
    code, output, _ = run(
        [str(REPO_ROOT / ".venv" / "bin" / "python"), "-m", "jobs.nightly", "--conf", str(classic)],
        os.environ.copy(),
        timeout=120,
    )
    assert code == 75, output[-3000:]
    assert "another groupscope process is using the embedded metastore" in output, output
    assert "(Spark Connect server, scripts/connect.sh)" in output, output
