"""Consecutive incremental nightlies over one growing log, then one from-scratch run over all of it
(issue 16 §5): what each night costs, and whether that follows the night's records or all before them.

    .venv/bin/python -m bench.nights [--nights 7] [--records-per-night 10M] [--last-night-records 50M]
                                     [--work DIR] [--compare]
    .venv/bin/python -m bench.nights --quick          # 3 small nights: the script checked end to end

One estate is generated (bench.generate) over one window of whole days from 2026-11-02T00:00Z: `--nights`
days, then, with --last-night-records, as many more days as make that many records (the nightly was not
run for them: one catch-up night). The generator's estate writes about 530M records a day at its default
2,000 groups; here the number of groups is chosen from pilot runs so that a day writes about
--records-per-night (about 49 groups for 10M). The log cleaner's share is 0 by default: a cleaned
first third would leave the first nights nearly empty (--cleaned-fraction to change it).

Then the log is presented as the broker held it at each midnight (bench/log_nights.py): segment files
cut at the last batch boundary whose max timestamp is <= midnight, grown in place night after night,
segments rolling; each night's end-offset snapshots (hourly, of the topics the groups consume) in a
file of its own. Each night `./spark-submit.sh nightly --run-date <the day that ended>` runs into one
warehouse, as bench.pipeline runs it (local[2], Spark's default memory), its process tree measured
(bench.harness); then `nightly --full` over the whole log into a fresh warehouse. records_decoded and
groups_folded are read back from job_runs.counts_json. With --compare (on with --quick) the two
warehouses are compared table by table, row by row. The work directory is kept (a rerun with the same
arguments reuses the generated data).
Goals (issue 16): night N <= 1.3 x night 1; the large night <= 10 minutes; a night's time independent
of how many came before.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from bench import generate, log_nights, scans
from bench.estate import WINDOW_START_MS, EstateShape, build_estate
from bench.harness import REPO_ROOT, Phase, ProcessTree, fail, machine_report, mib, print_block
from bench.nights_estate import groups_for
from bench.pipeline import stage_seconds

DAY_MS = 86_400_000
SNAPSHOTS_PER_DAY = 24
LARGE_NIGHT_GOAL_S = 600.0
GROWTH_GOAL = 1.3
DATABASE = CLUSTER = "bench"
_PROGRESS = re.compile(r"^\[nightly\s+[\d.]+s\] ")
_SUCCEEDED = re.compile(r"^\[nightly\s+[\d.]+s\] succeeded: (\{.*\})$")


@dataclass(frozen=True)
class Plan:
    nights: int
    records_per_night: int
    last_night_records: int | None
    seed: int
    max_partitions: int
    cleaned_fraction: float
    groups: int = 0

    @property
    def last_night_days(self) -> int:
        if not self.last_night_records:
            return 0
        return max(1, round(self.last_night_records / self.records_per_night))

    @property
    def days(self) -> int:
        return self.nights + self.last_night_days

    def moments(self) -> list[tuple[str, int]]:
        """(name, cut moment) of every run: each midnight, then the catch-up night's."""
        named = [(f"night {night}", WINDOW_START_MS + night * DAY_MS) for night in range(1, self.nights + 1)]
        if self.last_night_days:
            named.append((f"night {self.nights + 1} (large)", WINDOW_START_MS + self.days * DAY_MS))
        return named


@dataclass
class Run:
    name: str
    phase: Phase
    exit_code: int
    stages: dict[str, float]
    counts: dict
    records_added: int = 0
    log: Path | None = None


def run_date_of(moment_ms: int) -> date:
    """The day that ended at this midnight."""
    return (datetime.fromtimestamp(moment_ms / 1000, UTC) - timedelta(days=1)).date()


