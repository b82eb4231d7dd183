"""What the C2 compiler costs a short Spark JVM, the kind the test suite starts dozens of.

    .venv/bin/python -m bench.short_jvm [--rounds 2] [--work DIR]

Runs `./spark-submit.sh nightly` of the quickstart capture (samples/, 170 records) with the suite's
small-data settings into a fresh warehouse, alternating two variants each round:

  default  HotSpot's JIT thresholds (the baseline)
  short    tests/small_data.py's SHORT_JVM_OPTIONS in SPARK_SUBMIT_OPTS, as the suite's launched JVMs get

Each run's processes (the launcher, the driver JVM, its Python driver, the assignor replay's JVM) are
sampled every half second from /proc, thread by thread, so the CPU of HotSpot's compiler threads is told
apart from the rest. Printed per run: wall seconds, CPU seconds of the tree, of the C2 and C1 compiler
threads; then each variant's medians and the ratio short / default.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from bench.harness import machine_report, print_block
from tests.small_data import SHORT_JVM_OPTIONS, SUBMIT_OPTIONS_VARIABLE, toml_lines

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "kafka-4.2.1"
VARIANTS = {"default": "", "short": SHORT_JVM_OPTIONS}
_TICKS = os.sysconf("SC_CLK_TCK")
_THREAD_NUMBER = re.compile(r"[#\-]?\d+$")


def _thread_cpu(marker: bytes, seconds: dict[tuple[str, str], float], done: threading.Event) -> None:
    """Each thread's latest CPU seconds, for every process whose command line holds `marker`."""
    while not done.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if marker not in Path(f"/proc/{pid}/cmdline").read_bytes():
                    continue
                threads = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in threads:
                try:
                    stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                except OSError:
                    continue
                name = stat[stat.index("(") + 1 : stat.rindex(")")]
                fields = stat[stat.rindex(")") + 2 :].split()
                seconds[(pid, tid, name)] = (int(fields[11]) + int(fields[12])) / _TICKS
        time.sleep(0.5)


def one_run(work: Path, variant: str, index: int) -> dict[str, float]:
    run_dir = work / f"{index:02d}-{variant}"
    run_dir.mkdir(parents=True)
    environment = run_dir / "bench.toml"
    environment.write_text(f'[spark.conf]\n{toml_lines()}\n[end_offsets]\nfiles = ["{SAMPLE}"]\n')
    command = [str(ROOT / "spark-submit.sh"), "nightly", "--conf", str(environment), "--warehouse",
               str(run_dir / "warehouse"), "--database", "bench_short_jvm", "--cluster", "sample",
               "--segments", str(SAMPLE / "segments")]  # fmt: skip
    env = {**os.environ, SUBMIT_OPTIONS_VARIABLE: VARIANTS[variant]}
    threads: dict[tuple[str, str], float] = {}
    done = threading.Event()
    sampler = threading.Thread(target=_thread_cpu, args=(str(run_dir).encode(), threads, done), daemon=True)
    sampler.start()
    before, started = os.times(), time.monotonic()
    with open(run_dir / "output.log", "wb") as output:
        code = subprocess.run(command, env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT).returncode
    wall, after = time.monotonic() - started, os.times()
    done.set()
    sampler.join()
    if code != 0:
        raise SystemExit(f"{variant} run {index} exited {code}: see {run_dir / 'output.log'}")
    by_kind = Counter()
    for (_, _, name), cpu in threads.items():
        by_kind[_THREAD_NUMBER.sub("", name)] += cpu
    return {
        "wall_s": wall,
        "cpu_s": (after.children_user - before.children_user) + (after.children_system - before.children_system),
        "c2_s": by_kind["C2 CompilerThre"],
        "c1_s": by_kind["C1 CompilerThre"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None, help="where the runs' warehouses go (default: a temp dir)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-short-jvm-"))
    print_block("machine", machine_report())
    results: dict[str, list[dict[str, float]]] = {variant: [] for variant in VARIANTS}
    index = 0
    for round_number in range(args.rounds):
        # Alternating, and the order swapped each round, so a drift of the machine's load hits both alike.
        for variant in VARIANTS if round_number % 2 == 0 else reversed(VARIANTS):
            index += 1
            figures = one_run(work, variant, index)
            results[variant].append(figures)
            print(f"round {round_number + 1} {variant:8s} " + "  ".join(f"{k} {v:7.1f}" for k, v in figures.items()))
    medians = {v: {k: statistics.median(run[k] for run in runs) for k in runs[0]} for v, runs in results.items()}
    for variant, figures in medians.items():
        print(f"median   {variant:8s} " + "  ".join(f"{k} {v:7.1f}" for k, v in figures.items()))
    print("ratio short / default " + "  ".join(
        f"{k} {medians['short'][k] / medians['default'][k]:.2f}" for k in medians["short"] if medians["default"][k]
    ))  # fmt: skip
    print_block("load after", {"load average (1, 5, 15 min)": ", ".join(f"{x:.2f}" for x in os.getloadavg())})


if __name__ == "__main__":
    main()
