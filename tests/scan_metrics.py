"""What the queries a session ran read of each Delta table, from Spark's own SQL status store (kept with
the UI off too): the number of files each scan opened, after partition pruning and data skipping."""

from __future__ import annotations

from bench.scans import FILES_READ, scanned_table


def last_execution_id(spark) -> int:
    store = _store(spark)
    executions = store.executionsList()
    return executions.apply(executions.size() - 1).executionId() if executions.size() else -1


def files_read_since(spark, execution_id: int) -> dict[str, list[int]]:
    """{table directory name: files read by each scan} of the queries run after `execution_id`. A cached
    frame's scans show again in each query that reads it, with the same metric: counted once."""
    store = _store(spark)
    executions = store.executionsList()
    found: dict[str, list[int]] = {}
    counted: set[int] = set()
    for index in range(executions.size()):
        execution = executions.apply(index).executionId()
        if execution <= execution_id:
            continue
        values, nodes = store.executionMetrics(execution), store.planGraph(execution).allNodes()
        for node_index in range(nodes.size()):
            node = nodes.apply(node_index)
            table = scanned_table(node.name(), node.desc())
            metrics = node.metrics()
            for metric_index in range(metrics.size() if table else 0):
                metric = metrics.apply(metric_index)
                if metric.name() != FILES_READ or metric.accumulatorId() in counted:
                    continue
                counted.add(metric.accumulatorId())
                value = values.get(metric.accumulatorId())
                found.setdefault(table, []).append(int(value.get().replace(",", "")) if value.isDefined() else 0)
    return found


def _store(spark):
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    return spark._jsparkSession.sharedState().statusStore()
