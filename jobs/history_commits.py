"""Which commits an incremental history run reads for the rebalances it computes (transforms/gold/resume.py
says which those are and where each group's readings start), named so that Delta skips the other files
by their statistics."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.tables import materialized
from transforms.gold import resume
from transforms.gold.generations import GROUP


def commits_read_by(framed: DataFrame, commits: DataFrame, progress: Callable[[str], None]) -> DataFrame:
    """The commits the rebalances in `framed` can read (resume.commit_floors), named by literals too: a
    group's commits all sit in its `__consumer_offsets` partition, so the partitions of the groups with a
    floor from the earliest floor on, and the partitions of those without one (a group's or
    incarnation's first rebalance reads every commit before it) whole. `progress` hears which."""
    floors = materialized(resume.commit_floors(framed))
    placed = framed.groupBy(*GROUP).agg(
        F.collect_set("source_partition").alias("partitions"),
        F.max(F.col("source_partition").isNull()).alias("has_unplaced"),
    )
    groups = (
        floors.join(placed, on=list(GROUP), how="inner")
        .select("has_floor", F.col("commit_floor_at").cast("string").alias("floor"), "partitions", "has_unplaced")
        .collect()
    )
    if not groups or any(group["has_unplaced"] for group in groups):
        progress("commits read for the rebalances computed: every commit of their groups")
        return resume.commits_from_floors(commits, floors)
    floored = [group for group in groups if group["has_floor"]]
    whole = sorted({partition for group in groups if not group["has_floor"] for partition in group["partitions"]})
    condition = F.col("record_at").isNull() | F.col("source_partition").isin(whole)
    read = f"{len(whole)} partitions whole"
    if floored:
        since = min(group["floor"] for group in floored)
        partitions = sorted({partition for group in floored for partition in group["partitions"]})
        condition = condition | (
            F.col("source_partition").isin(partitions) & (F.col("record_at") >= F.lit(since).cast("timestamp"))
        )
        read += f", {len(partitions)} from {since} on"
    # A floor far back (an old generation a rebalance computed again reads from) makes a night read more
    # of the log: said, so that a slow night can be told from a large one.
    progress(f"commits read for the rebalances computed: {read}")
    return resume.commits_from_floors(commits.where(condition), floors)
