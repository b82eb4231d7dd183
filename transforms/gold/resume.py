"""Where an incremental history run can take up a touched group's rebalances instead of recomputing them.

The expensive input of history is a group's offset commits (nearly every record of the log); its group
records are few. So an incremental run still frames every rebalance of a touched group from its group
records, but computes the rebalances' commit readings (departures, pause) only for the ones a night
can change, from the commits at and after the earliest moment those read, and keeps the others' rows.

A group's changes start at a log position and a time. Every record of a group (its group records and
its commits) sits in one `__consumer_offsets` partition, so `changed_from_offset`, the lowest offset of
any changed row of it, is where its log changed (new records, a late backup, a transaction resolved
late, a forgotten group); `changed_from_at` is the earliest record_at of those rows. A rebalance in the
table is *settled* (kept as it is) when:
- two later generations of its incarnation were recorded before `changed_from_offset` in the log. A
  generation's row is final once the next one is recorded (its records end there:
  transforms.gold.epochs, generations), and a rebalance reads the generation it closes, the ones of its
  rounds and the one after (rebalances._revoke_rounds), so its frame cannot change;
- its readings, which go by record time, cannot change: a departure reads its leavers' last commit (and
  a share member's own last record) at or before the join, so the join must precede `changed_from_at`;
  an eager rebalance also reads its group's first commit after completion, which lies at or before
  join + estimated pause, so that must precede it too; an unknown pause is final when the group
  committed nothing in the generation before the join (`no_commit_in_generation`), and otherwise waits
  for the group's first commit after it: it stays as it is on a night that changed none of the group's
  commits (a group that stopped committing; else its commit floor would hold every night's read of
  commits at that rebalance), and is computed again on any other.
A group whose changes or generations lack a position or a time, or lie in more than one partition, or
which has no change at all (touched by a renamed topic id) settles none.

The rebalances computed read commits from the group's `commit_floor_at`: the minute of the earliest
`before_recorded_at` / `before_last_recorded_at` among them, or of a leaver's own last record (a
rebalance without either, an incarnation's first, reads no commit). A reading never uses an earlier
commit: a leaver's last sign of life is the latest of its commits and its generation's last record (a
KIP-848, streams or share member's: its own last record; departures.members_left), and a
pause counts only from a commit in the generation before (departures.pause_estimates). Whole minutes, as
departures.commit_times_around reduces commits by minute. Such a floor can lie days back (a group stable
for a week: its `before` generation), while a lookup nearly always lands minutes before it: so a run
reads from a floor narrowed to an hour before the group's first lookup, and again from the floor only
for the groups whose lookups the narrowed read cannot answer for sure (narrowed_floors,
groups_short_of_commits).
"""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from transforms.gold.departures import MINUTE_MS, PAUSE_NO_COMMIT_BEFORE, PROTOCOL_EAGER
from transforms.gold.generations import GROUP, INCARNATION, REBALANCE


def change_starts(changed_rows: list[DataFrame], changed_commits: DataFrame, groups: DataFrame) -> DataFrame:
    """Changed rows of the silver tables (the commits' as touched.commit_change_summary rows,
    `changed_commits`, among them) + the touched groups -> (cluster, group_id, changed_from_offset,
    changed_from_at, source_partition, has_changed_commits); the first two null where a group settles
    nothing."""
    changed = functools.reduce(
        DataFrame.unionByName,
        [rows.select(*GROUP, "source_partition", "source_offset", "record_at") for rows in changed_rows],
    )
    is_placed = (F.count_distinct("source_partition") == 1) & ~F.max(
        F.col("source_partition").isNull() | F.col("source_offset").isNull() | F.col("record_at").isNull()
    )
    starts = changed.groupBy(*GROUP).agg(
        F.when(is_placed, F.min("source_offset")).alias("changed_from_offset"),
        F.when(is_placed, F.min("record_at")).alias("changed_from_at"),
        F.first("source_partition", ignorenulls=True).alias("source_partition"),
    )
    with_commits = changed_commits.select(*GROUP).distinct().withColumn("has_changed_commits", F.lit(True))
    return (
        groups.select(*GROUP)
        .join(starts, on=list(GROUP), how="left")
        .join(with_commits, on=list(GROUP), how="left")
        .fillna(False, subset=["has_changed_commits"])
    )


