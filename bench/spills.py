"""Which aggregations and sorts of a nightly were slow, spilled, or fell back to sorting, from the SQL
metrics in Spark's event log.

    .venv/bin/python -m bench.spills EVENT_LOG [--top 15]

EVENT_LOG as bench.event_log takes it (a file, or a rolled log's directory). For each aggregation or sort
operator of the plans that ran (adaptive execution's re-plans included) it sums over the tasks its
time (aggregation build, sort), its spill size and its tasks that fell back to sorting, and prints the
largest with the execution and the operator's own text. An object aggregation (ObjectHashAggregate:
collect_list, collect_set, ...) falls back to sorting past 128 keys a task, so over millions of rows its
time is a sort's (the twenty-fifth session found history's largest query so: 140 task-s at 50M records).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.event_log import event_lines

WATCHED = {
    "time in aggregation build": "time_ms",
    "sort time": "time_ms",
    "spill size": "spill_bytes",
    "number of sort fallback tasks": "fallback_tasks",
}


@dataclass
class Operator:
    execution: int
    name: str
    text: str
    time_ms: int = 0
    spill_bytes: int = 0
    fallback_tasks: int = 0


def operators(lines: Iterator[str]) -> list[Operator]:
    """Every watched operator of the log's plans with its metrics summed over the tasks that ran it."""
    by_accumulator: dict[int, tuple[Operator, str]] = {}
    found: list[Operator] = []
    for line in lines:
        event = json.loads(line)
        kind = event["Event"]
        if kind.endswith("SQLExecutionStart") or kind.endswith("SQLAdaptiveExecutionUpdate"):
            pending = [event["sparkPlanInfo"]]
            while pending:
                node = pending.pop()
                pending.extend(node.get("children", []))
                watched = [metric for metric in node.get("metrics", []) if metric["name"] in WATCHED]
                if not watched:
                    continue
                operator = Operator(event["executionId"], node["nodeName"], node.get("simpleString", ""))
                found.append(operator)
                for metric in watched:
                    by_accumulator[metric["accumulatorId"]] = (operator, WATCHED[metric["name"]])
        elif kind == "SparkListenerTaskEnd":
            for update in event.get("Task Info", {}).get("Accumulables", []):
                if update["ID"] in by_accumulator and update.get("Update") is not None:
                    operator, attribute = by_accumulator[update["ID"]]
                    setattr(operator, attribute, getattr(operator, attribute) + int(update["Update"]))
    return [operator for operator in found if operator.time_ms or operator.spill_bytes or operator.fallback_tasks]


def print_operators(found: list[Operator], top: int) -> None:
    print(f"{'time':>9}  {'spilled':>9}  {'fallback':>8}  execution  operator")
    for operator in sorted(found, key=lambda operator: -operator.time_ms)[:top]:
        print(
            f"{operator.time_ms / 1000:8.1f}s  {operator.spill_bytes / 2**20:7,.0f}MiB  {operator.fallback_tasks:8}"
            f"  {operator.execution:9}  {operator.text[:140]}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("event_log", type=Path)
    parser.add_argument("--top", type=int, default=15, help="operators shown, most time first")
    args = parser.parse_args(argv)
    print_operators(operators(event_lines(args.event_log)), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
