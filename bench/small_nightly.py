"""What a nightly costs when there is almost nothing to do: the test suite's unit of work.

    .venv/bin/python -m bench.small_nightly [--rounds 3] [--work DIR]

Most of the suite's time is nightlies (in its own session or through spark-submit) over a few hundred
records, so a run's fixed cost (planning, Delta's log and commits, the metastore, one Spark job after
another) sets how long the suite takes. This runs the quickstart capture (samples/, 170 records) as
`nightly` into a fresh database, in one Spark session, alternating two variants each round:

  shipped  the session settings a job runs with (conf/defaults.toml [spark.conf] and Spark's defaults)
  suite    with the suite's small-data settings on top (tests/small_data.py)

Only the settings a running session can change are switched (spark.default.parallelism and
spark.ui.enabled stay as the session started: the suite's). The first round warms the JVM up and is
shown but left out of the medians. Printed per run: wall seconds per step, and the CPU seconds of the
JVM and of this process; then each variant's medians and the ratio suite / shipped.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bench.harness import machine_report, print_block
from jobs.config import load_config
from jobs.runs import JobRun
from jobs.session import build_session
from jobs.steps.nightly import nightly
from tests.small_data import SMALL_DATA_SPARK_CONF

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "kafka-4.2.1"
STEPS = ("ingest", "decode", "history", "metrics", "views")
STATIC = ("spark.default.parallelism", "spark.ui.enabled")  # fixed when the session starts
VARIANTS = ("shipped", "suite")


class TimedRun(JobRun):
    """A JobRun that keeps when each step started (the progress lines without a detail)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.step_started: dict[str, float] = {}

    def progress(self, stage: str, detail: str = "") -> None:
        if not detail and stage in STEPS:
            self.step_started[stage] = time.monotonic()
        super().progress(stage, detail)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def use_variant(spark, variant: str, shipped: dict[str, str]) -> None:
    for key, value in SMALL_DATA_SPARK_CONF.items():
        if key in STATIC:
            continue
        if variant == "suite":
            spark.conf.set(key, value)
        elif key in shipped:
            spark.conf.set(key, shipped[key])
        else:
            spark.conf.unset(key)


def one_run(spark, config, jvm_pid: int) -> dict[str, float]:
    jvm_before, own_before = _cpu_seconds(jvm_pid), _cpu_seconds(os.getpid())
    # The summary the nightly prints would break up the table; its progress lines go to stderr.
    with TimedRun(spark, config, "nightly") as run, contextlib.redirect_stdout(io.StringIO()):
        started = time.monotonic()
        nightly(spark, config, run)
    ended = time.monotonic()
    if run.exit_code != 0:
        raise SystemExit(f"the nightly into {config.database} failed: see its progress lines above")
    marks = [run.step_started[step] for step in STEPS] + [ended]
    figures = {step: marks[index + 1] - marks[index] for index, step in enumerate(STEPS)}
    figures["wall"] = ended - started
    figures["jvm cpu"] = _cpu_seconds(jvm_pid) - jvm_before
    figures["python cpu"] = _cpu_seconds(os.getpid()) - own_before
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="each variant this many times (the first warms up)")
    parser.add_argument("--work", type=Path, help="warehouse directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    warehouse = (args.work or Path(tempfile.mkdtemp(prefix="groupscope-small-nightly-"))).resolve()
    print_block("machine", machine_report())
    segments = sorted(str(path) for path in (SAMPLE / "segments").iterdir())
    shipped_config = load_config(overrides={"storage": {"warehouse_dir": str(warehouse)}})
    config = load_config(
        overrides={
            "storage": {"warehouse_dir": str(warehouse)},
            "catalog": {"database": "small_nightly"},
            "spark": {"conf": {**SMALL_DATA_SPARK_CONF, "spark.driver.memory": "3g"}},
            "input": {"cluster": "small", "segment_paths": segments},
            "end_offsets": {"files": [str(SAMPLE / "end_offsets.json")]},
        }
    )
    spark = build_session(config, "bench-small-nightly")
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    columns = (*STEPS, "wall", "jvm cpu", "python cpu")
    print(f"\n{'round':>5} {'variant':<8} " + " ".join(f"{name:>13}" for name in columns), flush=True)
    results: dict[str, list[dict[str, float]]] = {variant: [] for variant in VARIANTS}
    for round_number in range(1, args.rounds + 1):
        for variant in VARIANTS:
            use_variant(spark, variant, shipped_config.spark_conf)
            database = f"small_{variant}_{round_number}"
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
            figures = one_run(spark, replace(config, database=database), jvm_pid)
            if round_number > 1:
                results[variant].append(figures)
            shown = " ".join(f"{figures[name]:>13.1f}" for name in columns)
            print(f"{round_number:>5} {variant:<8} {shown}", flush=True)
    if args.rounds > 1:
        medians = {
            variant: {name: statistics.median(run[name] for run in runs) for name in columns}
            for variant, runs in results.items()
        }
        print("\nmedians of the warm rounds, and suite / shipped")
        for variant in VARIANTS:
            print(f"{'':>5} {variant:<8} " + " ".join(f"{medians[variant][name]:>13.1f}" for name in columns))
        ratios = " ".join(
            f"{medians['suite'][name] / medians['shipped'][name]:>13.2f}" if medians["shipped"][name] else f"{'-':>13}"
            for name in columns
        )
        print(f"{'':>5} {'ratio':<8} {ratios}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