def prepare_data(plan: Plan, data: Path, workers: int) -> dict:
    """The generated estate (kept and reused when it was made by the same plan)."""
    marker = data / "nights-plan.json"
    if marker.is_file() and json.loads(marker.read_text()) == asdict(plan):
        print(f"reusing the estate generated in {data}", flush=True)
        return json.loads((data / generate.MANIFEST).read_text())
    argv = [str(data), "--window-seconds", str(plan.days * DAY_MS // 1000), "--groups", str(plan.groups),
            "--seed", str(plan.seed), "--max-partitions", str(plan.max_partitions),
            "--cleaned-fraction", str(plan.cleaned_fraction), "--snapshots", str(plan.days * SNAPSHOTS_PER_DAY + 1),
            "--cluster", CLUSTER, "--workers", str(workers)]  # fmt: skip
    manifest = generate.generate(generate.arguments(argv))
    marker.write_text(json.dumps(asdict(plan)))
    return manifest


def consumed_topics(plan: Plan) -> set[str]:
    shape = EstateShape(groups=plan.groups, max_partitions=plan.max_partitions, cleaned_fraction=plan.cleaned_fraction)
    estate = build_estate(plan.seed, shape, plan.days * DAY_MS)
    return {topic for group in estate.groups for topic in group.topics}


def write_conf(path: Path, end_offset_files: Path, event_logs: Path | None = None) -> Path:
    """The night's environment file; with `event_logs`, Spark writes its event log there (bench.scans)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f"[end_offsets]\nfiles = [{json.dumps(str(end_offset_files))}]\n"
    if event_logs is not None:
        event_logs.mkdir(parents=True, exist_ok=True)
        text += (
            f'[spark.conf]\n"spark.eventLog.enabled" = "true"\n"spark.eventLog.dir" = {json.dumps(str(event_logs))}\n'
        )
    path.write_text(text)
    return path


def load_topic_ids(data: Path, warehouse: Path) -> None:
    """What a capture job would have written before the first night (not timed)."""
    command = [sys.executable, "-m", "bench.ops_tables", str(data), str(warehouse), "--database", DATABASE,
               "--cluster", CLUSTER, "--only", "topic_ids"]  # fmt: skip
    loaded = subprocess.run(command, cwd=REPO_ROOT, capture_output=True)
    if loaded.returncode != 0:
        fail(f"loading topic ids failed:\n{loaded.stderr.decode()[-3000:]}")


def run_nightly(name: str, conf: Path, warehouse: Path, live: Path, run_date: date, full: bool, log_path: Path) -> Run:
    command = [str(REPO_ROOT / "spark-submit.sh"), "nightly", "--conf", str(conf), "--warehouse", str(warehouse),
               "--database", DATABASE, "--cluster", CLUSTER, "--segments", str(live), "--raw-table",
               "--run-date", run_date.isoformat(), *(["--full"] if full else [])]  # fmt: skip
    with open(log_path, "w") as log, subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log) as process:
        tree = ProcessTree(process.pid)
        with tree.phase(name) as phase:
            code = process.wait()
        tree.close()
    text = log_path.read_text()
    succeeded = [match[1] for line in text.splitlines() if (match := _SUCCEEDED.match(line))]
    counts = json.loads(succeeded[-1]) if succeeded else {}
    return Run(name, phase, code, stage_seconds(text, phase.seconds), counts, log=log_path)


def print_scans(event_logs: Path, warehouse: Path) -> None:
    """What the night's queries read of each table (bench.scans), from the event log it just wrote."""
    runs = sorted(path for path in event_logs.iterdir() if path.is_dir() or path.is_file())
    if runs:
        print(scans.report(runs[-1], warehouse, top=8), flush=True)


def keep_for_replay(work: Path, night: int, conf: Path, run_date: date) -> None:
    """The warehouse and the live log as night `night` finds them, copied (not timed), with a script that
    puts them back in place (the tables and the file states name their paths) and runs the night again."""
    kept = work / f"before-night-{night}"
    subprocess.run(["rm", "-rf", str(kept)], check=True)
    kept.mkdir(parents=True)
    for name in ("warehouse", "live"):
        subprocess.run(["cp", "-a", str(work / name), str(kept / name)], check=True)
    command = ["./spark-submit.sh", "nightly", "--conf", str(conf), "--warehouse", str(work / "warehouse"),
               "--database", DATABASE, "--cluster", CLUSTER, "--segments", str(work / "live" / "segments"),
               "--raw-table", "--run-date", run_date.isoformat()]  # fmt: skip
    script = kept / "replay.sh"
    script.write_text(
        "#!/usr/bin/env bash\n"
        f"# Night {night} again, from the warehouse and live log it found: replay.sh [CHECKOUT] (default the\n"
        "# benchmark's). It replaces the work directory's warehouse and live log.\n"
        "set -euo pipefail\n"
        f"rm -rf {work / 'warehouse'} {work / 'live'}\n"
        f"cp -a {kept / 'warehouse'} {kept / 'live'} {work}/\n"
        f'cd "${{1:-{REPO_ROOT}}}"\n'
        f"{' '.join(command)}\n"
    )
    script.chmod(0o755)
    print(f"kept what night {night} finds in {kept}; {script} runs it again", flush=True)


def warehouse_report(warehouse: Path, compare: Path | None) -> dict:
    command = [sys.executable, "-m", "bench.warehouse_report", str(warehouse), "--database", DATABASE]
    finished = subprocess.run(
        command + (["--compare", str(compare)] if compare else []), cwd=REPO_ROOT, capture_output=True, text=True
    )
    lines = [line for line in finished.stdout.splitlines() if line.startswith("{")]
    if finished.returncode != 0 or not lines:
        fail(f"reading {warehouse} back failed:\n{finished.stderr[-3000:]}")
    return json.loads(lines[-1])


def print_run(run: Run, records_in_log: int) -> None:
    phase, counts = run.phase, run.counts
    rows = {
        "outcome": "succeeded" if run.exit_code == 0 else f"FAILED (exit code {run.exit_code})",
        "log": str(run.log),
        "records added (in the log at the cut)": f"{run.records_added:,} ({records_in_log:,})",
        "wall": f"{phase.seconds:,.1f} s",
        "cpu": f"{phase.cpu_seconds:,.1f} s",
        **{f"  {stage}": f"{seconds:,.1f} s" for stage, seconds in run.stages.items()},
        **{f"peak RSS, {kind}": mib(size) for kind, size in sorted(phase.peak_rss.items())},
        "peak RSS, all processes": mib(phase.peak_total),
        "records_decoded (counts)": _count(counts, "records_decoded"),
        "groups_folded (counts)": _count(counts, "groups_folded"),
        "raw_records (the cluster's, after)": _count(counts, "raw_records"),
        "load average at the end": machine_report()["load average (1, 5, 15 min)"],
    }
    print_block(run.name, rows)
    if run.exit_code != 0:
        print("\n".join(line for line in run.log.read_text().splitlines() if _PROGRESS.match(line)), flush=True)


def _row(run: Run, counts: dict) -> str:
    return (
        f"  {run.name[:24]:<24} {run.records_added:>11,} {_count(counts, 'records_decoded'):>11}"
        f" {_count(counts, 'groups_folded'):>7} {run.phase.seconds:>8.1f} {run.phase.cpu_seconds:>8.1f}"
        f" {mib(run.phase.peak_total):>10}"
    )


def _verdict(is_met: bool) -> str:
    return "met" if is_met else "NOT met"


def _count(counts: dict, name: str) -> str:
    return f"{counts[name]:,}" if name in counts else "-"


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nights", type=int, help="consecutive nights (default 7; --quick: 3)")
    parser.add_argument(
        "--records-per-night", type=generate.parse_count, help="about this many a day (10M; --quick: 300k)"
    )
    parser.add_argument(
        "--last-night-records", type=generate.parse_count, help="then one night bringing this many (50M)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-partitions", type=int, help="per topic (default 256; --quick: 4, so a few groups)")
    parser.add_argument("--cleaned-fraction", type=float, default=0.0, help="share of the window compacted")
    parser.add_argument("--workers", type=int, default=2, help="generator processes")
    parser.add_argument("--work", type=Path, help="data, live log, warehouses and logs (default: a new temp dir)")
    parser.add_argument("--compare", action="store_true", help="compare the last night's tables with --full's")
    parser.add_argument("--quick", action="store_true", help="3 nights of about 300k records: checks the script")
    parser.add_argument(
        "--event-logs", action="store_true", help="each run writes Spark's event log to WORK/event-logs (bench.scans)"
    )
    parser.add_argument(
        "--keep-warehouse-before",
        type=int,
        metavar="N",
        help="copy the warehouse and live log as they stand before night N (WORK/before-night-N), to replay it",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    args.nights = args.nights or (3 if quick else 7)
    args.records_per_night = args.records_per_night or (300_000 if quick else 10_000_000)
    args.max_partitions = args.max_partitions or (4 if quick else EstateShape.max_partitions)
    args.compare = args.compare or quick
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    work = (args.work or Path(tempfile.mkdtemp(prefix="groupscope-nights-"))).resolve()
    print_block("machine", machine_report())
    plan = Plan(args.nights, args.records_per_night, args.last_night_records, args.seed, args.max_partitions,
                args.cleaned_fraction)  # fmt: skip
    plan = Plan(**{**asdict(plan), "groups": groups_for(plan.records_per_night, plan.seed, plan.max_partitions)})
    manifest = prepare_data(plan, work / "data", args.workers)
    print_block("estate", {"work directory": str(work), "groups (chosen for the records a day)": plan.groups,
                           "days": plan.days, "records generated": f"{manifest['records']:,}",
                           "segment files": manifest["segment_files"]})  # fmt: skip

    segments = log_nights.index_segments(work / "data" / "segments")
    series = log_nights.snapshot_series(work / "data" / "end_offsets.parquet", consumed_topics(plan))
    live, offsets = work / "live" / "segments", work / "live" / "end_offsets"
    warehouse, full_warehouse, logs = work / "warehouse", work / "warehouse-full", work / "logs"
    for stale in (live, offsets, warehouse, full_warehouse):
        if stale.exists():
            subprocess.run(["rm", "-rf", str(stale)], check=True)
    logs.mkdir(parents=True, exist_ok=True)
    load_topic_ids(work / "data", warehouse)

    runs, previous_records, previous_moment = [], 0, None
    for index, (name, moment_ms) in enumerate(plan.moments(), start=1):
        cut = log_nights.cut_at(segments, moment_ms)
        log_nights.write_cut(cut, work / "data" / "segments", live)
        log_nights.write_snapshots(series, previous_moment, moment_ms, offsets / f"night-{index:02d}")
        event_logs = work / "event-logs" / f"night-{index:02d}" if args.event_logs else None
        conf = write_conf(work / "conf" / f"night-{index:02d}.toml", offsets / f"night-{index:02d}", event_logs)
        if index == args.keep_warehouse_before:
            keep_for_replay(work, index, conf, run_date_of(moment_ms))
        run = run_nightly(name, conf, warehouse, live, run_date_of(moment_ms), False, logs / f"night-{index:02d}.log")
        run.records_added, previous_records, previous_moment = cut.records - previous_records, cut.records, moment_ms
        print_run(run, cut.records)
        if event_logs is not None:
            print_scans(event_logs, warehouse)
        runs.append(run)
        if run.exit_code != 0:
            return 1  # the later nights would continue from a failed one
    if cut.records != manifest["records"]:
        print(f"note: the last cut holds {cut.records:,} of the {manifest['records']:,} records generated", flush=True)

    load_topic_ids(work / "data", full_warehouse)
    conf = write_conf(work / "conf" / "full.toml", offsets, work / "event-logs" / "full" if args.event_logs else None)
    full = run_nightly("from scratch (--full), all nights", conf, full_warehouse, live, run_date_of(previous_moment),
                       True, logs / "full.log")  # fmt: skip
    full.records_added = cut.records
    print_run(full, cut.records)
    if full.exit_code != 0:
        return 1
    report = warehouse_report(warehouse, full_warehouse if args.compare else None)
    return summarize(runs, full, report)


def summarize(runs: list[Run], full: Run, report: dict) -> int:
    """The nights side by side with job_runs' counts, the ratios the issue asks for, and the checks."""
    recorded = [run["counts"] for run in report["runs"]]
    problems = []
    if len(recorded) != len(runs):
        problems.append(f"job_runs holds {len(recorded)} nightly runs, the benchmark ran {len(runs)}")
    print("\nnights (records_decoded and groups_folded from job_runs.counts_json)", flush=True)
    print(f"  {'run':<24} {'added':>11} {'decoded':>11} {'groups':>7} {'wall s':>8} {'cpu s':>8} {'peak RSS':>10}"
          f" {'/ night 1':>9} {'/ --full':>8}")  # fmt: skip
    for run, counts in zip(runs, recorded, strict=False):
        if counts != run.counts:
            problems.append(f"{run.name}: job_runs.counts_json differs from the run's printed counts")
        if counts.get("records_decoded") != run.records_added:
            problems.append(
                f"{run.name}: records_decoded {_count(counts, 'records_decoded')}"
                f" != {run.records_added:,} records added to the log"
            )
        print(f"{_row(run, counts)} {run.phase.seconds / runs[0].phase.seconds:>9.2f}"
              f" {run.phase.seconds / full.phase.seconds:>8.2f}", flush=True)  # fmt: skip
    print(_row(full, full.counts), flush=True)
    regular = [run for run in runs if "large" not in run.name]
    first, last = regular[0], regular[-1]
    growth = last.phase.seconds / first.phase.seconds
    ratios = {
        f"{last.name} / night 1, wall": f"{growth:.2f} (goal <= {GROWTH_GOAL}: {_verdict(growth <= GROWTH_GOAL)})",
        f"{last.name} / night 1, cpu": f"{last.phase.cpu_seconds / first.phase.cpu_seconds:.2f}",
        f"{last.name} / night 1, records added": f"{last.records_added / max(first.records_added, 1):.2f}",
    }
    large = [run for run in runs if "large" in run.name]
    if large:
        seconds = large[0].phase.seconds
        ratios[f"{large[0].name}, wall"] = (
            f"{seconds:,.1f} s for {large[0].records_added:,} records"
            f" (goal <= {LARGE_NIGHT_GOAL_S:.0f} s: {_verdict(seconds <= LARGE_NIGHT_GOAL_S)})"
        )
    if "differing" in report:
        ratios["tables differing, last night vs --full"] = ", ".join(report["differing"]) or "none"
        problems += [f"table {name} differs from the --full run's" for name in report["differing"]]
    print_block("ratios", ratios)
    print_block("checks", {"problems": len(problems), **{f"  {index}": text for index, text in enumerate(problems, 1)}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