def settled_rebalances(rebalances: DataFrame, generations: DataFrame, starts: DataFrame) -> DataFrame:
    """Gold rebalances and generations (as the tables hold them) of the touched groups + change_starts ->
    the rebalance rows a run keeps as they are (see the module docstring)."""
    placed = starts.where(F.col("changed_from_offset").isNotNull()).withColumnRenamed(
        "source_partition", "changed_partition"
    )
    # A rebalance has two later generations recorded before the change when its generation is below
    # the second highest of those recorded before it: one pass over the generations, not a pairing of
    # each rebalance with every later generation (which grows with the square of a group's history).
    recorded_before_change = (
        generations.join(placed, on=list(GROUP), how="inner")
        .where(
            (F.col("source_partition") == F.col("changed_partition"))
            & (F.col("source_offset") < F.col("changed_from_offset"))
        )
        .groupBy(*INCARNATION, "changed_from_at", "has_changed_commits")
        .agg(F.try_element_at(F.sort_array(F.collect_list("generation"), asc=False), F.lit(2)).alias("second_highest"))
    )
    later_generations = (
        rebalances.select(*REBALANCE)
        .join(recorded_before_change, on=list(INCARNATION), how="inner")
        .where(F.col("generation") < F.col("second_highest"))
        .drop("second_highest")
    )
    start = F.col("changed_from_at")
    pause_read_until = F.timestamp_millis(F.unix_millis("join_completed_at") + F.col("estimated_pause_ms"))
    readings_final = (F.col("join_completed_at") < start) & (
        (F.col("rebalance_protocol") != F.lit(PROTOCOL_EAGER))
        | (F.col("estimated_pause_ms").isNotNull() & (pause_read_until < start))
        | (F.col("pause_estimate_method") == F.lit(PAUSE_NO_COMMIT_BEFORE))
        | (F.col("estimated_pause_ms").isNull() & ~F.col("has_changed_commits"))
    )
    return (
        rebalances.join(later_generations, on=list(REBALANCE), how="inner")
        .where(readings_final)
        .drop("changed_from_at", "has_changed_commits")
    )


def commit_floors(framed: DataFrame, lookups: DataFrame) -> DataFrame:
    """The framed rebalances to compute + their departures.commit_lookups -> (cluster, group_id,
    commit_floor_at) per group whose rebalances read commits: the minute its commit readings start at,
    that of the earliest generation a rebalance reads or sign of life a lookup starts from (a KIP-848 or
    streams leaver's own last record can precede both generations of its rebalance). A rebalance after
    no generation of the log (an incarnation's first) reads none: it has no leavers, and no pause
    (departures._pause_probes)."""
    generations_read = framed.select(*GROUP, F.least("before_recorded_at", "before_last_recorded_at").alias("from_at"))
    known = lookups.select(*GROUP, F.col("known_from").alias("from_at"))
    return (
        generations_read.unionByName(known)
        .where(F.col("from_at").isNotNull())
        .groupBy(*GROUP)
        .agg(
            F.timestamp_millis(F.floor(F.unix_millis(F.min("from_at")) / F.lit(MINUTE_MS)) * F.lit(MINUTE_MS)).alias(
                "commit_floor_at"
            ),
        )
    )


def silent_spans(rebalances: DataFrame, starts: DataFrame) -> DataFrame:
    """Gold rebalances of the touched groups (as the tables hold them) + change_starts -> (cluster,
    group_id, silent_after, silent_until): a span of time in which the group has no commit, so a run
    reading its commits may skip it (whatever other groups of its partition committed then).

    An eager rebalance whose pause still waits (pause and method null) found no commit of its group
    after its completion; a row like that is recomputed on any night that changes the group's commits
    (settled_rebalances), so since its last computation no commit of the group before
    `changed_from_at` has changed. Hence none lies after the completion and before the change: the span
    of a group that stopped committing for days, which a night that brings its commits back would
    otherwise read in every partition its floor reaches."""
    is_waiting = (
        (F.col("rebalance_protocol") == F.lit(PROTOCOL_EAGER))
        & F.col("estimated_pause_ms").isNull()
        & F.col("pause_estimate_method").isNull()
        & (F.col("completed_at") < F.col("changed_from_at"))
    )
    return (
        rebalances.join(starts.where(F.col("changed_from_at").isNotNull()), on=list(GROUP), how="inner")
        .where(is_waiting)
        .groupBy(*GROUP)
        .agg(F.min("completed_at").alias("silent_after"), F.first("changed_from_at").alias("silent_until"))
    )


