"""Where a nightly's time goes, step by step, from Spark's event log and the job's progress lines.

    .venv/bin/python -m bench.event_log EVENT_LOG JOB_LOG [--top 8] [--timeline STEP] [--stages EXECUTION]

Run the nightly with `"spark.eventLog.enabled" = "true"` and `"spark.eventLog.dir" = "file:///some/dir"`
in its config's [spark.conf] (a rolled v2 log is a directory of events_N_* files, zstd-compressed: pass the
directory; `zstd` unpacks them first), and keep its console output (JOB_LOG). For each step of the
job's progress lines (ingest, decode, history, metrics, views) it prints the wall time, the Spark jobs
started, the time with at least one job running, the task-seconds (the sum of task durations: on a
2-core machine at most twice the time with a job running), and the time with no job running: the driver
alone (planning, Delta commits and snapshots, the metastore, Python). Then each step's SQL executions
with the most task-seconds, each outlined by its plan (the operators that sort or move every row, and
the tables it scans: plan_outline), which is usually enough to find its code. `--timeline STEP` then
lists every execution of that step in the order it ran, with the driver's gap before each: where a
step's time goes when it is spread over many small queries (the twenty-fourth session's night 7).
`--stages EXECUTION` then lists the stages of one execution (and those run under it) by task time, with
their tasks and the rows they read from files and from shuffles and wrote to shuffles: which pass over
the data costs, and whether one runs twice (the twenty-seventh session's range sample). The sixth and
nineteenth XX were made this way.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.scans import query_name, scanned_table

STEPS = ("ingest", "decode", "history", "metrics", "views")
STAGE_METRICS = ("tasks", "task_ms", "input_rows", "shuffle_read_rows", "shuffle_written_rows")
STEP_LINE = re.compile(r"^\[\w+\s+([\d.]+)s\] (\w+)$")


@dataclass
class EventLog:
    first_job_at_ms: int | None = None
    jobs: dict[int, list[int | None]] = field(default_factory=dict)  # id -> [submitted, completed]
    job_execution: dict[int, int | None] = field(default_factory=dict)
    tasks: list[tuple[int, int, int]] = field(default_factory=list)  # (launched, finished, stage)
    stage_metrics: dict[int, Counter] = field(default_factory=dict)  # id -> STAGE_METRICS summed over tasks
    stage_execution: dict[int, int | None] = field(default_factory=dict)
    executions: dict[int, tuple[int, int | None, str]] = field(default_factory=dict)  # id -> (start, root, text)
    plans: dict[int, tuple[Counter, set[str]]] = field(default_factory=dict)  # id -> plan_outline of what ran


# Plan operators that sort or move every row they are given: a query's count of each tells its shape.
HEAVY_OPERATORS = {"Sort": "sort", "SortAggregate": "sort-agg", "Window": "window", "Exchange": "shuffle",
                   "SortMergeJoin": "smj", "BroadcastHashJoin": "bhj", "HashAggregate": "hash-agg"}  # fmt: skip


def plan_outline(plan: dict | None) -> tuple[Counter, set[str]]:
    """A plan's heavy operators counted, and the tables it scans."""
    counts: Counter = Counter()
    tables: set[str] = set()
    pending = [plan] if plan else []
    while pending:
        node = pending.pop()
        name = node["nodeName"]
        label = HEAVY_OPERATORS.get(name.split(" ")[0])
        if label:
            counts[label] += 1
        table = scanned_table(name, node["simpleString"])
        if table:
            tables.add(table)
        pending.extend(node["children"])
    return counts, tables


def outline_text(log: EventLog, execution: int) -> str:
    """The outline of an execution and of those run under it (a Delta write's command runs its query as a
    child execution): "sort 2 shuffle 3; offset_commits"."""
    counts: Counter = Counter()
    tables: set[str] = set()
    for other, (child_counts, child_tables) in log.plans.items():
        if _root(log, other) == execution:
            counts.update(child_counts)
            tables |= child_tables
    shape = " ".join(f"{label} {count}" for label, count in sorted(counts.items()))
    return f"{shape}; {', '.join(sorted(tables)) or '-'}"


