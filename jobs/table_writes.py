"""How many rows a run wrote to each table, read from the tables' Delta history (each commit's own
operation metrics), for the nightly summary: a table's total says what it holds, this says what the run
changed (0 on a night that brought nothing, while the table still holds every row).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.delta_tables import DeltaTable
from jobs.tables import database_tables

# A night commits once or twice to each table; more commits than this since the run began: read them all.
_RECENT_COMMITS = 4


def rows_of_commit(operation: str, metrics: Mapping[str, str] | None) -> int:
    """Rows a commit added or changed: a MERGE's inserted and updated rows (not those it copied
    unchanged), an UPDATE's updated rows, any other write's output rows; a delete writes none."""
    metrics = metrics or {}
    if operation == "MERGE":
        return sum(int(metrics.get(name, 0)) for name in ("numTargetRowsInserted", "numTargetRowsUpdated"))
    if operation == "UPDATE":
        return int(metrics.get("numUpdatedRows", 0))
    if operation == "DELETE":
        return 0
    return int(metrics.get("numOutputRows", 0))


def _noted_cluster(user_metadata: str | None) -> str | None:
    """The cluster a commit's note names (jobs/watermarks.py); None for a commit without one."""
    try:
        parsed = json.loads(user_metadata or "null")
    except ValueError:
        return None
    return parsed.get("cluster") if isinstance(parsed, dict) else None


def rows_written(spark: SparkSession, config: Config, names: Sequence[str], since: datetime) -> dict[str, int]:
    """Rows each table's commits since `since` (the run's start) wrote, leaving out commits noted for
    another cluster. The cluster's lock keeps its other runs out; a run of another cluster into the same
    warehouse at the same time is counted only in the tables it commits to without a note (raw_records)."""
    existing = set(database_tables(spark, config.database))
    written = dict.fromkeys(names, 0)
    for name in filter(existing.__contains__, names):
        table = config.table(name)
        commits = _commits(spark, table, since, _RECENT_COMMITS)
        if len(commits) == _RECENT_COMMITS and all(commit["is_since"] for commit in commits):
            commits = _commits(spark, table, since)
        written[name] = sum(
            rows_of_commit(commit["operation"], commit["operationMetrics"])
            for commit in commits
            if commit["is_since"] and _noted_cluster(commit["userMetadata"]) in (None, config.cluster)
        )
    return written


def _commits(spark: SparkSession, table: str, since: datetime, newest: int | None = None) -> list:
    """The table's newest commits (all when None), each with whether it was made since `since`."""
    history = DeltaTable.forName(spark, table).history(*(() if newest is None else (newest,)))
    is_since = (F.col("timestamp") >= F.lit(since)).alias("is_since")
    return history.select("operation", "operationMetrics", "userMetadata", is_since).collect()
