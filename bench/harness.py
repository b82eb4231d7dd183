"""What the benchmark scripts share: the machine report, and phases timed with CPU and peak memory.

A phase is measured three ways, because the machine may be shared: wall time, CPU seconds of the
process tree (the benchmark's own process and everything it started: the Spark JVM, Python
workers, a DumpLogSegments JVM), and peak resident memory per kind of process (sampled from /proc).
On a busy machine wall time stretches while CPU seconds stay close to the work done.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from jobs.config import Config, load_config

REPO_ROOT = Path(__file__).resolve().parent.parent
ESTATE_CLUSTER, ESTATE_DATABASE = "bench", "bench"  # bench.generate's default --cluster
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def machine_report() -> dict[str, str]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in _lines("/proc/cpuinfo") if line.startswith("model name")), "?"
    )
    memory_kb = next(int(line.split()[1]) for line in _lines("/proc/meminfo") if line.startswith("MemTotal"))
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    kafka = sorted(path.name for path in (REPO_ROOT / "jvm" / "kafka-4" / "jars").glob("kafka-tools-*.jar"))
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": str(os.cpu_count()),
        "cpu": cpu,
        "memory": f"{memory_kb / 1024 / 1024:.1f} GiB",
        "load average (1, 5, 15 min)": ", ".join(f"{load:.2f}" for load in os.getloadavg()),
        "os": platform.platform(),
        "java": java[0] if java else "?",
        "python": platform.python_version(),
        "pyspark": metadata.version("pyspark"),
        "delta-spark": metadata.version("delta-spark"),
        "kafka tools": kafka[0].removesuffix(".jar") if kafka else "?",
    }


def estate_config(data: Path, warehouse: Path) -> Config:
    """A job's configuration reading a bench.generate output's segment files into `warehouse`."""
    return load_config(
        overrides={
            "storage": {"warehouse_dir": str(warehouse)},
            "catalog": {"database": ESTATE_DATABASE},
            "input": {"cluster": ESTATE_CLUSTER, "segment_paths": [str(data / "segments")], "raw_table_paths": []},
        }
    )


def print_block(title: str, rows: dict[str, object]) -> None:
    width = max(map(len, rows), default=0)
    print(f"\n{title}", flush=True)
    for name, value in rows.items():
        print(f"  {name:<{width}}  {value}", flush=True)


def _lines(path: str) -> list[str]:
    return Path(path).read_text().splitlines()


@dataclass
class ProcessSample:
    cpu_seconds: float
    rss_bytes: int
    kind: str


def _read_process(pid: int) -> tuple[int, ProcessSample] | None:
    """(parent pid, sample), or None for a process that is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    parent, cpu = int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS
    return parent, ProcessSample(cpu, int(fields[21]) * _PAGE, _kind(command))


def _kind(command: str) -> str:
    if "java" in command.split(" ", 1)[0]:
        return "jvm"
    if "pyspark.daemon" in command or "pyspark/daemon" in command or "pyspark.worker" in command:
        return "python workers"
    return "python driver" if "python" in command else "other"


@dataclass
class Phase:
    name: str
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    peak_rss: dict[str, int] = field(default_factory=dict)  # by kind, summed over its processes

    @property
    def peak_total(self) -> int:
        return sum(self.peak_rss.values())


class ProcessTree:
    """Samples a process and all its descendants (every 0.2 s) while phases run."""

    def __init__(self, root_pid: int | None = None, interval: float = 0.2) -> None:
        self.root_pid = root_pid or os.getpid()
        self.interval = interval
        self._cpu_by_pid: dict[int, float] = {}  # the last CPU seen of every process, alive or gone
        self._current: Phase | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> dict[int, ProcessSample]:
        parents, samples = {}, {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (read := _read_process(int(entry))) is not None:
                parents[int(entry)], samples[int(entry)] = read
        members, frontier = {self.root_pid}, [self.root_pid]
        children: dict[int, list[int]] = {}
        for pid, parent in parents.items():
            children.setdefault(parent, []).append(pid)
        while frontier:
            for child in children.get(frontier.pop(), []):
                members.add(child)
                frontier.append(child)
        return {pid: samples[pid] for pid in members if pid in samples}

    def sample(self) -> None:
        tree = self._tree()
        with self._lock:
            for pid, sample in tree.items():
                self._cpu_by_pid[pid] = sample.cpu_seconds
            if self._current is not None:
                by_kind: dict[str, int] = {}
                for sample in tree.values():
                    by_kind[sample.kind] = by_kind.get(sample.kind, 0) + sample.rss_bytes
                for kind, rss in by_kind.items():
                    self._current.peak_rss[kind] = max(self._current.peak_rss.get(kind, 0), rss)

    def cpu_seconds(self) -> float:
        self.sample()
        with self._lock:
            return sum(self._cpu_by_pid.values())

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    @contextmanager
    def phase(self, name: str) -> Iterator[Phase]:
        measured = Phase(name)
        cpu_before, started = self.cpu_seconds(), time.monotonic()
        with self._lock:
            self._current = measured
        try:
            yield measured
        finally:
            measured.seconds = time.monotonic() - started
            measured.cpu_seconds = self.cpu_seconds() - cpu_before
            with self._lock:
                self._current = None

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def mib(size: int) -> str:
    return f"{size / 1024 / 1024:,.0f} MiB"


def phase_rows(phase: Phase, records: int) -> dict[str, str]:
    rows = {
        "wall": f"{phase.seconds:,.1f} s  ({records / phase.seconds:,.0f} records/s)",
        "cpu": f"{phase.cpu_seconds:,.1f} s  ({records / max(phase.cpu_seconds, 1e-9):,.0f} records per CPU-second)",
    }
    for kind, size in sorted(phase.peak_rss.items()):
        rows[f"peak RSS, {kind}"] = mib(size)
    return rows


def fail(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(2)