def event_lines(path: Path) -> Iterator[str]:
    """The log's lines: one file, or the events_N_* files of a rolled log in their order (unpacked)."""
    files = [path] if path.is_file() else sorted(path.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    for file in files:
        if file.suffix == ".zstd":
            unpacked = subprocess.run(["zstd", "-dc", str(file)], capture_output=True, check=True).stdout
            yield from unpacked.decode().splitlines()
        else:
            yield from file.read_text().splitlines()


def read_event_log(lines: Iterator[str]) -> EventLog:
    log = EventLog()
    for line in lines:
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            execution = event.get("Properties", {}).get("spark.sql.execution.id")
            log.jobs[event["Job ID"]] = [event["Submission Time"], None]
            log.job_execution[event["Job ID"]] = int(execution) if execution else None
            for stage in event["Stage Infos"]:
                log.stage_execution[stage["Stage ID"]] = int(execution) if execution else None
            if log.first_job_at_ms is None:
                log.first_job_at_ms = event["Submission Time"]
        elif kind == "SparkListenerJobEnd":
            log.jobs[event["Job ID"]][1] = event["Completion Time"]
        elif kind == "SparkListenerTaskEnd":
            info = event["Task Info"]
            log.tasks.append((info["Launch Time"], info["Finish Time"], event["Stage ID"]))
            log.stage_metrics.setdefault(event["Stage ID"], Counter()).update(_task_metrics(event))
        elif kind.endswith("SQLExecutionStart"):
            root = event.get("rootExecutionId")
            log.executions[event["executionId"]] = (event["time"], root, query_name(event)[:60])
            log.plans[event["executionId"]] = plan_outline(event.get("sparkPlanInfo"))
        elif kind.endswith("SQLAdaptiveExecutionUpdate"):  # the plan that ran, re-planned by adaptive execution
            log.plans[event["executionId"]] = plan_outline(event.get("sparkPlanInfo"))
    return log


def _task_metrics(event: dict) -> dict[str, int]:
    info, metrics = event["Task Info"], event.get("Task Metrics") or {}
    return {
        "tasks": 1,
        "task_ms": info["Finish Time"] - info["Launch Time"],
        "input_rows": metrics.get("Input Metrics", {}).get("Records Read", 0),
        "shuffle_read_rows": metrics.get("Shuffle Read Metrics", {}).get("Total Records Read", 0),
        "shuffle_written_rows": metrics.get("Shuffle Write Metrics", {}).get("Shuffle Records Written", 0),
    }


def stage_rows(log: EventLog, execution: int) -> list[dict]:
    """The stages of `execution` and of those run under it that ran a task (adaptive execution skips
    some it planned), the costliest first: STAGE_METRICS each."""
    rows = [
        {"stage": stage, **{name: metrics[name] for name in STAGE_METRICS}}
        for stage, metrics in log.stage_metrics.items()
        if _root(log, log.stage_execution.get(stage)) == execution
    ]
    return sorted(rows, key=lambda row: (-row["task_ms"], row["stage"]))


def step_starts(job_log: str) -> list[tuple[str, float]]:
    """(step, seconds since the run started) from the job's progress lines, in order."""
    return [
        (match.group(2), float(match.group(1)))
        for match in map(STEP_LINE.match, job_log.splitlines())
        if match and match.group(2) in STEPS
    ]


def _busy_ms(intervals: list[tuple[int, int]]) -> int:
    """The length of the union of intervals."""
    busy, end = 0, None
    for start, finish in sorted(intervals):
        if end is None or start > end:
            busy, end = busy + finish - start, finish
        elif finish > end:
            busy, end = busy + finish - end, finish
    return busy


def _root(log: EventLog, execution: int | None) -> int | None:
    while execution is not None and log.executions.get(execution, (0, None, ""))[1] not in (None, execution):
        execution = log.executions[execution][1]
    return execution


def step_rows(log: EventLog, starts: list[tuple[str, float]], run_end: float, started_ms: int) -> list[dict]:
    """Per step: wall, jobs, time with a job running, task-seconds, driver-only time, top executions."""
    bounds = [*starts, ("end", run_end)]
    task_ms_by_execution: Counter = Counter()
    for launched, finished, stage in log.tasks:
        task_ms_by_execution[(_root(log, log.stage_execution.get(stage)), launched)] += finished - launched
    rows = []
    for (step, at), (_, until) in itertools.pairwise(bounds):
        low, high = started_ms + at * 1000, started_ms + until * 1000
        jobs = [(start, min(end, high)) for start, end in log.jobs.values() if end and low <= start < high]
        task_ms = sum(min(f, high) - max(la, low) for la, f, _ in log.tasks if f > low and la < high)
        top: Counter = Counter()
        for (execution, launched), ms in task_ms_by_execution.items():
            if execution is not None and low <= launched < high:
                top[execution] += ms
        busy = _busy_ms(jobs)
        rows.append(
            {"step": step, "wall_s": until - at, "jobs": len(jobs), "busy_s": busy / 1000,
             "task_s": task_ms / 1000, "driver_only_s": (high - low - busy) / 1000, "top": top.most_common()}
        )  # fmt: skip
    return rows


def timeline(log: EventLog, low_ms: float, high_ms: float) -> list[dict]:
    """The executions (with those run under them) whose jobs started in [low_ms, high_ms), in the order
    they started: first job's start, last job's end, jobs, task milliseconds. The gaps between them are
    the driver alone; a step's many small executions show as many short rows with gaps."""
    spans: dict[int | None, dict] = {}
    for job_id, (submitted, completed) in log.jobs.items():
        if completed is None or not low_ms <= submitted < high_ms:
            continue
        execution = _root(log, log.job_execution.get(job_id))
        span = spans.setdefault(execution, {"execution": execution, "start_ms": submitted, "end_ms": completed,
                                            "jobs": 0, "task_ms": 0})  # fmt: skip
        span["start_ms"], span["end_ms"] = min(span["start_ms"], submitted), max(span["end_ms"], completed)
        span["jobs"] += 1
    for launched, finished, stage in log.tasks:
        execution = _root(log, log.stage_execution.get(stage))
        if execution in spans and low_ms <= launched < high_ms:
            spans[execution]["task_ms"] += finished - launched
    return sorted(spans.values(), key=lambda span: span["start_ms"])


def print_timeline(log: EventLog, step: str, starts: list[tuple[str, float]], run_end: float, started_ms: int) -> None:
    bounds = dict(starts)
    later = [at for name, at in starts if at > bounds[step]]
    low, high = started_ms + bounds[step] * 1000, started_ms + (min(later) if later else run_end) * 1000
    print(f"\n{step}: its executions in order (s from the step's start; gap: the driver alone before it)")
    previous_end = low
    for span in timeline(log, low, high):
        gap = max(0.0, span["start_ms"] - previous_end) / 1000
        previous_end = max(previous_end, span["end_ms"])
        execution = span["execution"]
        outline = outline_text(log, execution) if execution is not None else "-"
        at, wall = (span["start_ms"] - low) / 1000, (span["end_ms"] - span["start_ms"]) / 1000
        print(
            f"{at:7.1f}s  gap {gap:5.1f}s  wall {wall:6.1f}s  jobs {span['jobs']:3}"
            f"  task-s {span['task_ms'] / 1000:6.1f}  execution {execution}: {outline}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("event_log", type=Path)
    parser.add_argument("job_log", type=Path)
    parser.add_argument("--top", type=int, default=8, help="executions shown per step")
    parser.add_argument("--timeline", choices=STEPS, help="then every execution of this step, in order")
    parser.add_argument("--stages", type=int, metavar="EXECUTION", help="then the stages of this execution")
    args = parser.parse_args(argv)
    job_log = args.job_log.read_text()
    starts = step_starts(job_log)
    if not starts:
        print(f"{args.job_log}: no step progress lines ('[nightly  12.3s] history'): not a nightly's output")
        return 2
    log = read_event_log(event_lines(args.event_log))
    if log.first_job_at_ms is None:
        print(f"{args.event_log}: no Spark job in the event log")
        return 2
    ends = [float(m.group(1)) for m in re.finditer(r"^\[\w+\s+([\d.]+)s\] succeeded", job_log, re.MULTILINE)]
    run_end = ends[-1] if ends else starts[-1][1]
    # The job's clock starts at its first progress line, a moment before its first Spark job.
    started_ms = log.first_job_at_ms - int(starts[0][1] * 1000)
    print(f"{'step':8} {'wall':>8} {'jobs':>5} {'job running':>12} {'task-s':>8} {'driver only':>12}")
    for row in step_rows(log, starts, run_end, started_ms):
        print(
            f"{row['step']:8} {row['wall_s']:7.1f}s {row['jobs']:5} {row['busy_s']:11.1f}s {row['task_s']:8.1f}"
            f" {row['driver_only_s']:11.1f}s"
        )
        for execution, ms in row["top"][: args.top]:
            text = log.executions[execution][2]
            print(f"{'':10} {ms / 1000:6.1f} task-s  execution {execution}: {text}  [{outline_text(log, execution)}]")
    if args.timeline and args.timeline in dict(starts):
        print_timeline(log, args.timeline, starts, run_end, started_ms)
    if args.stages is not None:
        print(
            f"\nexecution {args.stages}: its stages by task time (rows: read from files, shuffle read, shuffle written)"
        )
        for row in stage_rows(log, args.stages):
            print(
                f"  stage {row['stage']:5}  task-s {row['task_ms'] / 1000:7.2f}  tasks {row['tasks']:4}  rows"
                f" {row['input_rows']:>12,} {row['shuffle_read_rows']:>12,} {row['shuffle_written_rows']:>12,}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
