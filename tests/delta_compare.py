"""Two warehouses compared table by table, row by row: what crash-safety and cluster-mode proofs rest on."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Row, SparkSession

# What names the run rather than the data: each run stamps its id on the records it captures, and
# job_runs holds one row per run.
RUN_COLUMNS = ("capture_run_id",)
RUN_TABLES = ("job_runs",)


def canonical(value):
    """Rows as nested tuples; map entries sorted (their order is not data), array order kept (it is)."""
    if isinstance(value, Row):
        return tuple((name, canonical(item)) for name, item in value.asDict().items())
    if isinstance(value, dict):
        return tuple(sorted((repr(key), canonical(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(canonical(item) for item in value)
    return value


def table_rows(spark: SparkSession, path: Path) -> list[str]:
    rows = spark.read.format("delta").load(str(path)).drop(*RUN_COLUMNS).collect()
    return sorted(repr(canonical(row)) for row in rows)


def delta_tables(warehouse: Path, database: str) -> dict[str, Path]:
    """The database's Delta tables in a warehouse, by name, without the tables that record runs."""
    database_dir = warehouse / f"{database}.db"
    return {
        path.name: path
        for path in database_dir.iterdir()
        if (path / "_delta_log").is_dir() and path.name not in RUN_TABLES
    }


def differing_tables(spark: SparkSession, expected: Path, actual: Path, database: str) -> list[str]:
    """Names of the tables whose rows differ between two warehouses (a table on one side only counts)."""
    expected_tables, actual_tables = delta_tables(expected, database), delta_tables(actual, database)
    differing = sorted(expected_tables.keys() ^ actual_tables.keys())
    for name in sorted(expected_tables.keys() & actual_tables.keys()):
        if table_rows(spark, expected_tables[name]) != table_rows(spark, actual_tables[name]):
            differing.append(name)
    return differing
