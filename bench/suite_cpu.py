"""CPU seconds each test costs the machine, as a pytest plugin: `.venv/bin/python -m pytest -p bench.suite_cpu ...`.

The suite's wall times say little on two cores: its two processes, their Spark drivers, the background
nightlies, brokers and servers all share them, so a test's duration is mostly the others' load. The CPU
the test's own process tree spends is steadier: at each test's start and end this sums user and system
time over the pytest process and its live descendants, with what they reaped (a finished child's time
moves into its parent's). A process that left the tree (a daemon re-parented to init) is not counted,
and a background run started for later tests (tests/conftest.py) is charged to the tests it runs beside.
Setup and teardown are charged to their test: a module's fixture to its first test.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
_SHOWN = 30


def tree_cpu_seconds(root: int) -> float:
    """User + system seconds of `root` and its live descendants, including children they reaped."""
    parents, spent = {}, {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # the process ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        spent[pid] = sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    children = defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        total += spent.get(pid, 0)
        pending.extend(children[pid])
    return total / _TICKS_PER_SECOND


class SuiteCpu:
    def __init__(self) -> None:
        self.per_test: dict[str, tuple[float, float]] = {}
        self.started = (time.monotonic(), tree_cpu_seconds(os.getpid()))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        wall, cpu = time.monotonic(), tree_cpu_seconds(os.getpid())
        yield
        self.per_test[item.nodeid] = (tree_cpu_seconds(os.getpid()) - cpu, time.monotonic() - wall)

    def pytest_terminal_summary(self, terminalreporter):
        wall = time.monotonic() - self.started[0]
        cpu = tree_cpu_seconds(os.getpid()) - self.started[1]
        per_module: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for nodeid, (test_cpu, test_wall) in self.per_test.items():
            module = per_module[nodeid.split("::")[0]]
            module[0] += test_cpu
            module[1] += test_wall
            module[2] += 1
        write = terminalreporter.write_line
        write("")
        write(f"suite_cpu: {cpu:,.0f} CPU s in {wall:,.0f} s wall ({cpu / max(wall, 1e-9):.2f} cores busy on average)")
        write(f"suite_cpu: modules by CPU seconds (tests, CPU s, wall s), the first {_SHOWN}:")
        for name, (module_cpu, module_wall, tests) in sorted(per_module.items(), key=lambda item: -item[1][0])[:_SHOWN]:
            write(f"  {module_cpu:8.1f} {module_wall:8.1f}  {tests:4d}  {name}")
        write(f"suite_cpu: tests by CPU seconds (CPU s, wall s), the first {_SHOWN}:")
        for nodeid, (test_cpu, test_wall) in sorted(self.per_test.items(), key=lambda item: -item[1][0])[:_SHOWN]:
            write(f"  {test_cpu:8.1f} {test_wall:8.1f}  {nodeid}")


def pytest_configure(config):
    config.pluginmanager.register(SuiteCpu(), "suite_cpu_measure")
