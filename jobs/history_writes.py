"""How the history step keeps and writes its rows: the rows of groups framed from a row of the table
(transforms/gold/frames.py, epoch_frames.py, epoch_patches.py), and the stores that replace the
cluster's or the touched groups' rows.

The rows a run keeps (a framed group's generations before its frame row, their assignments and
capacity; a settled rebalance's own row, its movements and what-if rows) stay where the table holds them:
the run deletes the touched groups' other rows and adds the ones it computed, in one commit per table.
Rewritten with the rest, they made every night write again nearly the whole of those tables (nearly every
group is touched each night), a cost that grew with the history. The tables have deletion vectors for the
same reason: without them Delta writes again each file holding a deleted row, with every kept row in it,
and a night's commit puts its copies and its new rows in the files the next night's deletes reach.
"""

from __future__ import annotations

import functools
import operator
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.delta_tables import DeltaTable
from jobs.tables import (
    cluster_rows,
    gold_rows,
    held_on_disk,
    materialized,
    sql_string_literal,
    table_location,
)
from jobs.watermarks import cluster_predicate, noting, recording_empty_commits, write_noted
from transforms.gold import epoch_frames, frames
from transforms.gold.generations import GROUP, INCARNATION, REBALANCE

# Touched groups up to this many are replaced by a `group_id IN (...)` predicate; beyond it the run
# rewrites the cluster's rows: the untouched groups' rows as they are, plus the rebuilt ones.
MAX_LISTED_GROUPS = 1000
# Beyond this many runs of replaced keys a table's rows are replaced by a MERGE: a predicate of 2,000 terms
# was too large to compile and ran out of a 1 GiB heap evaluated row by row (ad hoc, 400k rows).
MAX_PREDICATE_RUNS = 200
# A MERGE source's column telling the markers of rows to delete from the rows to add.
_MARKER = "_is_deletion_marker"


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
    group_records: DataFrame,
) -> frames.TakenUp:
    """The groups framed from a row of the table, and their generation rows before it (read before the
    run rewrites them); the epoch groups' frames with their prefixes, read from the touched groups'
    `group_records` (consumer_group_records). An epoch group whose prefix cannot be taken up exactly is
    framed from its first record."""
    framed = materialized(frames.frame_rows(touched_generations, touched_rebalances, settled, starts))
    details = materialized(epoch_frames.frame_details(framed, touched_generations, starts))
    prefixes = held_on_disk(epoch_frames.prefix(group_records, details))
    untaken = materialized(prefixes.where(epoch_frames.UNTAKEN).select(*GROUP).distinct())
    framed, details, prefixes = (
        rows.join(untaken, on=list(GROUP), how="left_anti") for rows in (framed, details, prefixes)
    )
    framed = materialized(framed)
    return frames.TakenUp(
        framed,
        held_on_disk(frames.before_frames(touched_generations, framed)),
        materialized(details),
        prefixes.drop(epoch_frames.UNTAKEN),
    )


class Store(Protocol):
    """Stores a history table's rows and returns the rows it then holds for them, cut from their lineage.
    `kept` (REBALANCE keys): the rows the table holds of these stay as they are, and `rows` are the others."""

    def __call__(self, name: str, rows: DataFrame, kept: DataFrame | None = None) -> DataFrame: ...


def cluster_store(spark: SparkSession, config: Config, commit_note: str) -> Store:
    """Replaces the cluster's rows of each table; returns them as read back (short lineage)."""

    def store(name: str, rows: DataFrame, kept: DataFrame | None = None) -> DataFrame:
        if kept is not None:
            raise ValueError(f"{name}: a run from scratch keeps no rows of the table")
        location = table_location(spark, config.table(name))
        write_noted(gold_rows(name, rows), location, commit_note, cluster_predicate(config.cluster))
        return cluster_rows(spark, config, name)

    return store


def groups_store(spark: SparkSession, config: Config, commit_note: str, groups: DataFrame, count: int) -> Store:
    """Replaces the rows of `groups` in each table (the others stay); returns theirs as read back."""
    listed = count <= MAX_LISTED_GROUPS
    predicate = (
        _group_predicate(config, [row["group_id"] for row in groups.collect()])
        if listed
        else cluster_predicate(config.cluster)
    )

    def store(name: str, rows: DataFrame, kept: DataFrame | None = None) -> DataFrame:
        rebuilt = gold_rows(name, rows)
        if kept is not None:
            _replace_all_but_kept(spark, config, commit_note, name, rebuilt, groups, kept)
            return cluster_rows(spark, config, name).join(groups, on=list(GROUP), how="left_semi")
        location = table_location(spark, config.table(name))
        if not listed:
            kept = cluster_rows(spark, config, name).join(groups, on=list(GROUP), how="left_anti")
            rebuilt = materialized(kept.unionByName(rebuilt))
        write_noted(rebuilt, location, commit_note, predicate)
        return cluster_rows(spark, config, name).join(groups, on=list(GROUP), how="left_semi")

    return store


