"""The `commit_summary` table (transforms/gold/commit_summary.py), kept from one history night to the next.

A night adds its counted commits (new ones, and pending ones its transactions resolved) to the intervals
they fall in: the first and last times only move outwards. A group is summarized again from all its
commits when a change cannot be added so: a deleted row (`forget`), or a new boundary inside an interval
that already holds a later commit (a late backup of its records). With no note to continue from, or
`--full`, the cluster is summarized from all its commits.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.delta_tables import DeltaTable
from jobs.history_state import replace_group_rows
from jobs.tables import cluster_rows, ensure_table, materialized, sql_string_literal, table_location
from jobs.watermarks import CHANGE_DELETE, cluster_predicate, noting, recording_empty_commits, write_noted
from schemas.ops import commit_summary_schema
from transforms.gold import commit_summary, offsets
from transforms.gold.commit_summary import GROUP, SUMMARY_KEY

TABLE = "commit_summary"


def ensure_summary_table(spark: SparkSession, config: Config) -> None:
    ensure_table(spark, config.table(TABLE), commit_summary_schema, partition_by=("cluster",))


def refresh(
    spark: SparkSession,
    config: Config,
    silver: Mapping[str, DataFrame],
    changes: Mapping[str, DataFrame] | None,
    commit_note: str,
) -> DataFrame:
    """Brings the cluster's summary up to `silver` (`changes`: silver's rows changed since the summary's
    note; None: summarize every commit) and returns it."""
    at = commit_summary.boundaries(silver["group_metadata"], silver["consumer_group_records"])
    counted = offsets.filter_uncounted_commits(silver["offset_commits"])
    table = config.table(TABLE)
    if changes is None:
        rows = materialized(commit_summary.summarized(counted, at))
        write_noted(rows, table_location(spark, table), commit_note, cluster_predicate(config.cluster))
        return cluster_rows(spark, config, TABLE)
    stored = cluster_rows(spark, config, TABLE)
    # Aliased: held, the groups keep the attributes of the changes they came from, and a join back with
    # those (below) is a self-join Spark cannot resolve.
    again = materialized(_summarized_again(changes, stored)).select(*[F.col(name).alias(name) for name in GROUP])
    new_commits = changes.get("offset_commits")
    added = None
    if new_commits is not None:
        counted_changes = offsets.filter_uncounted_commits(new_commits.where(F.col("_change_type") != CHANGE_DELETE))
        added = commit_summary.summarized(counted_changes.join(again, on=list(GROUP), how="left_anti"), at)
    with noting(spark, commit_note), recording_empty_commits(spark):
        summarized_again = commit_summary.summarized(counted.join(again, on=list(GROUP), how="left_semi"), at)
        replace_group_rows(spark, config, TABLE, again, summarized_again)
        if added is not None:
            _widen(spark, config, added)
    return cluster_rows(spark, config, TABLE)


def _summarized_again(changes: Mapping[str, DataFrame], stored: DataFrame) -> DataFrame:
    """Groups whose summary the changes cannot be added to: a deleted row, or a new boundary before a
    stored interval's last commit (the interval would split there)."""
    deleted = [rows.where(F.col("_change_type") == F.lit(CHANGE_DELETE)).select(*GROUP) for rows in changes.values()]
    added = {name: rows.where(F.col("_change_type") != F.lit(CHANGE_DELETE)) for name, rows in changes.items()}
    new_at = []
    if "group_metadata" in added:
        new_at.append(commit_summary.boundaries(added["group_metadata"], None))
    if "consumer_group_records" in added:
        new_at.append(commit_summary.boundaries(None, added["consumer_group_records"]))
    found = deleted
    for boundaries in new_at:
        inside = boundaries.join(stored, on=list(GROUP), how="inner").where(
            (F.col("interval_start").isNull() | (F.col("interval_start") < F.col("at")))
            & (F.col("last_at") > F.col("at"))
        )
        found.append(inside.select(*GROUP))
    result = found[0] if found else stored.select(*GROUP).limit(0)
    for more in found[1:]:
        result = result.unionByName(more)
    return result.distinct()


def _widen(spark: SparkSession, config: Config, added: DataFrame) -> None:
    """The night's commits into their intervals: first and last move outwards, new intervals added."""
    matched = " AND ".join(f"target.`{name}` <=> source.`{name}`" for name in SUMMARY_KEY)
    condition = f"target.cluster = {sql_string_literal(config.cluster)} AND {matched}"
    (
        DeltaTable.forName(spark, config.table(TABLE))
        .alias("target")
        .merge(added.alias("source"), condition)
        .whenMatchedUpdate(
            set={
                "first_at": "least(target.first_at, source.first_at)",
                "last_at": "greatest(target.last_at, source.last_at)",
            }
        )
        .whenNotMatchedInsertAll()
        .execute()
    )