def commits_from_floors(commits: DataFrame, floors: DataFrame) -> DataFrame:
    """The commits the rebalances computed can read: from each group's floor (and every untimed one)."""
    return (
        commits.join(F.broadcast(floors), on=list(GROUP), how="inner")
        .where(F.col("record_at").isNull() | (F.col("record_at") >= F.col("commit_floor_at")))
        .drop("commit_floor_at")
    )


def narrowed_floors(framed: DataFrame, floors: DataFrame, margin_ms: int) -> DataFrame:
    """commit_floors -> the same with each floor moved up to the minute `margin_ms` before the group's
    first lookup (its earliest join or completion among `framed`) where that is later, and `is_narrowed`.

    A floor is where a lookup's search may have to reach back to: a group stable for a week reads a
    week of its partitions' commits for the one rebalance of the night. Nearly always the commit each
    lookup lands on is minutes before it, so a run reads from the narrowed floor first and reads again
    from the floor only the groups with a lookup that finds nothing there (groups_short_of_commits)."""
    first_lookup = F.min(F.least("join_completed_at", "recorded_at"))
    narrowed_at = F.timestamp_millis(
        F.floor((F.unix_millis("first_lookup_at") - F.lit(margin_ms)) / F.lit(MINUTE_MS)) * F.lit(MINUTE_MS)
    )
    # Not narrowed when the floor would move by less than the margin: a second read costs more than it saves.
    gain_ms = F.unix_millis(narrowed_at) - F.unix_millis("commit_floor_at")
    is_narrowed = F.col("first_lookup_at").isNotNull() & (gain_ms > F.lit(0)) & (gain_ms >= F.lit(margin_ms))
    return (
        framed.groupBy(*GROUP)
        .agg(first_lookup.alias("first_lookup_at"))
        .join(floors, on=list(GROUP), how="inner")
        .select(
            *GROUP,
            F.when(is_narrowed, narrowed_at).otherwise(F.col("commit_floor_at")).alias("commit_floor_at"),
            is_narrowed.alias("is_narrowed"),
        )
    )


def groups_short_of_commits(lookups: DataFrame, commit_times: DataFrame, narrowed: DataFrame) -> DataFrame:
    """departures.commit_lookups + the commit times read from `narrowed` floors -> the narrowed groups
    (cluster, group_id) with a lookup those times may answer otherwise than every commit would.

    A "latest at or before" lookup finds the true latest commit when one lies between the floor and the
    probe, and cannot be changed by a commit before the floor when its `known_from` is at or after the
    floor; the forward lookups start after the narrowed floor (narrowed_floors). Any other lookup may
    land on a commit the narrowed read left out."""
    floor = F.col("floor.commit_floor_at")
    open_lookups = (
        lookups.alias("lookup")
        .join(narrowed.where("is_narrowed").alias("floor"), on=list(GROUP), how="inner")
        .where(F.col("probed_at").isNotNull() & ~F.coalesce(F.col("known_from") >= floor, F.lit(False)))
        .select(*GROUP, "topic", "partition", "probed_at", floor.alias("floor_at"))
    )
    times = commit_times.select(
        *[F.col(key).alias(f"time_{key}") for key in ("cluster", "group_id", "topic", "partition")], "record_at"
    )
    in_partition = F.col("partition").isNull() | (
        (F.col("topic") == F.col("time_topic")) & (F.col("partition") == F.col("time_partition"))
    )
    answered = (
        (F.col("cluster") == F.col("time_cluster"))
        & (F.col("group_id") == F.col("time_group_id"))
        & in_partition
        & F.col("record_at").between(F.col("floor_at"), F.col("probed_at"))
    )
    return open_lookups.join(times, on=answered, how="left_anti").select(*GROUP).distinct()
