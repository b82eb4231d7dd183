"""Shared fixtures: one SparkSession for the whole run, built by the jobs' own factory."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# Real __consumer_offsets data from public repositories (a copy of shared/fixtures/public; see MANIFEST.tsv).
PUBLIC_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "public"


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark_config(warehouse):
    from jobs.config import load_config

    return load_config(
        overrides={
            "storage": {"warehouse_dir": str(warehouse)},
            "catalog": {"database": "groupscope_test"},
            "spark": {
                "conf": {
                    "spark.sql.shuffle.partitions": "2",
                    "spark.ui.enabled": "false",
                    "spark.default.parallelism": "2",
                }
            },
            "input": {"cluster": "test", "segment_paths": []},
        }
    )


@pytest.fixture(scope="session")
def spark(spark_config):
    from jobs.session import build_session

    session = build_session(spark_config, "groupscope-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def lab(spark):
    """Every lab capture's tables, in memory (see tests/lab_tables.py)."""
    from tests.lab_tables import all_captures, build_lab_tables

    return build_lab_tables(spark, all_captures())


@dataclass
class NightlyProcess:
    returncode: int
    output: str  # stdout and stderr: under spark-submit the Python driver's stderr reaches the JVM's stdout


@dataclass
class ContendedNightly:
    warehouse: Path
    runs: list[NightlyProcess]

    @property
    def winner(self) -> NightlyProcess:
        return next(run for run in self.runs if run.returncode == 0)


def nightly_command(warehouse: Path) -> list[str]:
    """The quick start's nightly (the sample and its end offsets) into a warehouse of its own."""
    return [str(REPO_ROOT / "spark-submit.sh"), "nightly", "--warehouse", str(warehouse)]


@pytest.fixture(scope="session")
def contended_nightly(tmp_path_factory) -> ContendedNightly:
    """Two `spark-submit.sh nightly` processes started together on one warehouse. The lock tests check
    that one ran and one was refused; the crash test compares its tables with the winner's."""
    workdir = tmp_path_factory.mktemp("contended")
    logs = [workdir / f"nightly-{index}.log" for index in range(2)]
    processes = []
    for log in logs:
        with open(log, "w") as output:
            command = nightly_command(workdir / "warehouse")
            processes.append(subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT))
    runs = [
        NightlyProcess(process.wait(timeout=900), log.read_text()) for process, log in zip(processes, logs, strict=True)
    ]
    return ContendedNightly(workdir / "warehouse", runs)
