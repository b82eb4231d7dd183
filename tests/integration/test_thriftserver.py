"""The Spark Thrift JDBC server (scripts/thriftserver.sh) serves the views of a nightly run to `beeline`.

The warehouse is the local nightly run of the quickstart capture (shared with the standalone cluster
test), whose last stage created the views; the server opens the same warehouse and embedded metastore
on a free loopback port, and Hive's own JDBC client, `beeline` from the pyspark installation, run as
docs/sql.md runs it (scripts/beeline.sh, from a shell without the venv on PATH), asks it when each group
rebalanced. The answer must be the scenario's own account of its rebalances.
"""

from __future__ import annotations

import csv
import json
import os
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

BEELINE_TIMEOUT_SECONDS = 300
TIMELINE_COLUMNS = ("group_id", "generation", "member_count_after")


def accepts_connections(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((LOOPBACK, port)) == 0


def test_beeline_reads_the_rebalance_timeline_from_the_thrift_server(local_nightly, tmp_path):
    warehouse = local_nightly.wait()
    environment = spark_environment(tmp_path)  # the nightly run created the views

    port = free_port()
    server_command = [
        str(REPO_ROOT / "scripts" / "thriftserver.sh"),
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
        query = f"SELECT {', '.join(TIMELINE_COLUMNS)} FROM rebalance_timeline ORDER BY group_id, completed_at"
        venv_bin = str(REPO_ROOT / ".venv" / "bin")
        shell = {key: value for key, value in environment.items() if key != "SPARK_HOME"}
        shell["PATH"] = os.pathsep.join(entry for entry in environment["PATH"].split(os.pathsep) if entry != venv_bin)
        beeline = subprocess.run(
            [
                str(REPO_ROOT / "scripts" / "beeline.sh"),
                "-u",
                f"jdbc:hive2://{LOOPBACK}:{port}/{DATABASE}",
                "-n",
                "groupscope",
                "--silent=true",
                "--outputformat=csv2",
                "-e",
                query,
            ],
            env=shell,
            capture_output=True,
            text=True,
            timeout=BEELINE_TIMEOUT_SECONDS,
        )
    finally:
        server.stop()

    assert beeline.returncode == 0, beeline.stdout + beeline.stderr
    lines = beeline.stdout.splitlines()
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
