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
Too slow for the test suite; tests/integration/test_crash_safety.py kills one run in CI.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.harness import REPO_ROOT, machine_report, print_block
from jobs.config import load_config
from jobs.session import build_session
from tests.delta_compare import differing_tables
from tests.kill import progress_lines, run_until_progress_line

KILLS_PER_TRIAL = 2
DATABASE = "groupscope_crash"
_SECONDS = re.compile(r"^\[nightly\s+([\d.]+)s\]")


def nightly_command(conf: Path, warehouse: Path) -> list[str]:
    return [str(REPO_ROOT / "spark-submit.sh"), "nightly", "--conf", str(conf), "--warehouse", str(warehouse),
            "--database", DATABASE]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seed", type=int, default=None, help="default: a random seed, printed")
    parser.add_argument("--work", type=Path, default=None, help="default: a new temporary directory")
    parser.add_argument("--conf", type=Path, default=REPO_ROOT / "conf" / "local.toml")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    work = args.work or Path(tempfile.mkdtemp(prefix="groupscope-crash-"))
    work.mkdir(parents=True, exist_ok=True)
    print_block("machine", machine_report())
    print(f"seed {seed}; work directory {work}", flush=True)

    reference_run = subprocess.run(nightly_command(args.conf, work / "reference"), capture_output=True, text=True)
    (work / "reference.log").write_text(reference_run.stdout + reference_run.stderr)
    if reference_run.returncode != 0:
        print(f"the reference run failed ({reference_run.returncode}); see {work / 'reference.log'}", file=sys.stderr)
        return 1
    reference = progress_lines(reference_run.stdout + reference_run.stderr)
    seconds = [float(_SECONDS.match(line)[1]) for line in reference]
    print(f"reference run: {seconds[-1]:.1f} s, {len(reference)} progress lines", flush=True)

    spark = build_session(load_config(args.conf, {"storage": {"warehouse_dir": str(work / "compare")}}),
                          "groupscope-crash-compare")  # fmt: skip
    failures = killed = 0
    for trial in range(1, args.trials + 1):
        warehouse = work / f"trial-{trial}"
        for kill in range(1, KILLS_PER_TRIAL + 1):
            # The last line is the summary, written after every table: a kill there proves nothing.
            line = rng.randrange(1, len(reference) - 1)
            then = rng.random() * (seconds[line] - seconds[line - 1])
            log = work / f"trial-{trial}-kill-{kill}.log"
            last = run_until_progress_line(nightly_command(args.conf, warehouse), log, line, then)
            killed += last.startswith("[nightly")
            print(f"trial {trial} kill {kill}: {then:4.1f} s after progress line {line}: {last[:110]}", flush=True)
        final = subprocess.run(nightly_command(args.conf, warehouse), capture_output=True, text=True)
        (work / f"trial-{trial}-final.log").write_text(final.stdout + final.stderr)
        if final.returncode != 0:
            print(f"trial {trial}: the run after the kills failed ({final.returncode})", flush=True)
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
