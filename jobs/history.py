"""History: silver group records -> gold generations, assignments, rebalances, movements, frequency.

    spark-submit.sh history [--conf conf/<env>.toml] [--cluster NAME]

Reads the silver tables (and the optional `topic_ids` table that names KIP-848 topic ids), rebuilds
every group's generations, and derives its rebalances. Each gold table's rows for the cluster are
replaced atomically, so a re-run gives the same tables. Settings come from the `[gold]` section of
the configuration files (see `GoldSettings`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.config import Config, parse_config
from jobs.runs import JobRun
from jobs.session import build_session
from jobs.tables import ensure_table, replace_cluster_rows
from schemas import gold_tables
from transforms import assignment_math, epochs, frequency, generations, offsets, rebalances

TOPIC_IDS = "topic_ids"
END_OFFSETS = "end_offsets"
HISTORY_TABLES = ("generations", "generation_assignments", "rebalances", "partition_movements", "rebalance_frequency")


@dataclass(frozen=True)
class GoldSettings:
    """The `[gold]` section of conf/*.toml; every key is optional (these are the defaults)."""

    storm_rebalances_per_hour: int = 6  # an hour with this many rebalances is a storm
    departure_slack_ms: int = 30_000  # silence beyond the session timeout still read as a timeout
    consumer_session_timeout_ms: int = 45_000  # KIP-848 members (a broker setting, not in the records)
    consumer_heartbeat_interval_ms: int = 5_000  # KIP-848 members (a broker setting, not in the records)
    cooperative_round_gap_ms: int = 300_000  # max gap between cooperative rounds when no member states one
    status_intervals: int = 10  # Burrow's window: commits (slots) per partition
    status_min_distance_ms: int = 1_000  # Burrow's min-distance: commits closer than this share a slot
    status_allowed_lag: int = 0
    status_minimum_complete: float = 0.0
    status_window_minutes: int = 10  # group roll-up windows
    stale_after_days: int = 7
    offsets_retention_minutes: int = 10_080  # the cluster's offsets.retention.minutes
    expiry_warning_hours: int = 24


def gold_settings(config: Config) -> GoldSettings:
    merged = dict(config.section("gold"))
    unknown = set(merged) - {field.name for field in fields(GoldSettings)}
    if unknown:
        raise ValueError(f"unknown [gold] settings: {sorted(unknown)}")
    return GoldSettings(**merged)


def cluster_rows(spark: SparkSession, config: Config, name: str, schema: StructType | None = None) -> DataFrame:
    """One cluster's rows of a table; an empty frame of `schema` when the (optional) table does not exist."""
    table = config.table(name)
    if schema is not None and not spark.catalog.tableExists(table):
        return spark.createDataFrame([], schema)
    return spark.table(table).where(F.col("cluster") == F.lit(config.cluster))


def gold_rows(name: str, rows: DataFrame) -> DataFrame:
    """Rows in the gold table's column order and types."""
    return rows.select(*[F.col(f.name).cast(f.dataType) for f in gold_tables.GOLD_SCHEMAS[name].fields])


def write_gold(spark: SparkSession, config: Config, run: JobRun, name: str, rows: DataFrame) -> DataFrame:
    """Replaces the cluster's rows of a gold table and returns them as read back (short lineage)."""
    table = config.table(name)
    ensure_table(spark, table, gold_tables.GOLD_SCHEMAS[name], partition_by=("cluster",))
    replace_cluster_rows(spark, table, gold_rows(name, rows), config.cluster)
    run.count_rows(spark, table, name)
    return cluster_rows(spark, config, name)


# Stores one gold table's rows and gives them back cut from their lineage: the job writes Delta tables,
# tests may keep them in memory.
Materialize = Callable[[str, DataFrame], DataFrame]


def materialized(rows: DataFrame) -> DataFrame:
    """An intermediate result computed once and cut from its lineage (it feeds several outputs)."""
    return rows.localCheckpoint(eager=True)


def build_history(
    silver: Mapping[str, DataFrame], topic_ids: DataFrame, settings: GoldSettings, store: Materialize
) -> None:
    """Silver `offset_commits`, `group_metadata`, `group_members`, `consumer_group_records` (any clusters)
    -> every table of HISTORY_TABLES, handed to `store` in dependency order."""
    offset_commits, group_records = silver["offset_commits"], silver["consumer_group_records"]
    names = epochs.topic_names(group_records, offset_commits, topic_ids)
    all_generations = generations.classic_generations(silver["group_metadata"], silver["group_members"]).unionByName(
        epochs.consumer_group_generations(group_records, names)
    )
    gens = store("generations", all_generations)
    assignments = store("generation_assignments", generations.explode_generation_assignments(gens))
    framed = materialized(rebalances.logical_rebalances(gens, assignments, settings.cooperative_round_gap_ms))
    changes = materialized(assignment_math.partition_changes(framed, assignments))
    rebalance_rows = store(
        "rebalances",
        rebalances.rebalances(
            framed,
            changes,
            assignments,
            offsets.filter_uncounted_commits(offset_commits),
            departure_slack_ms=settings.departure_slack_ms,
            default_session_timeout_ms=settings.consumer_session_timeout_ms,
            default_heartbeat_interval_ms=settings.consumer_heartbeat_interval_ms,
        ),
    )
    store("partition_movements", rebalances.partition_movements(framed, changes))
    store("rebalance_frequency", frequency.rebalance_frequency(rebalance_rows, settings.storm_rebalances_per_hour))


SILVER_INPUTS = ("offset_commits", "group_metadata", "group_members", "consumer_group_records")


def history(spark: SparkSession, config: Config, run: JobRun) -> None:
    build_history(
        {name: cluster_rows(spark, config, name) for name in SILVER_INPUTS},
        cluster_rows(spark, config, TOPIC_IDS, gold_tables.topic_ids_schema),
        gold_settings(config),
        lambda name, rows: write_gold(spark, config, run, name, rows),
    )


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_config(argv, __doc__)
    spark = build_session(config, "groupscope-history")
    try:
        with JobRun(spark, config, "history") as run:
            history(spark, config, run)
        return run.exit_code
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
