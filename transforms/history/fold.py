"""The fold of one group: `fold(state, records, commits, settings, topic_names) -> (rows, state)`.

- `records`: the group's records (records.classic_records or, for a KIP-848, share or streams group,
  records.consumer_records shapes its silver rows), in log order, after those the state has seen. One
  that is not (a late backup's) raises ValueError: the caller folds the group again from silver, from no
  state. So does a group with both kinds (a classic group converted to the consumer protocol): not folded
  yet.
- `commits`: the group's counted commit times, from the state's `commits_from` on (departures.py).
- rows: every column of gold `generations`, `generation_assignments`, `generation_capacity`,
  `rebalances`, `partition_movements` and (streams groups) `streams_members`, from the state's frontier on
  (see the package docstring), as transforms/gold computes them.

Not here yet: the what-if replay (Kafka's assignors in the JVM, with topic partition counts).

Assumes, as Kafka writes them, that an incarnation's generation numbers grow in log order: a record of a
generation seen before (not the incarnation's last) is gathered into that generation's entry only while
the state still holds it, where a fold from scratch always would.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime

from transforms.history import capacity, epoch_fold, epochs, frequency, generations, rebalances
from transforms.history.departures import CommitTimes
from transforms.history.settings import DEFAULT_SETTINGS, HistorySettings

FOLD_VERSION = 5
# Tables keyed by (incarnation, generation); rebalance_frequency is keyed by period (frequency.py).
GENERATION_TABLES = (
    "generations",
    "generation_assignments",
    "generation_capacity",
    "rebalances",
    "partition_movements",
    "streams_members",  # streams groups' only
)
FREQUENCY_TABLE = "rebalance_frequency"
TABLES = (*GENERATION_TABLES, FREQUENCY_TABLE)
_DATETIME = "__datetime__"


@dataclass
class State:
    """Where a group's fold stopped: its tail of generations (from the closing generation before the
    frontier on), its incarnation count and the frontier from which the next fold emits rows."""

    cluster: str
    group_id: str
    incarnation: int = 0  # the incarnation the next record belongs to
    follows_deletion: bool = False  # the last record was a tombstone (a repeat one is dropped)
    last_generation: int | None = None  # of the incarnation's latest generation, for previous_generation
    entries: list[dict] = field(default_factory=list)
    frontier: dict | None = None  # {"incarnation", "generation"}: rows from here on can still change
    last_position: list | None = None  # (source_partition, source_offset) of the last record folded
    idle_run_started_at: datetime | None = None  # of the incarnation's run of generations with idle members
    frequency_from: datetime | None = None  # the day from which the next fold emits rebalance_frequency
    settled_hours: list[list] = field(default_factory=list)  # [hour, rebalances, moves] below the frontier
    replay: dict | None = None  # an epoch group's: what its records say now (epochs.py); None: a classic group
    own_records: dict = field(default_factory=dict)  # epoch groups: member_id -> its own records' times (epoch_fold)
    topology: dict = field(default_factory=dict)  # streams groups: their last topology records (topology.py)
    fold_version: int = FOLD_VERSION

    @property
    def commits_from(self) -> datetime | None:
        """The earliest commit time the next fold can read (None: none before its new records)."""
        if self.replay is not None:
            return epoch_fold.commits_from(self)
        return self.entries[0]["recorded_at"] if self.entries else None

    def to_dict(self) -> dict:
        return _encode({item.name: getattr(self, item.name) for item in fields(self)})

    @classmethod
    def from_dict(cls, stored: Mapping) -> State | None:
        """The state, or None when another fold version wrote it: the group is folded from scratch."""
        if stored.get("fold_version") != FOLD_VERSION:
            return None
        return cls(**_decode(dict(stored)))


@dataclass
class Rows:
    """A fold's rows per table. They replace the group's stored rows at and after `frontier`, and its
    rebalance_frequency rows from the day `frequency_from` on (all of them when None): see `replaces`."""

    frontier: dict | None
    frequency_from: datetime | None
    tables: dict[str, list[dict]]

    def replaces(self, table: str, stored: Mapping) -> bool:
        """Whether a stored row of the group gives way to these rows."""
        if table == FREQUENCY_TABLE:
            return self.frequency_from is None or stored["period_start"] >= self.frequency_from
        return is_at_or_after(self.frontier, stored)


def is_at_or_after(frontier: Mapping | None, row: Mapping) -> bool:
    """Whether a row of any of the tables is at or after a frontier: a later incarnation, or the
    frontier's with a generation at or above the frontier's, or a deletion (generation null)."""
    if frontier is None or row["incarnation"] > frontier["incarnation"]:
        return True
    if row["incarnation"] < frontier["incarnation"]:
        return False
    return frontier["generation"] is None or row["generation"] is None or row["generation"] >= frontier["generation"]


def fold(
    state: State | None,
    records: Iterable[Mapping],
    commits: Iterable[tuple] = (),
    settings: HistorySettings = DEFAULT_SETTINGS,
    topic_names: epoch_fold.epoch_rows.TopicNames | None = None,
) -> tuple[Rows, State | None]:
    """`topic_names`: a KIP-848 group's topic id -> (topic, topic_name_source), for the ids its records
    name (epoch_rows.py); rows from the frontier on are named with it."""
    records = list(records)
    if state is None and not records:
        return Rows(None, None, {name: [] for name in TABLES}), None
    if state is None:
        replay = epochs.new_replay() if "record_type" in records[0] else None
        state = State(records[0]["cluster"], records[0]["group_id"], replay=replay)
    if state.replay is None:  # a classic entry's fields are changed in place, never what they hold
        new = replace(state, entries=[dict(entry) for entry in state.entries])
    else:  # and a KIP-848 member's holdings too
        new = copy.deepcopy(state)
    for record in records:
        position = [record["source_partition"], record["source_offset"]]
        if new.last_position is not None and position <= new.last_position:
            raise ValueError(f"record at {position} is not after {new.last_position}: re-fold the group from None")
        if ("record_type" in record) != (new.replay is not None):
            raise ValueError(f"record at {position}: classic and KIP-848 records in one group are not folded yet")
        epoch_fold.add(new, record) if new.replay is not None else _add(new, record)
        new.last_position = position
    _decide_revoke_rounds(new, settings)
    tables, open_entries = _rows(new, CommitTimes(commits), settings, topic_names or {})
    emitted = {name: [row for row in rows if is_at_or_after(state.frontier, row)] for name, rows in tables.items()}
    last_recorded_at = max((entry["last_recorded_at"] for entry in new.entries), default=None)
    frontier_at = _trim(new, open_entries)
    emitted[FREQUENCY_TABLE] = _count_frequency(
        state, new, emitted["rebalances"], frontier_at or last_recorded_at, settings
    )
    return Rows(state.frontier, state.frequency_from, emitted), new


def _count_frequency(
    state: State, new: State, recomputed: list[dict], settles_before: datetime | None, settings: HistorySettings
) -> list[dict]:
    """The hours and days of the rebalances from the old frontier on, with the hours counted before it;
    keeps in `new` the counts below the new frontier from the day of `settles_before` on (no later
    rebalance can complete before it)."""
    group = {"cluster": state.cluster, "group_id": state.group_id}
    hours = frequency.hourly(recomputed, state.settled_hours)
    rows = frequency.frequency_rows(group, hours, settings.storm_rebalances_per_hour)
    if settles_before is not None:
        new.frequency_from = frequency.day_of(settles_before)
    settled = frequency.hourly(
        [row for row in recomputed if not is_at_or_after(new.frontier, row)], state.settled_hours
    )
    new.settled_hours = [[hour, *counts] for hour, counts in sorted(settled.items()) if hour >= new.frequency_from]
    return rows


def _add(state: State, record: Mapping) -> None:
    if record["is_tombstone"]:
        if not state.follows_deletion:
            state.entries.append(generations.new_entry(record, state.incarnation, state.last_generation))
            state.incarnation, state.last_generation, state.idle_run_started_at = state.incarnation + 1, None, None
        state.follows_deletion = True
        return
    state.follows_deletion = False
    same = [
        e
        for e in state.entries
        if e["incarnation"] == state.incarnation and not e["is_deletion"] and e["generation"] == record["generation"]
    ]
    if same:
        generations.add_record(same[0], record)
        return
    entry = generations.new_entry(record, state.incarnation, state.last_generation)
    if capacity.is_measured(entry):
        state.idle_run_started_at = entry["idle_since"] = capacity.idle_since(entry, state.idle_run_started_at)
    state.entries.append(entry)
    state.last_generation = record["generation"]


def _live_by_incarnation(entries: Sequence[dict]) -> dict[int, list[dict]]:
    live: dict[int, list[dict]] = {}
    for entry in entries:
        if not entry["is_deletion"]:
            live.setdefault(entry["incarnation"], []).append(entry)
    return live


def _decide_revoke_rounds(state: State, settings: HistorySettings) -> None:
    """Decides each generation whose successor has come (or whose incarnation has ended)."""
    for incarnation, live in _live_by_incarnation(state.entries).items():
        for index, entry in enumerate(live):
            if entry["is_revoke_round"] is not None:
                continue
            if index + 1 < len(live):
                previous = live[index - 1] if index > 0 else None
                if previous is not None and previous["generation"] != entry["previous_generation"]:
                    previous = None
                entry["is_revoke_round"] = rebalances.is_revoke_round(
                    entry, previous, live[index + 1], settings.cooperative_round_gap_ms
                )
            elif incarnation < state.incarnation:
                entry["is_revoke_round"] = False


def _rows(state: State, commits: CommitTimes, settings: HistorySettings, names) -> tuple[dict, list[dict]]:
    """Every row the tail's entries give, and the closing generations whose rebalance can still change."""
    group = {"cluster": state.cluster, "group_id": state.group_id}
    tables: dict[str, list[dict]] = {name: [] for name in TABLES}
    if state.replay is not None:
        return tables, epoch_fold.rows(state, commits, settings, names, tables)
    for index, entry in enumerate(state.entries):
        tables["generations"].append(generations.generation_row(group, entry))
        if entry["is_deletion"]:
            continue
        following = state.entries[index + 1] if index + 1 < len(state.entries) else None
        same_life = following is not None and following["incarnation"] == entry["incarnation"]
        valid_until = following["recorded_at"] if same_life else None
        tables["generation_assignments"].extend(generations.assignment_rows(group, entry, valid_until))
        measured = capacity.capacity_row(group, entry, valid_until) if capacity.is_measured(entry) else None
        if measured is not None:
            tables["generation_capacity"].append(measured)
    open_entries = []
    for live in _live_by_incarnation(state.entries).values():
        for rounds, closing, before in rebalances.logical_rebalances(live):
            row, movements, is_open = rebalances.rebalance_rows(group, rounds, closing, before, commits, settings)
            tables["rebalances"].append(row)
            tables["partition_movements"].extend(movements)
            if is_open:
                open_entries.append(closing)
    return tables, open_entries


