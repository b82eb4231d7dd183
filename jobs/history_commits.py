"""Which commits an incremental history run reads for the rebalances it computes (transforms/gold/resume.py
says which those are and where each group's readings start), named so that Delta skips the other files
by their statistics."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.tables import held_on_disk, materialized
from transforms.gold import departures, resume
from transforms.gold.generations import GROUP

# How far before a group's first lookup its commits are read first (resume.narrowed_floors): a partition
# silent for longer makes its group read again from its floor.
NARROWED_MARGIN_MS = 3_600_000


def commit_times_read_by(
    framed: DataFrame,
    assignments: DataFrame,
    member_own_records: DataFrame,
    commits: DataFrame,
    progress: Callable[[str], None],
    margin_ms: int = NARROWED_MARGIN_MS,
    silent: DataFrame | None = None,
) -> DataFrame:
    """departures.commit_times_read_by for the rebalances in `framed`, read from the groups' narrowed
    floors, then from their floors for the groups a narrowed read may answer otherwise (resume.py);
    held (two held frames for a run that read again). `progress` hears what was read."""
    lookups = departures.commit_lookups(framed, assignments, member_own_records)
    floors = materialized(resume.commit_floors(framed, lookups))
    narrowed = materialized(resume.narrowed_floors(framed, floors, margin_ms))
    read = _commits_from_floors(framed, commits, narrowed, silent, progress)
    times = held_on_disk(departures.commit_times_read_by(framed, assignments, read))
    short = materialized(resume.groups_short_of_commits(lookups, times, narrowed))
    count = short.count()
    if count == 0:
        return times
    progress(f"{count:,} group(s) with a lookup before the narrowed floor: their commits read again from the floor")
    again = framed.join(short, on=list(GROUP), how="left_semi")
    floors_again = floors.join(short, on=list(GROUP), how="left_semi")
    times_again = held_on_disk(
        departures.commit_times_read_by(
            again, assignments, _commits_from_floors(again, commits, floors_again, silent, progress)
        )
    )
    # Both sides held: the union is read as it stands (holding it again copied every time read, 1.6M rows
    # at the bench's night 7, for a group or two read again).
    return times.join(F.broadcast(short), on=list(GROUP), how="left_anti").unionByName(times_again)


def _commits_from_floors(
    framed: DataFrame,
    commits: DataFrame,
    floors: DataFrame,
    silent: DataFrame | None,
    progress: Callable[[str], None],
) -> DataFrame:
    """The commits from `floors` of the rebalances in `framed`, named by literals too: a group's commits
    all sit in its `__consumer_offsets` partition, so each partition from the floors of its groups on,
    past the spans in which a group has no commit (`silent`: resume.silent_spans). `progress` hears
    which."""
    placed = framed.groupBy(*GROUP).agg(
        F.collect_set("source_partition").alias("partitions"),
        F.max(F.col("source_partition").isNull()).alias("has_unplaced"),
    )
    groups = (
        _with_silences(floors.join(placed, on=list(GROUP), how="inner"), silent)
        .select(
            *[F.col(name).cast("string").alias(name) for name in ("commit_floor_at", "silent_after", "silent_until")],
            "partitions",
            "has_unplaced",
        )
        .collect()
    )
    if not groups:
        progress("commits read for the rebalances computed: none (none reads a commit)")
        return resume.commits_from_floors(commits.where(F.lit(False)), floors)
    if any(group["has_unplaced"] for group in groups):
        progress("commits read for the rebalances computed: every commit of their groups")
        return resume.commits_from_floors(commits, floors)
    windows = _partition_windows(groups)
    by_windows: dict[tuple[Window, ...], list[int]] = {}
    for partition, spans in sorted(windows.items()):
        by_windows.setdefault(spans, []).append(partition)
    condition = F.col("record_at").isNull() | functools.reduce(
        operator.or_,
        [F.col("source_partition").isin(partitions) & _within(spans) for spans, partitions in by_windows.items()],
    )
    # A floor far back makes a night read more of the log: said, so that a slow night can be told from
    # a large one.
    progress(f"commits read for the rebalances computed: {_described(by_windows)}")
    return resume.commits_from_floors(commits.where(condition), floors.select(*GROUP, "commit_floor_at"))


def _with_silences(groups: DataFrame, silent: DataFrame | None) -> DataFrame:
    if silent is not None:
        return groups.join(silent, on=list(GROUP), how="left")
    none = F.lit(None).cast("timestamp")
    return groups.withColumns({"silent_after": none, "silent_until": none})


# A span of record times read, [start, end] (end None: on to the last commit); as timestamp strings in
# the session's time zone, which order as the times do.
Window = tuple[str, str | None]


def _partition_windows(groups: list) -> dict[int, tuple[Window, ...]]:
    """Each partition's spans to read: the union of its groups' (from the floor on, but a silent span)."""
    spans: dict[int, list[Window]] = {}
    for group in groups:
        floor, after, until = group["commit_floor_at"], group["silent_after"], group["silent_until"]
        if after is not None and until > floor:
            own = [(floor, after), (until, None)] if after >= floor else [(until, None)]
        else:
            own = [(floor, None)]
        for partition in group["partitions"]:
            spans.setdefault(partition, []).extend(own)
    return {partition: _merged(windows) for partition, windows in spans.items()}


def _merged(windows: list[Window]) -> tuple[Window, ...]:
    merged: list[Window] = []
    # Windows of two groups may start together, one open-ended (end None): it sorts after the other.
    for start, end in sorted(windows, key=lambda window: (window[0], window[1] is None, window[1] or "")):
        if merged and (merged[-1][1] is None or start <= merged[-1][1]):
            last_start, last_end = merged[-1]
            merged[-1] = (last_start, None if last_end is None or end is None else max(last_end, end))
        else:
            merged.append((start, end))
    return tuple(merged)


def _within(spans: tuple[Window, ...]) -> Column:
    record_at = F.col("record_at")
    return functools.reduce(
        operator.or_,
        [
            record_at >= F.lit(start).cast("timestamp")
            if end is None
            else record_at.between(F.lit(start).cast("timestamp"), F.lit(end).cast("timestamp"))
            for start, end in spans
        ],
    )


def _described(by_windows: Mapping[tuple[Window, ...], list[int]], shown: int = 3) -> str:
    """'30 partitions from X on; 1 from Y to Z and from W on', earliest first, the first `shown` kinds."""
    kinds = sorted(by_windows.items(), key=lambda kind: kind[0][0][0])
    parts = [
        f"{len(partitions)} partition{'s' if len(partitions) > 1 else ''} "
        + " and ".join(f"from {start} to {end}" if end else f"from {start} on" for start, end in spans)
        for spans, partitions in kinds[:shown]
    ]
    rest = sum(len(partitions) for _, partitions in kinds[shown:])
    return "; ".join(parts) + (f"; {rest} more from later floors" if rest else "")
