"""How the metrics step writes: one commit per table, carrying the step's note (jobs/watermarks.py),
replacing the cluster's rows from the earliest time a night evaluates again."""

from __future__ import annotations

from datetime import date, timedelta

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.tables import END_OFFSETS, cluster_rows, ensure_table, gold_rows, table_location
from jobs.watermarks import cluster_predicate, current_version, note, write_noted
from schemas import gold
from schemas.metrics_carry import metrics_carry_schema
from transforms.gold import metrics_reach
from transforms.schema_check import check_declared_types

STEP = "metrics"
CARRY = "metrics_carry"
NOTE_TABLE = "group_daily"  # written last: its note is what the step covered
INPUTS = ("offset_commits", END_OFFSETS, "generations", "rebalances")
LAST_DAY = "last_day"
# What the carry holds, noted with the versions: 3, a group partition that had a tombstone carries all its
# records evaluated, and whether they are all of its records (transforms/gold/metrics_carry.py). Tables
# noted otherwise are evaluated from scratch once.
CARRY_VERSION, CURRENT_CARRY_VERSION = "carry_version", 3
NO_DAY = -1
EPOCH = date(1970, 1, 1)


def day_number(day: date | None) -> int:
    return NO_DAY if day is None else (day - EPOCH).days


def day_of(number: int) -> date | None:
    return None if number == NO_DAY else EPOCH + timedelta(days=number)


def metrics_note(cluster: str, versions: dict[str, int], last_day: date | None) -> str:
    return note(STEP, cluster, {**versions, LAST_DAY: day_number(last_day), CARRY_VERSION: CURRENT_CARRY_VERSION})


def can_continue_from(covered: dict[str, int] | None) -> bool:
    """Whether a note says what a night can continue from: every input's version, the last day, this carry."""
    return (
        covered is not None
        and set(covered) >= {*INPUTS, LAST_DAY}
        and covered.get(CARRY_VERSION) == CURRENT_CARRY_VERSION
    )


def input_versions(spark: SparkSession, config: Config) -> dict[str, int]:
    """The current version of each input table, -1 for one that does not exist (yet)."""
    return {
        name: current_version(spark, config.table(name)) if spark.catalog.tableExists(config.table(name)) else -1
        for name in INPUTS
    }


def write_table(
    spark: SparkSession, config: Config, name: str, rows: DataFrame, commit_note: str, since: str | None
) -> None:
    """One commit carrying the note: the cluster's rows replaced from `since` (a SQL condition on the
    table's time column; all of them when it is ''), or nothing but the note when None."""
    schema = metrics_carry_schema if name == CARRY else gold.GOLD_SCHEMAS[name]
    table = config.table(name)
    ensure_table(spark, table, schema, partition_by=("cluster",))
    rows = check_declared_types(rows.select(*schema.names), schema, name) if name == CARRY else gold_rows(name, rows)
    if since is None:
        write_noted(rows.limit(0), table_location(spark, table), commit_note)
        return
    predicate = cluster_predicate(config.cluster) + (f" AND {since}" if since else "")
    write_noted(rows, table_location(spark, table), commit_note, replace_where=predicate)


def timestamp_condition(column: str, at: str) -> str:
    """`at`: a timestamp as Spark prints it in the session's time zone, read back in the same zone."""
    return f"{column} >= TIMESTAMP '{at}'"


def as_text(at: Column) -> Column:
    return F.date_format(at, "yyyy-MM-dd HH:mm:ss.SSSSSS")


def earliest(rows: DataFrame, column: str = "start_at") -> str | None:
    return rows.agg(as_text(F.min(column)).alias("at")).first()["at"]


def replace_from_starts(
    spark: SparkSession,
    config: Config,
    name: str,
    new_rows: DataFrame,
    starts: DataFrame,
    at: str,
    keys: tuple[str, ...],
    commit_note: str,
) -> None:
    """Writes a table's rows from the earliest start on: `new_rows` + its own rows nothing reached."""
    since = earliest(starts)
    if since is None:
        write_table(spark, config, name, new_rows, commit_note, None)
        return
    condition = timestamp_condition(at, since)
    old = cluster_rows(spark, config, name, gold.GOLD_SCHEMAS[name]).where(condition)
    rows = metrics_reach.filter_rebuilt(old, starts, at, keys).unionByName(new_rows.select(*old.columns))
    write_table(spark, config, name, rows.localCheckpoint(), commit_note, condition)


def rows_since(
    rows: DataFrame, starts: DataFrame, at: str, keys: tuple[str, ...], start: str = "start_at"
) -> DataFrame:
    """Rows of the keys in `starts` at or after their start (the earliest pushed down to the scan)."""
    since = earliest(starts, start)
    if since is None:
        return rows.limit(0)
    return (
        rows.where(timestamp_condition(at, since))
        .join(F.broadcast(starts.select(*keys, F.col(start).alias("_since"))), on=list(keys), how="inner")
        .where(F.col(at) >= F.col("_since"))
        .drop("_since")
    )
