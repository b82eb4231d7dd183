"""A member process of one of the lab's own Java clients (lab/streams, lab/share), compiled by its scenario.

The client writes its own view of itself as JSON lines to `member-<name>.jsonl` in the scenario's workdir
(merged into scenario.json by ScenarioLog); the driver reads that view back to wait on it. SIGTERM is a
clean close (each client's shutdown hook leaves its group), SIGKILL a crash. The driver's events are named
`<kind>_started`, `_stopped`, `_killed`, `_killed_after_capture`.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from lab.driver import Lab, ScenarioError


def events_file(lab: Lab, name: str) -> Path:
    return lab.record.workdir / f"member-{name}.jsonl"


class JvmMember:
    def __init__(self, lab: Lab, group: str, name: str, kind: str, command: list[str], **details: object):
        self.lab, self.group, self.name, self.kind = lab, group, name, kind
        self.events_file = events_file(lab, name)
        self.events_file.write_text("")  # the JVM appends; the driver may read before its first line
        with open(lab.record.workdir / f"{name}.log", "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        lab.record.groups.add(group)
        lab.record.event(f"{kind}_started", member=name, group=group, pid=self.process.pid, **details)
        lab.record.keep_running(self.kill_after_capture)  # registered first: one that never gets ready dies too

    def events(self) -> list[dict]:
        """What the client has written so far (complete lines only: the last may still be written)."""
        if self.process.poll() is not None:
            raise ScenarioError(f"{self.kind} {self.name} exited with {self.process.returncode}")
        complete_lines = self.events_file.read_text().split("\n")[:-1]
        return [json.loads(line) for line in complete_lines if line.strip()]

    def last(self, event: str) -> dict:
        """The client's latest event of this kind (empty before the first one)."""
        seen = [report for report in self.events() if report["event"] == event]
        return seen[-1] if seen else {}

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)
        self.lab.record.event(f"{self.kind}_stopped", member=self.name, group=self.group)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)
        self.lab.record.event(f"{self.kind}_killed", member=self.name, group=self.group)

    def kill_after_capture(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
            self.lab.record.event(f"{self.kind}_killed_after_capture", member=self.name, group=self.group)
