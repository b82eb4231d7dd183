"""How members left in a rebalance, and how long an eager rebalance paused consumption: the rules of
transforms/gold/departures.py (its docstring gives the reasoning), over one group's commit times.

The commits are an explicit input (`CommitTimes`): every counted commit of the group (visible, not a
tombstone) as (topic, partition, record_at), at least those at or after the fold state's
`commits_from`. Issue 72 replaces them with a per-minute summary kept beside the fold's state.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from transforms.history.generations import member_key
from transforms.history.settings import HistorySettings

HOW_CLEAN, HOW_TIMEOUT, HOW_UNKNOWN = "clean", "timeout", "unknown"
PAUSE_COMMIT_GAP = "commit_gap"
PAUSE_NO_COMMIT_BEFORE = "no_commit_in_generation"
_NAIVE_EPOCH = datetime(1970, 1, 1)
_AWARE_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def unix_millis(at: datetime) -> int:
    """Spark's unix_millis: milliseconds since the epoch, truncated (naive times are UTC)."""
    since = at - (_NAIVE_EPOCH if at.tzinfo is None else _AWARE_EPOCH)
    return (since.days * 86_400_000_000 + since.seconds * 1_000_000 + since.microseconds) // 1000


class CommitTimes:
    """A group's counted commit times, per partition and for the whole group, for as-of lookups."""

    def __init__(self, commits: Iterable[tuple[str, int, datetime]] = ()):
        per_partition: dict[tuple[str, int], list[datetime]] = defaultdict(list)
        for topic, partition, at in commits:
            per_partition[(topic, partition)].append(at)
        self._per_partition = {key: sorted(times) for key, times in per_partition.items()}
        self._group = sorted(at for times in self._per_partition.values() for at in times)

    def latest_at_or_before(self, at: datetime, topic: str | None = None, partition: int | None = None):
        """The latest commit time <= `at`, of one partition (or of the group when none is named)."""
        times = self._group if topic is None else self._per_partition.get((topic, partition), [])
        index = bisect.bisect_right(times, at)
        return times[index - 1] if index else None

    def earliest_after(self, at: datetime):
        """The group's earliest commit time > `at`."""
        index = bisect.bisect_right(self._group, at)
        return self._group[index] if index < len(self._group) else None


def _sort_key(departure: Mapping) -> tuple:
    """Spark's array_sort of DEPARTURE structs: field by field, a null before any value."""
    return tuple((value is not None, value if value is not None else 0) for value in departure.values())


# A KIP-848 member's last own record at or before a time: (member_id, at) -> its time, or None.
OwnRecords = Callable[[str, datetime], datetime | None]


def members_left(
    left_members: Sequence[Mapping],
    before_owned: Sequence[Mapping],
    before_last_recorded_at: datetime | None,
    join_completed_at: datetime,
    commits: CommitTimes,
    settings: HistorySettings,
    own_records: OwnRecords | None = None,
    commits_follow_heartbeats: bool = True,
) -> list[dict]:
    """Each member that left -> its DEPARTURE: its last sign of life (a classic member: the last record of
    the generation it left; an epoch group's member: its last own record, `own_records`, with no
    generation's record given; either: its partitions' last commit at or before the join) and what the
    silence says. A member whose records state no session timeout may have committed up to a heartbeat
    interval after its last heartbeat, unless it commits nothing (`commits_follow_heartbeats` False: a
    share member), when the full default session timeout applies."""
    departures = []
    for member in left_members:
        key = member_key(member)
        commit_times = [
            commits.latest_at_or_before(join_completed_at, owned["topic"], owned["partition"])
            for owned in before_owned
            if owned["member_key"] == key
        ]
        own = None if own_records is None else own_records(member["member_id"], join_completed_at)
        signs = [at for at in (before_last_recorded_at, own, *commit_times) if at is not None]
        last_seen = max(signs) if signs else None
        silent_ms = None if last_seen is None else unix_millis(join_completed_at) - unix_millis(last_seen)
        session_ms = member["session_timeout_ms"]
        timeout_ms = session_ms if session_ms is not None else settings.default_session_timeout_ms
        heartbeat_ms = settings.default_heartbeat_interval_ms if session_ms is None and commits_follow_heartbeats else 0
        how = HOW_UNKNOWN
        if silent_ms is not None and silent_ms < timeout_ms - heartbeat_ms:
            how = HOW_CLEAN
        elif silent_ms is not None and silent_ms <= timeout_ms + settings.departure_slack_ms:
            how = HOW_TIMEOUT
        departures.append(
            {
                "member_id": member["member_id"],
                "group_instance_id": member["group_instance_id"],
                "how": how,
                "last_seen_at": last_seen,
                "silent_ms": silent_ms,
                "session_timeout_ms": timeout_ms,
            }
        )
    return sorted(departures, key=_sort_key)


def pause_estimate(
    join_completed_at: datetime, completed_at: datetime, before_recorded_at: datetime | None, commits: CommitTimes
) -> tuple[int | None, str | None, bool]:
    """An eager rebalance's (estimated_pause_ms, pause_estimate_method, is_open): the gap in the group's
    commits from its last at or before the join to its first after completion. Open (both None) while
    the group has committed nothing since: a later commit sets it."""
    if before_recorded_at is None:  # the group's first generation in the log: nothing to have committed in
        return None, PAUSE_NO_COMMIT_BEFORE, False
    last_before = commits.latest_at_or_before(join_completed_at)
    if last_before is None or last_before < before_recorded_at:
        return None, PAUSE_NO_COMMIT_BEFORE, False
    first_after = commits.earliest_after(completed_at)
    if first_after is None:
        return None, None, True
    return unix_millis(first_after) - unix_millis(last_before), PAUSE_COMMIT_GAP, False
