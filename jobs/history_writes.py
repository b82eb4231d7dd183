"""How the history step keeps and writes its rows: the rows of classic groups framed from a row of the
table (transforms/gold/frames.py), and the stores that replace the cluster's or the touched groups' rows."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.tables import (
    Materialize,
    cluster_rows,
    gold_rows,
    held_on_disk,
    materialized,
    sql_string_literal,
    table_location,
)
from jobs.watermarks import cluster_predicate, write_noted
from transforms.gold import frames
from transforms.gold.generations import GROUP, REBALANCE

# Touched groups up to this many are replaced by a `group_id IN (...)` predicate; beyond it the run
# rewrites the cluster's rows: the untouched groups' rows as they are, plus the rebuilt ones.
MAX_LISTED_GROUPS = 1000


def _group_predicate(config: Config, group_ids: list[str]) -> str:
    listed = ", ".join(sql_string_literal(group_id) for group_id in sorted(group_ids))
    return f"{cluster_predicate(config.cluster)} AND group_id IN ({listed})"


def taken_up(
    spark: SparkSession,
    config: Config,
    touched_generations: DataFrame,
    touched_rebalances: DataFrame,
    settled: DataFrame,
    starts: DataFrame,
) -> frames.TakenUp:
    """The classic groups framed from a row of the table, and their rows before it (read before the run
    rewrites them)."""
    framed = materialized(frames.frame_rows(touched_generations, touched_rebalances, settled, starts))
    kept_generations = held_on_disk(frames.before_frames(touched_generations, framed))
    kept_assignments = held_on_disk(
        cluster_rows(spark, config, "generation_assignments").join(
            kept_generations.where(F.col("generation").isNotNull()).select(*REBALANCE),
            on=list(REBALANCE),
            how="left_semi",
        )
    )
    return frames.TakenUp(framed, kept_generations, kept_assignments)


def cluster_store(spark: SparkSession, config: Config, commit_note: str) -> Materialize:
    """Replaces the cluster's rows of each table; returns them as read back (short lineage)."""

    def store(name: str, rows: DataFrame) -> DataFrame:
        location = table_location(spark, config.table(name))
        write_noted(gold_rows(name, rows), location, commit_note, cluster_predicate(config.cluster))
        return cluster_rows(spark, config, name)

    return store


def groups_store(spark: SparkSession, config: Config, commit_note: str, groups: DataFrame, count: int) -> Materialize:
    """Replaces the rows of `groups` in each table (the others stay); returns theirs as read back."""
    listed = count <= MAX_LISTED_GROUPS
    predicate = (
        _group_predicate(config, [row["group_id"] for row in groups.collect()])
        if listed
        else cluster_predicate(config.cluster)
    )

    def store(name: str, rows: DataFrame) -> DataFrame:
        location = table_location(spark, config.table(name))
        rebuilt = gold_rows(name, rows)
        if not listed:
            kept = cluster_rows(spark, config, name).join(groups, on=list(GROUP), how="left_anti")
            rebuilt = materialized(kept.unionByName(rebuilt))
        write_noted(rebuilt, location, commit_note, predicate)
        return cluster_rows(spark, config, name).join(groups, on=list(GROUP), how="left_semi")

    return store