def _replace_all_but_kept(
    spark: SparkSession,
    config: Config,
    commit_note: str,
    name: str,
    rows: DataFrame,
    groups: DataFrame,
    kept: DataFrame,
) -> None:
    """One commit: the rows of `groups` whose REBALANCE key is not in `kept` deleted, `rows` added.

    A replaceWhere over the runs of replaced keys (_replaced_runs), not a MERGE: with deletion vectors
    Delta deletes by a predicate in one scan that marks the rows, then appends; a MERGE joined its source
    with the table three times (the files touched, the inserts, the deletion vectors). The predicate is
    also checked against every row added: a computed row of a kept key fails the write, not doubles it."""
    rows = held_on_disk(rows)  # read for its keys, then written
    existing = cluster_rows(spark, config, name).join(groups, on=list(GROUP), how="left_semi")
    keys = existing.select(*REBALANCE).unionByName(rows.select(*REBALANCE))
    runs = _replaced_runs(keys, kept)
    if len(runs) > MAX_PREDICATE_RUNS:
        _merge_all_but_kept(spark, config, commit_note, name, rows, existing, kept)
        return
    write_noted(rows, table_location(spark, config.table(name)), commit_note, _replaced_runs_predicate(config, runs))


def _merge_all_but_kept(
    spark: SparkSession, config: Config, commit_note: str, name: str, rows: DataFrame, existing: DataFrame, kept
) -> None:
    """The same commit as one MERGE: a marker row per key to delete beside the rows to add; only markers
    match (null-safe: a row without a generation is matched by its marker too), only the others are added."""
    markers = frames.without_keys(existing.select(*REBALANCE).distinct(), kept).withColumn(_MARKER, F.lit(True))
    source = markers.unionByName(rows.withColumn(_MARKER, F.lit(False)), allowMissingColumns=True)
    is_marked = " AND ".join(
        [f"target.{cluster_predicate(config.cluster)}", f"source.{_MARKER}"]
        + [f"target.{column} <=> source.{column}" for column in REBALANCE]
    )
    with noting(spark, commit_note), recording_empty_commits(spark):
        (
            DeltaTable.forName(spark, config.table(name))
            .alias("target")
            .merge(source.alias("source"), is_marked)
            .whenMatchedDelete()
            .whenNotMatchedInsertAll(condition=f"NOT source.{_MARKER}")
            .execute()
        )


def _replaced_runs(keys: DataFrame, kept: DataFrame) -> list:
    """The runs of consecutive `keys` (by generation, within each incarnation) that are not in `kept`, as
    (cluster, group_id, incarnation, low, high): a few per group, where listing the keys would take a
    literal per rebalance replaced. A key without a generation (a deletion row) is a run of its own, low
    and high null. `keys` may repeat; a kept key with no rows here splits no run (it has none to keep).
    One window over the keys, not a distinct, an anti join and a union of them: each query of a few
    thousand keys cost its seconds of planning and stages, seven times a night."""
    renamed = kept.select(*(F.col(column).alias(f"_kept_{column}") for column in REBALANCE))
    is_kept_key = functools.reduce(
        operator.and_, (F.col(column).eqNullSafe(F.col(f"_kept_{column}")) for column in REBALANCE)
    )
    flagged = keys.join(renamed, on=is_kept_key, how="left").select(
        *REBALANCE, F.col("_kept_group_id").isNotNull().alias("is_kept")
    )
    in_order = (
        Window.partitionBy(*INCARNATION)
        .orderBy(F.col("generation").asc_nulls_first())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    runs = (
        flagged.withColumn("kept_before", F.sum(F.col("is_kept").cast("int")).over(in_order))
        .where(~F.col("is_kept"))
        .groupBy(*INCARNATION, "kept_before", F.col("generation").isNull().alias("without_generation"))
        .agg(F.min("generation").alias("low"), F.max("generation").alias("high"))
        .collect()
    )
    return sorted(runs, key=lambda run: (run["group_id"], run["incarnation"], run["low"] is not None, run["low"] or 0))


def _replaced_runs_predicate(config: Config, runs: list) -> str:
    """A replaceWhere predicate for the rows of `runs` (false for none: the commit still notes the run)."""
    if not runs:
        return f"{cluster_predicate(config.cluster)} AND false"
    groups = ", ".join(sorted({sql_string_literal(run["group_id"]) for run in runs}))
    terms = " OR ".join(
        f"(group_id = {sql_string_literal(run['group_id'])} AND incarnation = {run['incarnation']} AND "
        + ("generation IS NULL)" if run["low"] is None else f"generation BETWEEN {run['low']} AND {run['high']})")
        for run in runs
    )
    return f"{cluster_predicate(config.cluster)} AND group_id IN ({groups}) AND ({terms})"
