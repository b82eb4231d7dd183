"""The SQL shells on an s3a:// warehouse, for tests/integration/test_s3.py: `./spark-sql.sh -e` and beeline
against `scripts/thriftserver.sh`, each opening a warehouse a nightly wrote into s3proxy, with that
nightly's environment file and the key pair in the environment only.

While a launcher runs, the command line of every process in its process group (what `ps` shows: the
launcher scripts, jobs.sql_launch, Spark's launcher and the JVM) and the addresses they listen on are
read from /proc at short intervals, so the test can check that no secret was on any of them, that the
JVM's own was among them, and where spark-sql's driver listened.
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.background_runs import LOOPBACK, Process, spark_environment, wait_until
from tests.conftest import REPO_ROOT
from tests.integration.test_thriftserver import accepts_connections
from tests.listening import group_command_lines, listening_addresses
from tests.s3_runs import free_port

SAMPLE_EVERY_SECONDS = 0.25
SHELL_TIMEOUT_SECONDS = 600  # spark-sql on s3proxy took 75 s at load 7; a JVM start is slower under a full suite


@dataclass
class Watched:
    """A launcher started in a process group of its own, whose group's command lines are gathered until it ends."""

    process: Process
    command_lines: set[str] = field(default_factory=set)
    listening: set[tuple[str, int]] = field(default_factory=set)  # (host, port) its processes listened on

    @classmethod
    def start(cls, name: str, command: list[str], log: Path, env: dict[str, str]) -> Watched:
        watched = cls(Process.start(name, command, log, env))
        threading.Thread(target=watched._gather, daemon=True).start()
        return watched

    def _gather(self) -> None:
        while self.process.popen.poll() is None:
            processes = group_command_lines(self.process.popen.pid)
            self.command_lines |= set(processes.values())
            self.listening |= {address for pid in processes for address in listening_addresses(pid)}
            time.sleep(SAMPLE_EVERY_SECONDS)  # sampling `ps`; nothing waits on it

    def finish(self) -> tuple[int, str]:
        """Exit code and output (stdout and stderr)."""
        code = self.process.popen.wait(SHELL_TIMEOUT_SECONDS)
        return code, self.process.log.read_text(errors="replace")

    def jvm_command_line(self, main_class: str) -> str:
        """The JVM's own command line, as seen while it ran ("" if it never was)."""
        return next((line for line in self.command_lines if "/bin/java " in line and main_class in line), "")


@dataclass
class ShellReads:
    spark_sql: Watched
    spark_sql_code: int
    spark_sql_output: str
    thrift: Watched
    beeline: subprocess.CompletedProcess
    seconds: float


def read_with_the_shells(
    work: Path, spark_sql_conf: Path, thrift_conf: Path, query: str, credentials: dict
) -> ShellReads:
    """`./spark-sql.sh --conf spark_sql_conf -e query`, and beside it (another warehouse: each embedded
    metastore serves one process) the Thrift server with `thrift_conf` answering beeline the same query.
    beeline itself gets no credentials: only the server reads the bucket."""
    began = time.monotonic()
    environment = spark_environment(work)
    # Without the tests' SPARK_LOCAL_IP: the addresses spark-sql's driver listens on are the launcher's choice.
    spark_sql_environment = {key: value for key, value in environment.items() if key != "SPARK_LOCAL_IP"}
    spark_sql = Watched.start(
        "spark-sql",
        [str(REPO_ROOT / "spark-sql.sh"), "--conf", str(spark_sql_conf), "-e", query],
        work / "spark-sql.out",
        {**spark_sql_environment, **credentials},
    )
    port = free_port()
    thrift_command = [str(REPO_ROOT / "scripts" / "thriftserver.sh"), "--conf", str(thrift_conf), "--port", str(port)]
    thrift = Watched.start("thrift server", thrift_command, work / "thrift.out", {**environment, **credentials})
    try:
        wait_until(lambda: accepts_connections(port), f"the Thrift server listens on {port}", thrift.process)
        beeline = subprocess.run(
            [str(REPO_ROOT / ".venv" / "bin" / "beeline"), "-u", f"jdbc:hive2://{LOOPBACK}:{port}/groupscope",
             "-n", "groupscope", "--silent=true", "--outputformat=tsv2", "-e", query],
            env=environment, capture_output=True, text=True, timeout=SHELL_TIMEOUT_SECONDS,
        )  # fmt: skip
    finally:
        thrift.process.stop()
    code, output = spark_sql.finish()
    return ShellReads(spark_sql, code, output, thrift, beeline, time.monotonic() - began)


def printed_rows(output: str, header: str) -> list[str]:
    """The rows a shell printed after the column header `header` (beeline puts its prompt before it)."""
    lines = [line.strip() for line in output.splitlines()]
    start = next(index for index, line in enumerate(lines) if line.endswith(header))
    return [line for line in lines[start + 1 :] if line.startswith("{")]
