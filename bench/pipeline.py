"""The full nightly run at several sizes: time per stage, peak memory, and how time grows with data.

    .venv/bin/python -m bench.pipeline DATA [DATA ...] [--input segments|raw-table] [--work DIR]

Each DATA is an output of bench.generate (e.g. 1M and 10M records). For each, in a fresh warehouse:
its end-offset snapshots and topic ids are loaded as a capture job would have (not timed), then
`./spark-submit.sh nightly` runs exactly as a user runs it (local[2], Spark's default memory
settings: a 1 GiB driver heap, the executors inside the driver JVM in local mode): ingest, decode,
history, metrics. Its process tree (the JVM, the Python driver and workers) is sampled for CPU and
peak resident memory.
Goals (issue 5): 50 M records in <= 15 minutes; 10x the records in <= 12x the time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.harness import REPO_ROOT, ProcessTree, fail, machine_report, mib, print_block

STAGES = ("ingest", "decode", "history", "metrics")
_PROGRESS = re.compile(r"^\[nightly\s+(?P<seconds>[\d.]+)s\] (?P<stage>\w+)")


def stage_seconds(log: str, total: float) -> dict[str, float]:
    """Each stage's duration, from the nightly's progress lines (`[nightly  12.3s] decode`). A stage
    starts at its first line: later ones (`[nightly  24.1s] ingest: 0 new file(s), ...`) report on it."""
    starts: dict[str, float] = {}
    for line in log.splitlines():
        match = _PROGRESS.match(line)
        if match and match["stage"] in STAGES:
            starts.setdefault(match["stage"], float(match["seconds"]))
    ends = [*[starts[stage] for stage in STAGES[1:] if stage in starts], total]
    return {stage: end - starts[stage] for stage, end in zip(STAGES, ends, strict=False) if stage in starts}


def run_nightly(data: Path, work: Path, source: str) -> dict:
    warehouse = work / "warehouse"
    loaded = subprocess.run(
        [sys.executable, "-m", "bench.ops_tables", str(data), str(warehouse)], cwd=REPO_ROOT, capture_output=True
    )
    if loaded.returncode != 0:
        fail(f"loading end offsets failed:\n{loaded.stderr.decode()[-3000:]}")
    inputs = (
        ["--segments", str(data / "segments"), "--raw-table"]
        if source == "segments"
        else ["--segments", "--raw-table", str(data / "raw-table"), "--raw-table-format", "parquet"]
    )
    # An environment of its own: conf/local.toml, the default, would load the quick-start sample's end
    # offsets into the bench cluster too.
    environment = work / "bench.toml"
    environment.write_text("# conf/defaults.toml only; the inputs are given on the command line\n")
    command = [str(REPO_ROOT / "spark-submit.sh"), "nightly", "--conf", str(environment), "--warehouse",
               str(warehouse), "--database", "bench", "--cluster", "bench", *inputs]  # fmt: skip
    log_path = work / "nightly.log"
    with open(log_path, "w") as log, subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log) as process:
        tree = ProcessTree(process.pid)
        with tree.phase("nightly") as phase:
            code = process.wait()
        tree.close()
    log = log_path.read_text()
    result = {"phase": phase, "stages": stage_seconds(log, phase.seconds), "exit_code": code}
    if code != 0:
        result["failure"] = _failure(log, code)
    else:
        result["summary"] = _summary(log)
    return result


def _failure(log: str, code: int) -> str:
    """How far a failed run got (its progress lines) and why it stopped (the first exception lines)."""
    lines = log.splitlines()
    progress = [line for line in lines if _PROGRESS.match(line)]
    causes = [line.strip() for line in lines if re.search(r"(Error|Exception)(:|$)", line) and "\tat " not in line]
    unique_causes = list(dict.fromkeys(causes))[:8]
    return "\n".join([f"the nightly run failed (exit code {code}); its progress:", *progress,
                      "first errors:", *unique_causes])  # fmt: skip


def _summary(log: str) -> str:
    lines = log.splitlines()
    start = next((index for index, line in enumerate(lines) if line.startswith("groupscope nightly:")), len(lines))
    return "\n".join(lines[start : start + 40])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", type=Path, nargs="+", help="bench.generate output directories")
    parser.add_argument("--input", choices=("segments", "raw-table"), default="segments")
    parser.add_argument("--work", type=Path, help="scratch space (default: a temporary directory, removed after)")
    args = parser.parse_args(argv)
    datasets = sorted(
        ((json.loads((path / "manifest.json").read_text())["records"], path.resolve()) for path in args.data),
    )
    print_block("machine", machine_report())
    results, failed = [], False
    for records, data in datasets:
        work = Path(tempfile.mkdtemp(prefix="groupscope-bench-", dir=args.work))
        try:
            result = run_nightly(data, work, args.input)
        finally:
            if (work / "nightly.log").is_file():  # kept beside the scratch directory, for a failed run above all
                shutil.copyfile(work / "nightly.log", work.parent / f"{work.name}-nightly.log")
            shutil.rmtree(work, ignore_errors=True)
        phase = result["phase"]
        outcome = "succeeded" if result["exit_code"] == 0 else f"FAILED (exit code {result['exit_code']})"
        rows = {
            "input": f"{args.input} of {data}",
            "outcome": outcome,
            "log": str(work.parent / f"{work.name}-nightly.log"),
            # A failed run did not process the records: no rate for it.
            "total": f"{phase.seconds:,.1f} s wall"
            + (f" ({records / phase.seconds:,.0f} records/s)" if result["exit_code"] == 0 else " (until it failed)"),
            "cpu": f"{phase.cpu_seconds:,.1f} s",
            **{f"  {stage}": f"{seconds:,.1f} s" for stage, seconds in result["stages"].items()},
            **{f"peak RSS, {kind}": mib(size) for kind, size in sorted(phase.peak_rss.items())},
            "peak RSS, all processes": mib(phase.peak_total),
            "load average at the end": machine_report()["load average (1, 5, 15 min)"],
        }
        print_block(f"nightly, {records:,} records", rows)
        if result["exit_code"] != 0:
            print(result["failure"], flush=True)
            failed = True
            continue  # the other sizes still run; a failed size has no place in the scaling ratio
        print(result["summary"], flush=True)
        results.append((records, phase.seconds))
    for (small, small_seconds), (large, large_seconds) in itertools.pairwise(results):
        growth, slowdown = large / small, large_seconds / small_seconds
        verdict = "met" if slowdown <= growth * 1.2 else "NOT met"
        print_block(
            f"scaling {small:,} -> {large:,} records",
            {"records": f"x{growth:.1f}", "time": f"x{slowdown:.1f}", "goal (time <= 1.2 x records)": verdict},
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
