"""bench/spills.py: an event log's slow, spilling and sort-falling aggregations, on a hand-written log."""

from __future__ import annotations

import json

from bench import spills


def _plan(accumulators: dict[str, int], name: str, text: str, children=()) -> dict:
    metrics = [{"name": metric, "accumulatorId": accumulator} for metric, accumulator in accumulators.items()]
    return {"nodeName": name, "simpleString": text, "metrics": metrics, "children": list(children)}


def _task(updates: dict[int, int]) -> str:
    accumulables = [{"ID": accumulator, "Update": value} for accumulator, value in updates.items()]
    return json.dumps({"Event": "SparkListenerTaskEnd", "Task Info": {"Accumulables": accumulables}})


def test_each_operator_sums_its_tasks_metrics_from_the_plan_that_ran():
    start = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
    update = "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate"
    first = _plan({"time in aggregation build": 1}, "HashAggregate", "planned, replaced")
    objects = _plan(
        {"time in aggregation build": 11, "spill size": 12, "number of sort fallback tasks": 13},
        "ObjectHashAggregate",
        "ObjectHashAggregate(keys=[k], functions=[collect_list(t)])",
        children=[_plan({"number of output rows": 21}, "Scan parquet", "scan")],
    )
    sort = _plan({"sort time": 31, "spill size": 32}, "Sort", "Sort [walk]", children=[objects])
    lines = [
        json.dumps({"Event": start, "executionId": 7, "sparkPlanInfo": first}),
        json.dumps({"Event": update, "executionId": 7, "sparkPlanInfo": sort}),
        _task({11: 4000, 12: 2**20, 13: 1, 31: 500, 21: 99}),
        _task({11: 6000, 13: 1, 31: 250, 32: 3 * 2**20}),
    ]

    found = {operator.name: operator for operator in spills.operators(iter(lines))}

    assert set(found) == {"ObjectHashAggregate", "Sort"}  # the replaced plan's operator never ran
    assert (found["ObjectHashAggregate"].time_ms, found["ObjectHashAggregate"].spill_bytes) == (10_000, 2**20)
    assert found["ObjectHashAggregate"].fallback_tasks == 2
    assert (found["Sort"].time_ms, found["Sort"].spill_bytes, found["Sort"].execution) == (750, 3 * 2**20, 7)
