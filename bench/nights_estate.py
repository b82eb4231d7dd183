"""How many consumer groups make an estate write about N records a day (bench/nights.py).

The generator's groups are drawn one after another from one random stream, so an estate of G groups is
the first G groups of any larger one: the records a day grow with G (not smoothly: a group may read
a 256-partition topic). Each candidate is measured by a short pilot run of the coordinators, as
bench.generate sizes its window (the rate once every group has reached its commit cadence), and the
smallest G reaching the target or the one below it, whichever is closer, is taken.
"""

from __future__ import annotations

from functools import cache

from bench.estate import WINDOW_START_MS, EstateShape, build_estate
from bench.generate import PILOT_WINDOW_MS, groups_by_partition
from bench.simulate import Coordinator

DAY_MS = 86_400_000
MAX_GROUPS = 20_000


def records_per_day(groups: int, seed: int, max_partitions: int) -> float:
    """The steady rate of a pilot run of the estate's first `groups` groups, per day (no compaction)."""
    return _rate(groups, seed, max_partitions)


@cache
def _rate(groups: int, seed: int, max_partitions: int) -> float:
    shape = EstateShape(groups=groups, max_partitions=max_partitions, cleaned_fraction=0.0)
    pilot = build_estate(seed, shape, PILOT_WINDOW_MS)
    steady_from = WINDOW_START_MS + PILOT_WINDOW_MS // 2
    steady = sum(
        len(append.records)
        for partition, plans in groups_by_partition(pilot).items()
        for append in Coordinator(pilot, partition, seed).run(plans)
        if append.at_ms >= steady_from
    )
    return steady / (PILOT_WINDOW_MS // 2) * DAY_MS


def groups_for(target_per_day: int, seed: int, max_partitions: int) -> int:
    """The number of groups whose estate writes closest to `target_per_day` records a day."""
    low, high = 0, 1
    while high < MAX_GROUPS and records_per_day(high, seed, max_partitions) < target_per_day:
        low, high = high, high * 2
    while high - low > 1:  # rate(low) < target <= rate(high), rate(0) = 0
        middle = (low + high) // 2
        low, high = (middle, high) if records_per_day(middle, seed, max_partitions) < target_per_day else (low, middle)
    if low == 0:
        return high
    below, above = records_per_day(low, seed, max_partitions), records_per_day(high, seed, max_partitions)
    return low if target_per_day - below < above - target_per_day else high
