"""The Spark Thrift JDBC server (scripts/thriftserver.sh) serves the views of a nightly run to `beeline`.

The warehouse is the local nightly run of the quickstart capture (shared with the standalone cluster
test), whose last stage created the views; the server opens the same warehouse and embedded metastore
on a free loopback port, and Hive's own JDBC client, `beeline` from the pyspark installation, run as
docs/sql.md runs it (scripts/beeline.sh, from a shell without the venv on PATH), asks it when each group
rebalanced. The answer must be the scenario's own account of its rebalances.

The server runs with its password check on ([thriftserver] authentication = "password", issue 71 §2): a
user and password made up for the test, in the server's environment only, and beeline given the password
through a pipe, as docs/sql.md says. The right pair reads the view; a wrong password is refused.
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import socket
import subprocess
from collections import defaultdict

from tests.background_runs import (
    CAPTURE,
    DATABASE,
    LOOPBACK,
    Process,
    free_port,
    spark_environment,
    wait_until,
)
from tests.conftest import REPO_ROOT
from tests.listening import group_command_lines

BEELINE_TIMEOUT_SECONDS = 300
TIMELINE_COLUMNS = ("group_id", "generation", "member_count_after")
USER_ENV, PASSWORD_ENV = "GROUPSCOPE_THRIFT_USER", "GROUPSCOPE_THRIFT_PASSWORD"
# docs/sql.md's way to give beeline the password: a pipe, named /dev/fd/N on its command line.
BEELINE_WITH_PASSWORD = 'exec "$0" "$@" -n "$GROUPSCOPE_THRIFT_USER" -w <(printf %s "$GROUPSCOPE_THRIFT_PASSWORD")'


def accepts_connections(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((LOOPBACK, port)) == 0


def run_beeline(url: str, query: str, environment: dict[str, str], password: str) -> subprocess.CompletedProcess:
    """scripts/beeline.sh as docs/sql.md runs it, from a shell without the venv on PATH, the password in a pipe."""
    venv_bin = str(REPO_ROOT / ".venv" / "bin")
    shell = {key: value for key, value in environment.items() if key != "SPARK_HOME"}
    shell["PATH"] = os.pathsep.join(entry for entry in environment["PATH"].split(os.pathsep) if entry != venv_bin)
    shell[PASSWORD_ENV] = password
    arguments = ["-u", url, "--silent=true", "--outputformat=csv2", "-e", query]
    return subprocess.run(
        ["bash", "-c", BEELINE_WITH_PASSWORD, str(REPO_ROOT / "scripts" / "beeline.sh"), *arguments],
        env=shell,
        capture_output=True,
        text=True,
        timeout=BEELINE_TIMEOUT_SECONDS,
    )


def test_beeline_reads_the_rebalance_timeline_from_the_thrift_server(local_nightly, tmp_path):
    warehouse = local_nightly.wait()
    password = secrets.token_urlsafe(24)
    environment = {**spark_environment(tmp_path), USER_ENV: "analyst", PASSWORD_ENV: password}
    password_check = tmp_path / "thriftserver.toml"
    password_check.write_text('[thriftserver]\nauthentication = "password"\n')

    port = free_port()
    server_command = [
        str(REPO_ROOT / "scripts" / "thriftserver.sh"),
        "--conf",
        str(password_check),
        "--warehouse",
        str(warehouse),
        "--port",
        str(port),
    ]
    server = Process.start(
        "thrift server",
        [*server_command, "--", "--conf", "spark.ui.enabled=false"],
        tmp_path / "server.log",
        environment,
    )
    try:
        wait_until(lambda: accepts_connections(port), f"the Thrift server listens on port {port}", server)
        server_command_lines = group_command_lines(server.popen.pid).values()
        query = f"SELECT {', '.join(TIMELINE_COLUMNS)} FROM rebalance_timeline ORDER BY group_id, completed_at"
        url = f"jdbc:hive2://{LOOPBACK}:{port}/{DATABASE}"
        refused = run_beeline(url, query, environment, f"wrong-{secrets.token_urlsafe(8)}")
        answered = run_beeline(url, query, environment, password)
    finally:
        server.stop()

    # Refused in one line saying why, before the query (its column names never printed).
    refusal = [line for line in refused.stdout.splitlines() + refused.stderr.splitlines() if line.startswith("Error:")]
    assert refused.returncode != 0 and "group_id" not in refused.stdout, refused.stdout + refused.stderr
    assert len(refusal) == 1 and "Error validating the login" in refusal[0], refused.stdout + refused.stderr
    # The password check was on the server's command line by name; the secret was on none, nor in any output.
    server_jvm = [line for line in server_command_lines if "HiveThriftServer2" in line and "/bin/java " in line]
    assert server_jvm and "hive.server2.authentication=CUSTOM" in server_jvm[0], server_command_lines
    assert f"groupscope.thriftserver.password_env={PASSWORD_ENV}" in server_jvm[0]
    assert not [line for line in server_command_lines if password in line]
    outputs = (server.log.read_text(errors="replace"), answered.stdout + answered.stderr, refused.stderr)
    assert all(password not in output for output in outputs)

    assert answered.returncode == 0, answered.stdout + answered.stderr
    lines = answered.stdout.splitlines()
    header = next(index for index, line in enumerate(lines) if line.endswith(",".join(TIMELINE_COLUMNS)))
    served = defaultdict(list)
    for group, generation, members in csv.reader(lines[header + 1 :]):
        served[group].append((int(generation), int(members)))
    expected = defaultdict(list)
    for entry in json.loads((CAPTURE / "scenario.json").read_text())["expected"]:
        if {"generation", "members"} <= entry.keys() and "replaced_instance" not in entry:
            expected[entry["group"]].append((entry["generation"], entry["members"]))
    followed_groups = [group for group, rebalances in expected.items() if rebalances[0][0] == 1]
    assert followed_groups, "the scenario follows no group from its first member: this test would prove nothing"
    for group in followed_groups:
        assert served[group] == expected[group], group