def _trim(state: State, open_entries: list[dict]) -> datetime | None:
    """Sets the frontier (the earliest generation whose rows can still change) and keeps the entries from
    the closing generation before it on; returns the frontier's first record time (None: no frontier)."""
    entries = state.entries
    candidates = [index for index, entry in enumerate(entries) if any(entry is e for e in open_entries)]
    live_now = [i for i, e in enumerate(entries) if e["incarnation"] == state.incarnation and not e["is_deletion"]]
    if live_now:
        candidates.append(live_now[-1])
    if state.replay is not None:
        candidates.extend(epoch_fold.changing(state))
    if not candidates:
        if state.replay is not None:
            epoch_fold.trimmed(state, len(entries))
        state.entries, state.frontier = [], {"incarnation": state.incarnation, "generation": None}
        return None
    start = min(candidates)
    frontier = entries[start]
    state.frontier = {"incarnation": frontier["incarnation"], "generation": frontier["generation"]}
    while start > 0 and entries[start - 1]["incarnation"] == frontier["incarnation"]:
        start -= 1
        if not entries[start]["is_revoke_round"]:
            break  # the closing generation before the frontier's rounds: its rebalance's "before"
    if state.replay is not None:
        epoch_fold.trimmed(state, start)
    state.entries = entries[start:]
    return frontier["recorded_at"]


def _encode(value):
    if isinstance(value, datetime):
        return {_DATETIME: value.isoformat()}
    if isinstance(value, dict):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(item) for item in value]
    return value


def _decode(value):
    if isinstance(value, dict):
        if set(value) == {_DATETIME}:
            return datetime.fromisoformat(value[_DATETIME])
        return {key: _decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decode(item) for item in value]
    return value
