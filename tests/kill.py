"""A job run killed with SIGKILL, process group and all, when its log reaches a given progress line."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

_PROGRESS = re.compile(r"^\[nightly\s+[\d.]+s\] ", re.MULTILINE)
_POLL_SECONDS = 0.2


def progress_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if _PROGRESS.match(line)]


def run_until_progress_line(
    command: list[str], log: Path, count: int, then_seconds: float = 0.0, env: dict[str, str] | None = None
) -> str:
    """Runs `command` until its log holds `count` progress lines and `then_seconds` more have passed (a
    moment inside the next step), then SIGKILLs its process group. Returns the last progress line."""
    with open(log, "w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    while process.poll() is None and len(progress_lines(log.read_text())) < count:
        time.sleep(_POLL_SECONDS)  # polling the log for the line; the line, not the time, decides
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=then_seconds)
    if process.poll() is not None:
        return f"ended by itself ({process.returncode}) before progress line {count}"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    while True:  # until no process of the group is left (a Python worker may outlive the JVM briefly)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return progress_lines(log.read_text())[-1]
        time.sleep(_POLL_SECONDS)
