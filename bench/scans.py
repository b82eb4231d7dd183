"""What a job's queries read of each Delta table, from its Spark event log: whether a night's plans prune.

    .venv/bin/python -m bench.scans EVENT_LOG [--warehouse DIR] [--top 12]

Issue 16 §5 asks that the tables be laid out so that a night reads what it needs, shown by the plans. A
Delta scan's "number of files read" is what remains after partition pruning and data skipping by the
files' statistics, so it says what a plan pruned. For each step of the run (a job names its queries
by step: jobs/runs.py) and each table: how many scans, the files they opened (in all, and the most one
scan opened), the rows they passed on, and, with `--warehouse`, how many files the table holds now;
then the queries that read the most files. Event logs are written when the job runs with
`spark.eventLog.enabled` (bench.nights --event-logs); plain or zstd-compressed.
"""

from __future__ import annotations

import argparse
import io
import json
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

FILES_READ, ROWS_OUT = "number of files read", "number of output rows"
_LOCATION = re.compile(r"Location: (\w+)\(\d+ paths?\)\[([^\]]*)\]")
_NAMED_SCAN = re.compile(r"Scan \w+ (?:\w+\.)*(\w+)$")  # "Scan parquet spark_catalog.groupscope.lag"
# A Spark Connect client's tag T on the server: SparkConnect_SessionTag_User_<user>_Session_<session id>_Tag_T.
_CONNECT_SESSION_TAG = re.compile(r"SparkConnect_SessionTag_User_.*?_Session_[0-9a-f-]+_Tag_(.*)")


@dataclass
class Scan:
    table: str
    files: int
    rows: int


@dataclass
class Query:
    execution_id: int
    step: str
    started_ms: int
    ended_ms: int = 0
    scans: list[Scan] = field(default_factory=list)


def event_files(path: Path) -> list[Path]:
    """An event log's files in order: Spark rolls a long run's log over into events_1_..., events_2_..."""
    if path.is_file():
        return [path]
    found = [file for file in path.rglob("*") if file.is_file() and file.name.startswith(("events_", "app-", "local-"))]
    rolled = re.compile(r"events_(\d+)_")
    return sorted(found, key=lambda file: (int(match.group(1)) if (match := rolled.match(file.name)) else 0, file.name))


def events(path: Path) -> Iterator[dict]:
    for file in event_files(path):
        raw = file.read_bytes()
        if file.suffix == ".zstd":
            import zstandard  # pyspark[connect] brings it

            raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
        for line in raw.decode().splitlines():
            yield json.loads(line)


def queries(path: Path) -> list[Query]:
    """Every SQL execution with its data scans (Delta's log scans left out) and their final metrics."""
    values: dict[int, int] = defaultdict(int)
    found: dict[int, Query] = {}
    plans: dict[int, list[tuple[str, dict[str, int]]]] = {}
    for event in events(path):
        kind = event["Event"]
        if kind.endswith("SQLExecutionStart"):
            query = found[event["executionId"]] = Query(event["executionId"], _step(query_name(event)), event["time"])
            plans[query.execution_id] = list(_scans(event["sparkPlanInfo"]))
        elif kind.endswith("SQLExecutionEnd") and event["executionId"] in found:
            found[event["executionId"]].ended_ms = event["time"]
        elif kind.endswith("DriverAccumUpdates"):
            for accumulator, value in event["accumUpdates"]:
                values[accumulator] += value
        elif kind == "SparkListenerTaskEnd":
            for accumulable in event["Task Info"].get("Accumulables", []):
                update = str(accumulable.get("Update", ""))  # a SQL metric's update is written as a string
                if accumulable.get("Metadata") == "sql" and update.isdigit():
                    values[accumulable["ID"]] += int(update)
    # A cached frame's plan appears in every query that reads it (twice in one that reads it twice), with the
    # same metrics: counted once, for the first query that shows it (the one that ran it).
    counted: set[int] = set()
    for execution_id in sorted(plans):
        fresh = []
        for table, ids in plans[execution_id]:
            if ids[FILES_READ] not in counted:
                counted.add(ids[FILES_READ])
                fresh.append((table, ids))
        found[execution_id].scans = [
            Scan(table, values.get(ids[FILES_READ], 0), values.get(ids.get(ROWS_OUT, -1), 0)) for table, ids in fresh
        ]
    return sorted(found.values(), key=lambda query: query.started_ms)


def query_name(execution_start: dict) -> str:
    """The name JobRun gave a query: its description in a classic session; through Spark Connect, which
    sends no description, the session's tag, which the server writes among the query's jobTags."""
    for tag in execution_start.get("jobTags") or ():
        if match := _CONNECT_SESSION_TAG.fullmatch(tag):
            return match.group(1)
    return execution_start.get("description") or ""


