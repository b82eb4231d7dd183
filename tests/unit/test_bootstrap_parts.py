"""Each command installs what it needs, and no more (issue 71 §3): every launcher is run for real with
GROUPSCOPE_BOOTSTRAP=plan, so scripts/bootstrap.sh prints the steps of the part the launcher asked for,
installs nothing and stops it (exit 3) before any JVM, server or network. The steps are named whatever
this machine already has: a fresh clone plans the same ones."""

from __future__ import annotations

import os
import subprocess

from lab.broker import free_port
from tests.conftest import REPO_ROOT

EXIT_PLANNED = 3
JOB = ["venv", "jars:spark", "jars:s3", "decoder", "thriftserver", "jars:assignors", "assignor-replay", "report-charts"]
LAB = ["jars:kafka-4", "jars:kafka-3.9", "jars:kafka-4.3", "jars:kafka-4.4", "jars:kafka-streams"]
LAB += ["jars:kafka-streams-4.3", "jars:kafka-streams-4.4"]
METASTORE = ["venv", "jars:metastore", "postgresql"]


def planned_steps(command: list[str], environment: dict[str, str] | None = None) -> list[str]:
    """The steps that `command`'s bootstrap would take, in order."""
    run = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env={**os.environ, **(environment or {}), "GROUPSCOPE_BOOTSTRAP": "plan"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == EXIT_PLANNED, f"{command} exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    lines = run.stdout.splitlines()
    assert lines[0].startswith("bootstrap plan: "), run.stdout
    steps = [line.strip().rsplit(": ", 1) for line in lines[1:]]
    assert all(state in ("ready", "to install") for _, state in steps), run.stdout
    return [step for step, _ in steps]


def test_the_job_launchers_ask_for_the_venv_and_the_spark_jars_only():
    for launcher in ("spark-submit.sh", "spark-sql.sh", "scripts/thriftserver.sh"):
        assert planned_steps([f"./{launcher}"]) == JOB, launcher


def test_the_connect_server_asks_for_the_job_part(tmp_path):
    environment = {"GROUPSCOPE_CONNECT_PORT": str(free_port()), "GROUPSCOPE_CONNECT_DIR": str(tmp_path)}
    assert planned_steps(["scripts/connect.sh", "start"], environment) == JOB


def test_s3proxy_asks_for_its_own_jar_and_nothing_else(tmp_path):
    environment = {
        "GROUPSCOPE_S3PROXY_DIR": str(tmp_path),
        "GROUPSCOPE_S3PROXY_PORT": str(free_port()),
        "GROUPSCOPE_S3_ACCESS_KEY": "planning-only",
        "GROUPSCOPE_S3_SECRET_KEY": "planning-only",
    }
    assert planned_steps(["scripts/s3proxy.sh", "start"], environment) == ["jars:s3proxy"]


def test_the_metastore_asks_for_its_jars_and_postgresql(tmp_path):
    environment = {
        "GROUPSCOPE_METASTORE_DIR": str(tmp_path),
        "GROUPSCOPE_METASTORE_PORT": str(free_port()),
        "GROUPSCOPE_METASTORE_DB_PASSWORD": "planning-only",
    }
    assert planned_steps(["scripts/metastore.sh", "start"], environment) == METASTORE


def test_the_suite_installs_every_part_and_every_jar_set_on_a_bare_machine():
    steps = planned_steps(["./test.sh"])
    assert len(steps) == len(set(steps))
    every_part = {*JOB, *LAB, *METASTORE, "jars:s3proxy", "jars:s3proxy-2.6", "chromium"}
    assert set(steps) == every_part
    jar_sets = {f"jars:{pom.parent.name}" for pom in (REPO_ROOT / "jvm").glob("*/pom.xml")}
    assert jar_sets <= set(steps), "a jar set under jvm/ that ./test.sh (and so CI) would never fetch"


def test_the_lab_part_is_the_venv_and_the_kafka_lines():
    assert planned_steps(["scripts/bootstrap.sh", "lab"]) == ["venv", *LAB]


def test_a_part_that_does_not_exist_is_a_usage_error():
    run = subprocess.run(["scripts/bootstrap.sh", "everything"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert run.returncode == 2
    assert "no part 'everything'" in run.stderr
