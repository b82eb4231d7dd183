"""The history fold's writes: each group's rows replaced from its fold's frontier on, and the state where
its fold stopped (`history_state`), one MERGE per table; or, when every group of the cluster was folded
from its first record, the cluster's rows replaced in one write per table (`replace_cluster`).

A table's MERGE deletes a folded group's stored rows at and after its frontier and inserts the fold's
rows, in one commit: a reader sees the group's rows of the night before or of this night, never neither.
The states are written last. A run killed before them folds the same records again from the same states
and replaces the same rows, so the tables end as one uninterrupted run leaves them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.delta_tables import DeltaTable
from jobs.tables import cluster_rows, ensure_table, sql_string_literal, table_location
from jobs.watermarks import cluster_predicate, noting, recording_empty_commits, write_noted
from schemas.ops import history_state_schema
from transforms.gold.history_fold import GROUP
from transforms.history.fold import FOLD_VERSION, FREQUENCY_TABLE

HISTORY_STATE = "history_state"
_MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"
# A MERGE source's column telling a group's frontier (which stored rows give way) from the rows to add.
_MARKER = "_is_frontier_marker"
_FRONTIER = ("frontier_incarnation", "frontier_generation", "frequency_from")
# A stored row at or after its group's frontier (fold.is_at_or_after; rebalance_frequency: Rows.replaces).
_AT_OR_AFTER = (
    "source.frontier_incarnation IS NULL OR target.incarnation > source.frontier_incarnation"
    " OR (target.incarnation = source.frontier_incarnation"
    " AND (source.frontier_generation IS NULL OR target.generation IS NULL"
    " OR target.generation >= source.frontier_generation))"
)
_FREQUENCY_AT_OR_AFTER = "source.frequency_from IS NULL OR target.period_start >= source.frequency_from"


def ensure_state_table(spark: SparkSession, config: Config) -> None:
    ensure_table(spark, config.table(HISTORY_STATE), history_state_schema, partition_by=("cluster",))


def stored_states(spark: SparkSession, config: Config) -> DataFrame:
    """The cluster's states the fold of this version reads (another version's: that group starts over)."""
    states = cluster_rows(spark, config, HISTORY_STATE, history_state_schema)
    return states.where(F.col("fold_version") == F.lit(FOLD_VERSION))


def replace_from_frontiers(
    spark: SparkSession, config: Config, name: str, folded: DataFrame, rows: DataFrame, commit_note: str
) -> None:
    """One MERGE into table `name`: the stored rows of `folded`'s groups at or after their frontiers give
    way to `rows` (their rows from the frontier on)."""
    replaced = _FREQUENCY_AT_OR_AFTER if name == FREQUENCY_TABLE else _AT_OR_AFTER
    with noting(spark, commit_note), recording_empty_commits(spark):
        replace_group_rows(spark, config, name, folded.select(*GROUP, *_FRONTIER), rows, replaced)


def replace_group_rows(
    spark: SparkSession, config: Config, name: str, groups: DataFrame, rows: DataFrame, replaced: str = "TRUE"
) -> None:
    """One MERGE into table `name`: the stored rows of `groups` (GROUP and any columns `replaced` reads as
    source.*) for which the SQL condition `replaced` holds give way to `rows`."""
    markers = groups.withColumn(_MARKER, F.lit(True))
    source = rows.withColumn(_MARKER, F.lit(False)).unionByName(markers, allowMissingColumns=True)
    condition = (
        f"target.cluster = {sql_string_literal(config.cluster)} AND source.{_MARKER}"
        f" AND target.cluster = source.cluster AND target.group_id = source.group_id AND ({replaced})"
    )
    inserted = {f"`{column}`": f"source.`{column}`" for column in rows.columns}
    with _source_not_copied(spark):
        (
            DeltaTable.forName(spark, config.table(name))
            .alias("target")
            .merge(source.alias("source"), condition)
            .whenMatchedDelete()
            .whenNotMatchedInsert(condition=f"NOT source.{_MARKER}", values=inserted)
            .execute()
        )


@contextmanager
def _source_not_copied(spark: SparkSession) -> Iterator[None]:
    """Delta reads a MERGE's source twice (to find the matches, then to write) and by default copies it
    first, in case it changes in between: three Spark jobs a MERGE. These sources are held frames and
    tables read at fixed versions, which cannot change."""
    spark.conf.set(_MATERIALIZE_SOURCE, "none")
    try:
        yield
    finally:
        spark.conf.unset(_MATERIALIZE_SOURCE)


def replace_cluster(spark: SparkSession, config: Config, name: str, rows: DataFrame, commit_note: str) -> None:
    """The cluster's rows of table `name` replaced by `rows` in one commit: what every group's MERGE would
    leave when every group of the cluster was folded from its first record, for a fraction of its queries."""
    table = config.table(name)
    columns = spark.table(table).columns
    write_noted(rows.select(*columns), table_location(spark, table), commit_note, cluster_predicate(config.cluster))


def _states(folded: DataFrame) -> DataFrame:
    return folded.select(
        *GROUP,
        F.lit(FOLD_VERSION).alias("fold_version"),
        "last_source_partition",
        "last_source_offset",
        "commits_from",
        "state_json",
    )


def replace_cluster_states(spark: SparkSession, config: Config, folded: DataFrame, commit_note: str) -> None:
    """The cluster's states replaced by those of `folded` (every group of the cluster)."""
    replace_cluster(spark, config, HISTORY_STATE, _states(folded).where("state_json IS NOT NULL"), commit_note)


def store_states(spark: SparkSession, config: Config, folded: DataFrame, commit_note: str) -> None:
    """The folded groups' new states in place of their stored ones (a group left with none: deleted)."""
    states = _states(folded)
    condition = (
        f"target.cluster = {sql_string_literal(config.cluster)}"
        " AND target.cluster = source.cluster AND target.group_id = source.group_id"
    )
    with noting(spark, commit_note), recording_empty_commits(spark), _source_not_copied(spark):
        (
            DeltaTable.forName(spark, config.table(HISTORY_STATE))
            .alias("target")
            .merge(states.alias("source"), condition)
            .whenMatchedDelete(condition="source.state_json IS NULL")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll(condition="source.state_json IS NOT NULL")
            .execute()
        )
