"""Rebalance frequency of a group per hour and per day, and storms: its rows of gold
`rebalance_frequency` (rules of transforms/gold/frequency.py). An hour is a storm when it holds at least
`storm_rebalances_per_hour` rebalances; a day is a storm when any of its hours is.

The table is keyed by period, not by incarnation and generation, so a fold emits every hour and day
from a day on (`Rows.frequency_from`) and the caller replaces the group's rows from that day on. The
state keeps, per hour of those days, the rebalances that no later record can change (`settled_hours`).
Assumes, as the coordinator's clock gives them, that record times grow in log order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

PERIOD_HOUR, PERIOD_DAY = "hour", "day"


def hour_of(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def day_of(at: datetime) -> datetime:
    return at.replace(hour=0, minute=0, second=0, microsecond=0)


def hourly(rebalances: Iterable[Mapping], settled: Iterable[list] = ()) -> dict[datetime, list[int]]:
    """Rebalance rows (and hours already counted: [hour, count, moved]) -> hour -> [count, moved]."""
    hours: dict[datetime, list[int]] = {}
    for hour, count, moved in settled:
        counts = hours.setdefault(hour, [0, 0])
        counts[0], counts[1] = counts[0] + count, counts[1] + moved
    for row in rebalances:
        counts = hours.setdefault(hour_of(row["completed_at"]), [0, 0])
        counts[0], counts[1] = counts[0] + 1, counts[1] + row["moved_partition_count"]
    return hours


def frequency_rows(group: Mapping, hours: Mapping[datetime, list[int]], storm_rebalances_per_hour: int) -> list[dict]:
    def row(period: str, start: datetime, count: int, moved: int, storm_hours: int, is_storm: bool) -> dict:
        return {
            **group,
            "period": period,
            "period_start": start,
            "rebalance_count": count,
            "moved_partition_count": moved,
            "storm_hour_count": storm_hours,
            "is_storm": is_storm,
        }

    rows, days = [], {}
    for hour, (count, moved) in sorted(hours.items()):
        is_storm = count >= storm_rebalances_per_hour
        rows.append(row(PERIOD_HOUR, hour, count, moved, int(is_storm), is_storm))
        day = days.setdefault(day_of(hour), [0, 0, 0])
        day[0], day[1], day[2] = day[0] + count, day[1] + moved, day[2] + int(is_storm)
    rows += [row(PERIOD_DAY, day, count, moved, storms, storms > 0) for day, (count, moved, storms) in days.items()]
    return rows