def _step(description: str) -> str:
    """The step a query ran in: JobRun names them `job: step` (or `job` alone); Delta prefixes its own
    queries with "Delta: " and suffixes what they do ("...: Filtering files for query")."""
    while description.startswith("Delta: "):
        description = description.removeprefix("Delta: ")
    parts = re.split(r": | - ", description)  # a MERGE's: "job: step - MERGE operation - ..."
    if len(parts) > 1 and re.fullmatch(r"\w+", parts[1]):
        return parts[1]
    return parts[0] or "-"


def scanned_table(node_name: str, description: str) -> str | None:
    """The Delta table a plan node scans (its name in the catalog, else its directory's), or None: not a
    scan of a table's data (Delta's own log is left out)."""
    location = _LOCATION.search(description)
    if not node_name.startswith("Scan") or location is None or location.group(1) == "DeltaLogFileIndex":
        return None
    named = _NAMED_SCAN.match(node_name)
    # Spark shortens a long location in the plan (spark.sql.maxMetadataStringLength): then shown as it is.
    return named.group(1) if named else location.group(2).rstrip("/").rsplit("/", 1)[-1]


def _scans(node: dict) -> Iterator[tuple[str, dict[str, int]]]:
    table = scanned_table(node["nodeName"], node["simpleString"])
    if table is not None:
        ids = {metric["name"]: metric["accumulatorId"] for metric in node["metrics"]}
        if FILES_READ in ids:
            yield table, ids
    for child in node["children"]:
        yield from _scans(child)


def live_files(table: Path) -> int:
    """The files a Delta table's latest version holds: its last checkpoint plus the commits after it."""
    log = table / "_delta_log"
    last = json.loads((log / "_last_checkpoint").read_text()) if (log / "_last_checkpoint").exists() else None
    paths: set[str] = set()
    version = -1
    if last is not None:
        version = last["version"]
        for part in sorted(log.glob(f"{version:020d}.checkpoint*.parquet")):
            adds = pq.read_table(part, columns=["add"]).column("add").to_pylist()
            paths.update(add["path"] for add in adds if add is not None)
    for commit in sorted(log.glob("*.json")):
        if int(commit.stem) <= version:
            continue
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                paths.add(action["add"]["path"])
            elif "remove" in action:
                paths.discard(action["remove"]["path"])
    return len(paths)


def report(path: Path, warehouse: Path | None, top: int) -> str:
    found = queries(path)
    if not found:
        return f"{path}: no SQL executions"
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for query in found:
        step = query.step
        for scan in query.scans:
            total = totals[(step, scan.table)]
            total[0] += 1
            total[1] += scan.files
            total[2] = max(total[2], scan.files)
            total[3] += scan.rows
    holds = {}
    if warehouse is not None:
        for _, table in totals:
            directory = next(warehouse.glob(f"*.db/{table}"), None)
            holds[table] = str(live_files(directory)) if directory and (directory / "_delta_log").exists() else "-"
    lines = [f"{'step':<12} {'table':<26} {'scans':>6} {'files read':>11} {'most in one':>12} {'rows out':>14}"
             + (f" {'files now':>10}" if warehouse else "")]  # fmt: skip
    for (step, table), (scans, files, most, rows) in totals.items():
        held = f" {holds.get(table, '-'):>10}" if warehouse else ""
        lines.append(f"{step:<12} {table:<26} {scans:>6} {files:>11,} {most:>12,} {rows:>14,}{held}")
    lines.append(f"\nthe {top} queries that read the most files:")
    lines.append(f"{'execution':>9} {'step':<12} {'seconds':>8}  files read by table")
    ranked = sorted(found, key=lambda query: -sum(scan.files for scan in query.scans))[:top]
    for query in ranked:
        by_table: dict[str, int] = defaultdict(int)
        for scan in query.scans:
            by_table[scan.table] += scan.files
        shown = ", ".join(f"{table} {files:,}" for table, files in sorted(by_table.items(), key=lambda kv: -kv[1]))
        seconds = (query.ended_ms - query.started_ms) / 1000
        lines.append(f"{query.execution_id:>9} {query.step:<12} {seconds:>8.1f}  {shown}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("event_log", type=Path, help="a Spark event log: a file, or the directory of a rolled one")
    parser.add_argument("--warehouse", type=Path, help="count each table's files now (a Delta log replay)")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    print(report(args.event_log, args.warehouse, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
