"""Which commits an incremental history run reads for the rebalances it computes (transforms/gold/resume.py
says which those are and where each group's readings start), named so that Delta skips the other files
by their statistics."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.tables import materialized
from transforms.gold import departures, resume
from transforms.gold.generations import GROUP

# How far before a group's first lookup its commits are read first (resume.narrowed_floors): a partition
# silent for longer makes its group read again from its floor.
NARROWED_MARGIN_MS = 3_600_000


def commit_times_read_by(
    framed: DataFrame,
    assignments: DataFrame,
    share_member_records: DataFrame,
    commits: DataFrame,
    progress: Callable[[str], None],
    margin_ms: int = NARROWED_MARGIN_MS,
) -> DataFrame:
    """departures.commit_times_read_by for the rebalances in `framed`, read from the groups' narrowed
    floors, then from their floors for the groups a narrowed read may answer otherwise (resume.py);
    held. `progress` hears what was read."""
    floors = materialized(resume.commit_floors(framed))
    narrowed = materialized(resume.narrowed_floors(framed, floors, margin_ms))
    read = _commits_from_floors(framed, commits, narrowed, progress)
    times = materialized(departures.commit_times_read_by(framed, assignments, read))
    lookups = departures.commit_lookups(framed, assignments, share_member_records)
    short = materialized(resume.groups_short_of_commits(lookups, times, narrowed))
    count = short.count()
    if count == 0:
        return times
    progress(f"{count:,} group(s) with a lookup before the narrowed floor: their commits read again from the floor")
    again = framed.join(short, on=list(GROUP), how="left_semi")
    floors_again = floors.join(short, on=list(GROUP), how="left_semi")
    times_again = departures.commit_times_read_by(
        again, assignments, _commits_from_floors(again, commits, floors_again, progress)
    )
    return materialized(times.join(short, on=list(GROUP), how="left_anti").unionByName(times_again))


def _commits_from_floors(
    framed: DataFrame, commits: DataFrame, floors: DataFrame, progress: Callable[[str], None]
) -> DataFrame:
    """The commits from `floors` of the rebalances in `framed`, named by literals too: a group's commits
    all sit in its `__consumer_offsets` partition, so the partitions of the groups with a floor from the
    earliest floor on. `progress` hears which."""
    placed = framed.groupBy(*GROUP).agg(
        F.collect_set("source_partition").alias("partitions"),
        F.max(F.col("source_partition").isNull()).alias("has_unplaced"),
    )
    groups = (
        floors.join(placed, on=list(GROUP), how="inner")
        .select(F.col("commit_floor_at").cast("string").alias("floor"), "partitions", "has_unplaced")
        .collect()
    )
    if not groups:
        progress("commits read for the rebalances computed: none (none reads a commit)")
        return resume.commits_from_floors(commits.where(F.lit(False)), floors)
    if any(group["has_unplaced"] for group in groups):
        progress("commits read for the rebalances computed: every commit of their groups")
        return resume.commits_from_floors(commits, floors)
    since = min(group["floor"] for group in groups)
    partitions = sorted({partition for group in groups for partition in group["partitions"]})
    condition = F.col("record_at").isNull() | (
        F.col("source_partition").isin(partitions) & (F.col("record_at") >= F.lit(since).cast("timestamp"))
    )
    # A floor far back makes a night read more of the log: said, so that a slow night can be told from
    # a large one.
    progress(f"commits read for the rebalances computed: {len(partitions)} partitions from {since} on")
    return resume.commits_from_floors(commits.where(condition), floors.select(*GROUP, "commit_floor_at"))
