"""Only jobs are jobs: the launcher lists them, refuses anything else, and checks a command line
before any JVM starts."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

from jobs import JOBS
from jobs.config import REPO_ROOT


def _launcher(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(REPO_ROOT / "spark-submit.sh"), *argv], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )


def test_every_listed_job_has_a_main_and_every_module_with_one_is_listed_or_a_tool():
    for job in JOBS:
        assert callable(importlib.import_module(f"jobs.{job}").main), job
    runnable = {path.stem for path in (REPO_ROOT / "jobs").glob("*.py") if "\ndef main(" in path.read_text()}
    # Tools without Spark: python -m jobs.dump, python -m jobs, and python -m jobs.sql_launch (the SQL
    # launchers' settings, run by spark-sql.sh and scripts/thriftserver.sh).
    assert runnable - set(JOBS) == {"dump", "__main__", "sql_launch"}


def test_the_usage_lists_each_job_with_its_line():
    result = subprocess.run([sys.executable, "-m", "jobs"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode == 2
    for job, summary in JOBS.items():
        assert f"  {job:<11}  {summary}" in result.stderr
    assert "75 refused" in result.stderr


def test_a_module_that_is_not_a_job_cannot_be_submitted():
    result = _launcher("locks")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("groupscope: 'locks' is not a job; the jobs are: nightly")
    assert "Spark" not in result.stderr and "Traceback" not in result.stderr


def test_a_wrong_path_is_refused_by_the_launcher_in_one_line(tmp_path: Path):
    result = _launcher("nightly", "--segments", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"groupscope: --segments / input.segment_paths: {tmp_path / 'nope'} does not exist; "
        "give an existing file or directory"
    )
    assert "Traceback" not in result.stderr


def test_help_lists_the_jobs_own_options_without_a_jvm():
    forget, nightly = _launcher("forget", "--help"), _launcher("nightly", "--help")
    assert forget.returncode == nightly.returncode == 0, (forget.stderr, nightly.stderr)
    assert forget.stdout.startswith("usage: ./spark-submit.sh forget [-h] [--source-file PATH [PATH ...]]")
    assert "[--segments" not in forget.stdout and "[--verbose]" in forget.stdout
    assert "[--verbose]" in nightly.stdout and "[--segments" in nightly.stdout
    assert "Spark" not in forget.stderr + nightly.stderr  # spark-submit never started


def test_jobs_never_import_each_other():
    """A job is its step behind run_job; steps shared by several jobs live in jobs/steps."""
    for job in JOBS:
        source = (REPO_ROOT / "jobs" / f"{job}.py").read_text()
        imported = set(re.findall(r"^(?:from|import) jobs\.(\w+)", source, flags=re.MULTILINE))
        assert not imported & set(JOBS), (job, imported & set(JOBS))
