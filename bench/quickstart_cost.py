"""The quick start's price against the least a Spark job can cost: issue 72's first target.

    .venv/bin/python -m bench.quickstart_cost [--rounds 2] [--work DIR]

Each round runs two processes, in turn, each into a fresh warehouse with the shipped settings
(conf/defaults.toml and the sample's conf/local.toml inputs):

  one_table  a job that starts the same session, reads the sample's segment files (ingest's reader),
             writes them as one Delta table in the embedded metastore and reads it back
  nightly    the quick start's job (`python -m jobs.nightly`) on the same sample

and then the nightly once more on its warehouse (`nothing_new`: the same night again). It prints each
one's wall seconds, the first nightly's Spark jobs per step from its event log, and the medians:
nightly / one_table (the goal: at most 2), the history step's Spark jobs (at most 30) and
nothing_new / nightly.
The order alternates between rounds, so neither is always the one that runs on a warmer page cache.
Both run in a Python process of their own (not through spark-submit.sh), the same launch either way.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.event_log import event_lines, read_event_log, step_rows, step_starts
from bench.harness import machine_report, print_block
from jobs.config import REPO_ROOT

PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
SAMPLE = REPO_ROOT / "samples" / "kafka-4.2.1"
JOB_GOAL, HISTORY_JOBS_GOAL = 2.0, 30


def _conf(work: Path) -> Path:
    """An environment file like conf/local.toml, into `work`, with Spark's event log on."""
    (work / "events").mkdir(parents=True, exist_ok=True)
    conf = work / "bench.toml"
    conf.write_text(
        f'[storage]\nwarehouse_dir = "{work / "warehouse"}"\n'
        f'[spark.conf]\n"spark.eventLog.enabled" = "true"\n"spark.eventLog.dir" = "file://{work / "events"}"\n'
        f'[input]\ncluster = "sample"\nsegment_paths = ["{SAMPLE / "segments"}"]\n'
        f'[end_offsets]\nfiles = ["{SAMPLE}"]\n'
    )
    return conf


def _run(kind: str, work: Path, conf: Path) -> tuple[float, str]:
    """Runs one process; returns its wall seconds and its console output (progress lines are on stderr)."""
    module = "bench.one_table_job" if kind == "one_table" else "jobs.nightly"
    started = time.monotonic()
    done = subprocess.run(
        [str(PYTHON), "-m", module, "--conf", str(conf)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"quickstart_cost: {kind} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    console = done.stdout + done.stderr
    (work / f"{kind}.console").write_text(console)
    return wall, console


def _jobs_by_step(work: Path, console: str) -> dict[str, int]:
    """The first nightly's Spark jobs per step, from its event log and its progress lines."""
    logs = sorted((work / "events").iterdir(), key=lambda path: path.stat().st_mtime)
    log = read_event_log(event_lines(logs[0]))
    starts = step_starts(console)
    ends = [float(line.split("s]")[0].split()[-1]) for line in console.splitlines() if line.endswith("] succeeded")]
    started_ms = log.first_job_at_ms - int(starts[0][1] * 1000)
    rows = step_rows(log, starts, ends[-1] if ends else starts[-1][1] + 3600, started_ms)
    return {"all": len(log.jobs), **{row["step"]: row["jobs"] for row in rows}}


def _spread(times: list[float]) -> str:
    return f"{statistics.median(times):.1f} s (min {min(times):.1f}, max {max(times):.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, help="where the warehouses go (default: a temporary directory)")
    args = parser.parse_args(argv)
    print_block("machine", machine_report())
    root = args.work or Path(tempfile.mkdtemp(prefix="groupscope-quickstart-cost-"))
    walls: dict[str, list[float]] = {"one_table": [], "nightly": [], "nothing_new": []}
    history_jobs, all_jobs = [], []
    for round_number in range(args.rounds):
        order = ("one_table", "nightly") if round_number % 2 == 0 else ("nightly", "one_table")
        for kind in order:
            work = root / f"round{round_number}-{kind}"
            conf = _conf(work)
            wall, console = _run(kind, work, conf)
            walls[kind].append(wall)
            line = f"round {round_number + 1}  {kind:11} {wall:7.1f} s"
            if kind == "nightly":
                jobs = _jobs_by_step(work, console)
                history_jobs.append(jobs.get("history", 0))
                all_jobs.append(jobs["all"])
                line += "  Spark jobs " + ", ".join(f"{step} {count}" for step, count in jobs.items())
                again, _ = _run("nightly", work, conf)  # the same night again: nothing new
                walls["nothing_new"].append(again)
                line += f"\nround {round_number + 1}  {'nothing_new':11} {again:7.1f} s  (the nightly again)"
            print(line, flush=True)
    one_table, nightly = statistics.median(walls["one_table"]), statistics.median(walls["nightly"])
    print_block(
        "medians",
        {
            **{f"{kind} job": _spread(times) for kind, times in walls.items()},
            "nightly / one_table": f"{nightly / one_table:.2f} (goal <= {JOB_GOAL})",
            "nothing_new / nightly": f"{statistics.median(walls['nothing_new']) / nightly:.2f}",
            "nightly's Spark jobs": f"{statistics.median(all_jobs):.0f}",
            "history step's Spark jobs": f"{statistics.median(history_jobs):.0f} (goal <= {HISTORY_JOBS_GOAL})",
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
