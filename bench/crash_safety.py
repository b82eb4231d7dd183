"""Crash safety: the nightly job killed (SIGKILL) at random moments, then run again, leaves the tables an
uninterrupted run leaves.

    .venv/bin/python -m bench.crash_safety [--trials 5] [--seed N] [--work DIR] [--conf conf/local.toml]

First one uninterrupted `./spark-submit.sh nightly` into a warehouse of its own: the reference, with
its progress lines (one per table written, stage started, check made). Then each trial, in a fresh
warehouse: the nightly is started and its whole process group (spark-submit, the driver JVM, the
Python driver and workers) killed with SIGKILL at a random moment: after a random one of the
reference's progress lines, plus a random part of the time the reference took to the next one (so
the kill lands inside a write, not between two). Then it is started again and killed again the same
way (a crash during the recovery run), then run to the end. Every table (but `job_runs`, which
records runs) must then hold exactly the reference's rows, compared row by row. Two kills per trial:
5 trials = 10 kills. Each kill prints the last progress line before it. Exits 1 on any difference.
Killing at a line rather than a time keeps the kills inside the run on a machine whose speed varies.
The input is the environment file's (by default the quick-start sample and its end offsets).

    .venv/bin/python -m bench.crash_safety --nights [--capture samples/kafka-4.2.1] [--trials 5] [--seed N]

With --nights, the runs are incremental: two nights over one live log under the work directory
(tests/log_cuts.py), the first over the capture's log as it stood halfway through its time, the second
over the whole log, grown in place (its files read before, read on). The reference is the two nights
uninterrupted; each trial kills the first night once and the second twice (once in its recovery run),
each at a random line of the reference's same night, finishing each night before the next. The
environment is written for the live log (the capture's end offsets cut the same way); --conf is not read.
Too slow for the test suite; tests/integration/test_crash_safety.py kills one second night in CI.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.harness import REPO_ROOT, machine_report, print_block
from jobs.config import load_config
from jobs.session import build_session
from tests import log_cuts
from tests.delta_compare import differing_tables
from tests.kill import progress_lines, run_until_progress_line

KILLS_PER_TRIAL = 2
DATABASE = "groupscope_crash"
_SECONDS = re.compile(r"^\[nightly\s+([\d.]+)s\]")


def nightly_command(conf: Path, warehouse: Path) -> list[str]:
    return [str(REPO_ROOT / "spark-submit.sh"), "nightly", "--conf", str(conf), "--warehouse", str(warehouse),
            "--database", DATABASE]  # fmt: skip


@dataclass(frozen=True)
class Reference:
    lines: list[str]  # its progress lines
    seconds: list[float]  # when each was printed


def reference_of(output: str) -> Reference:
    lines = progress_lines(output)
    return Reference(lines, [float(_SECONDS.match(line)[1]) for line in lines])


def run_logged(command: list[str], log: Path) -> subprocess.CompletedProcess:
    finished = subprocess.run(command, capture_output=True, text=True)
    log.write_text(finished.stdout + finished.stderr)
    return finished


def killed_then_finished(
    command: list[str], reference: Reference, kills: int, rng: random.Random, logs: str
) -> tuple[int, bool]:
    """`kills` runs of `command` killed at random moments of the reference's run, then one to the end:
    (runs killed mid-run, whether the last run succeeded)."""
    killed = 0
    for kill in range(1, kills + 1):
        # The last line is the summary, written after every table: a kill there proves nothing.
        line = rng.randrange(1, len(reference.lines) - 1)
        then = rng.random() * (reference.seconds[line] - reference.seconds[line - 1])
        last = run_until_progress_line(command, Path(f"{logs}-kill-{kill}.log"), line, then)
        killed += last.startswith("[nightly")
        print(f"{Path(logs).name} kill {kill}: {then:4.1f} s after progress line {line}: {last[:110]}", flush=True)
    return killed, run_logged(command, Path(f"{logs}-final.log")).returncode == 0


class LiveLog:
    """--nights: the capture's log, cut halfway, then whole, in one live path under the work directory."""

    def __init__(self, capture: Path, work: Path) -> None:
        self.capture, self.live = capture, work / "live"
        times = [batch.max_timestamp_ms for found in log_cuts.capture_batches(capture).values() for batch in found]
        self.nights = [log_cuts.cut_at(capture, (min(times) + max(times)) // 2, "halfway"), log_cuts.whole(capture)]
        self.conf = work / "nights.toml"
        self.conf.write_text(
            f"[input]\nsegment_paths = [{json.dumps(str(self.live / 'segments'))}]\n"
            f"[end_offsets]\nfiles = [{json.dumps(str(self.live / 'end_offsets'))}]\n"
        )

    def write(self, night: int) -> None:
        """Night 0 starts the log over (a new warehouse's first night); night 1 grows it."""
        if night == 0:
            for segment in (self.live / "segments").glob("__consumer_offsets-*/*.log"):
                segment.unlink()
        log_cuts.write_night([self.nights[night]], self.live / "segments", self.live / "end_offsets")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seed", type=int, default=None, help="default: a random seed, printed")
    parser.add_argument("--work", type=Path, default=None, help="default: a new temporary directory")
    parser.add_argument("--conf", type=Path, default=REPO_ROOT / "conf" / "local.toml")
    parser.add_argument("--nights", action="store_true", help="kill incremental nights over a growing log")
    parser.add_argument("--capture", type=Path, default=REPO_ROOT / "samples" / "kafka-4.2.1",
                        help="with --nights: a lab capture (segments/, end_offsets.json)")  # fmt: skip
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    work = args.work or Path(tempfile.mkdtemp(prefix="groupscope-crash-"))
    work.mkdir(parents=True, exist_ok=True)
    print_block("machine", machine_report())
    print(f"seed {seed}; work directory {work}", flush=True)
    live = LiveLog(args.capture, work) if args.nights else None
    conf = live.conf if live else args.conf
    kills_by_night = (1, KILLS_PER_TRIAL) if live else (KILLS_PER_TRIAL,)

    references = []
    for night in range(len(kills_by_night)):
        if live:
            live.write(night)
        reference_run = run_logged(nightly_command(conf, work / "reference"), work / f"reference-{night + 1}.log")
        if reference_run.returncode != 0:
            print(f"the reference run failed ({reference_run.returncode}); see {work}", file=sys.stderr)
            return 1
        references.append(reference_of(reference_run.stdout + reference_run.stderr))
        print(f"reference night {night + 1}: {references[-1].seconds[-1]:.1f} s, "
              f"{len(references[-1].lines)} progress lines", flush=True)  # fmt: skip

    spark = build_session(load_config(args.conf, {"storage": {"warehouse_dir": str(work / "compare")}}),
                          "groupscope-crash-compare")  # fmt: skip
    failures = killed = 0
    for trial in range(1, args.trials + 1):
        warehouse, finished = work / f"trial-{trial}", True
        for night, kills in enumerate(kills_by_night):
            if live:
                live.write(night)
            logs = str(work / f"trial-{trial}-night-{night + 1}")
            night_killed, finished = killed_then_finished(
                nightly_command(conf, warehouse), references[night], kills, rng, logs
            )
            killed += night_killed
            if not finished:
                print(f"trial {trial}: night {night + 1}'s run after the kills failed", flush=True)
                break
        if not finished:
            failures += 1
            continue
        differing = differing_tables(spark, work / "reference", warehouse, DATABASE)
        print(f"trial {trial}: tables differing from the reference after the kills: {', '.join(differing) or 'none'}",
              flush=True)  # fmt: skip
        failures += bool(differing)
    spark.stop()
    print(f"{killed} runs killed mid-run in {args.trials} trials; {failures} trial(s) left wrong tables")
    return 1 if failures or not killed else 0


if __name__ == "__main__":
    sys.exit(main())
