"""The fold's half for epoch groups (KIP-848; share and streams, read as their twins): a group's records into
the state's entries (epochs.py), the entries' rows of every table (a streams group's `streams_members` and
standby task moves: streams.py), and which entries can still change (the frontier's candidates, fold.py).

An epoch's rows can change after later records while it holds a partition still held (the holding's end,
and whether its owner's next epoch row holds it on, are to come), while a member has not reached it (a
STABLE current assignment of it or a later epoch is to come), while it shares a holding with the latest
epoch (whose members' holdings follow their records), and while it is the latest or the one before it (the
latest epoch's type 6 written again, later, makes that one the latest again: epochs.catch_up).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from transforms.history import capacity, epoch_rows, epochs, generations, rebalances, streams, topology
from transforms.history.departures import CommitTimes
from transforms.history.settings import HistorySettings
from transforms.history.twins import GROUP_PROTOCOL_STREAMS


def add(state, record: Mapping) -> None:
    """Folds one KIP-848 record into the state (fold.State)."""
    if record["record_type"] == topology.RECORD_STREAMS_TOPOLOGY:
        topology.seen(state.topology, record)
        return
    if epochs.is_deletion(record):
        if not state.follows_deletion:
            state.entries.append(epochs.deletion_entry(record, state.incarnation, _latest_generation(state)))
            state.incarnation, state.replay = state.incarnation + 1, epochs.next_incarnation(state.replay)
        state.follows_deletion = True
        return
    state.follows_deletion = False
    if epochs.is_own_record(record):
        state.own_records.setdefault(record["member_id"], []).append(record["record_at"])
    if record["record_type"] == epochs.RECORD_TARGET_EPOCH:
        if not record["is_tombstone"]:
            # The last type 6 of an epoch is its start: an earlier one of the same epoch gives way, and the
            # epoch before ends here, its members' current assignments since then its own (as gold reads them).
            epoch = record["assignment_epoch"]
            kept = [e for e in state.entries if not (_is_live(state, e) and e["generation"] == epoch)]
            if len(kept) < len(state.entries) and (before := [e for e in kept if _is_live(state, e)]):
                epochs.catch_up(state.replay, before[-1])
            state.entries = kept
            entry = epochs.epoch_entry(state.replay, record, state.incarnation, _latest_generation(state))
            entry["topology_changed_at"] = topology.changed_at(state.topology)
            state.entries.append(entry)
        return
    epochs.replay_record(state.replay, record, [e for e in state.entries if _is_live(state, e)])


def _is_live(state, entry: Mapping) -> bool:
    return entry["incarnation"] == state.incarnation and not entry["is_deletion"]


def _latest_generation(state) -> int | None:
    live = [e for e in state.entries if _is_live(state, e)]
    return live[-1]["generation"] if live else None


def own_records(state):
    """The state's members' last own record at or before a time (departures.OwnRecords)."""
    return lambda member_id, at: epochs.last_own_record_at(state.own_records, member_id, at)


def _with_idle_since(entries: list[dict], run_started_at: datetime | None) -> datetime | None:
    """Sets each measured entry's `idle_since` along the log; returns where the run stands after them."""
    for entry in entries:
        if entry["is_deletion"]:
            run_started_at = None
        elif capacity.is_measured(entry):
            run_started_at = entry["idle_since"] = capacity.idle_since(entry, run_started_at)
    return run_started_at


def rows(state, commits: CommitTimes, settings: HistorySettings, names: epoch_rows.TopicNames, tables: dict) -> list:
    """Adds the state's entries' rows to `tables`; returns the closing entries whose rebalance can still change
    (none: a KIP-848 rebalance waits for no later commit)."""
    group = {"cluster": state.cluster, "group_id": state.group_id}
    gold = [epoch_rows.gold_entry(entry, names) for entry in state.entries]
    # A streams epoch's own members (their tasks, which the gold shape has no column for), by gold entry.
    streams_epochs = {
        id(gold_entry): entry
        for gold_entry, entry in zip(gold, state.entries, strict=True)
        if entry["group_protocol"] == GROUP_PROTOCOL_STREAMS and not entry["is_deletion"]
    }
    for entry in streams_epochs.values():
        tables["streams_members"].extend(streams.member_rows(group, entry))
    _with_idle_since(gold, state.idle_run_started_at)
    by_incarnation: dict[int, list[dict]] = {}
    for entry in gold:
        by_incarnation.setdefault(entry["incarnation"], []).append(entry)
    for entries in by_incarnation.values():
        tables["generation_assignments"].extend(epoch_rows.assignment_rows(group, entries))
        for index, entry in enumerate(entries):
            tables["generations"].append(generations.generation_row(group, entry))
            valid_until = entries[index + 1]["recorded_at"] if index + 1 < len(entries) else None
            measured = capacity.capacity_row(group, entry, valid_until) if capacity.is_measured(entry) else None
            if measured is not None:
                tables["generation_capacity"].append(measured)
        live = [entry for entry in entries if not entry["is_deletion"]]
        for rounds, closing, before in rebalances.logical_rebalances(live):
            row, movements, _ = rebalances.rebalance_rows(
                group, rounds, closing, before, commits, settings, own_records(state)
            )
            if id(closing) in streams_epochs:
                before_epoch = streams_epochs.get(id(before)) if before is not None else None
                row["moved_standby_task_count"] = streams.standby_task_moves(before_epoch, streams_epochs[id(closing)])
            tables["rebalances"].append(row)
            tables["partition_movements"].extend(movements)
    return []


def _holdings(entry: Mapping) -> set[tuple]:
    return {(m["member_id"], *held[:3]) for m in entry["members"] for held in m["end"] or []}


def changing(state) -> list[int]:
    """Indexes of the entries whose rows can still change (see the module docstring)."""
    live = [index for index, entry in enumerate(state.entries) if _is_live(state, entry)]
    latest = _holdings(state.entries[live[-1]]) if live else set()
    found = []
    for index in live:
        members = state.entries[index]["members"]
        is_open = any(held[3] is None for m in members for held in m["end"] or [])
        is_unreached = any(m["reached_at"] is None for m in members)
        # The latest epoch's start written again makes the one before it the latest again (catch_up).
        is_next_to_latest = index in live[-2:]
        if is_open or is_unreached or is_next_to_latest or _holdings(state.entries[index]) & latest:
            found.append(index)
    return found


def trimmed(state, start: int) -> None:
    """Before the fold drops the entries before `start`: the idle run they leave; the reconciliations and
    epoch bumps of epochs before the earliest kept (epoch numbers grow: no later epoch reads them); what the
    replay remembers of members in neither the group nor a kept entry (a state grows with the group, not
    with everyone it ever had); and the own record times a later rebalance can read (its leavers are
    members of the entries kept, and it looks up to its join, after the earliest kept entry's: every time
    after that, and the last before)."""
    state.idle_run_started_at = _with_idle_since(
        [epoch_rows.gold_entry(entry, {}) for entry in state.entries[:start]], state.idle_run_started_at
    )
    kept = state.entries[start:]
    live = [entry["generation"] for entry in kept if _is_live(state, entry)]
    if live:
        earliest = min(live)
        state.replay["bumps"] = {epoch: at for epoch, at in state.replay["bumps"].items() if int(epoch) >= earliest}
        state.replay["stable"] = {
            member_id: [pair for pair in pairs if pair[0] >= earliest]
            for member_id, pairs in state.replay["stable"].items()
        }
    members = {m["member_id"] for entry in kept for m in entry["members"]} | set(state.replay["members"])
    gone = set(state.replay["trackers"]) | set(state.replay["stable"]) | set(state.replay["streams"])
    epochs.forget_members(state.replay, gone - members)
    if not kept:
        return
    cut = min(entry["join_completed_at"] or entry["recorded_at"] for entry in kept)
    pruned = {}
    for member_id, times in state.own_records.items():
        if member_id in members:
            before = [at for at in times if at < cut]
            pruned[member_id] = ([max(before)] if before else []) + [at for at in times if at >= cut]
    state.own_records = pruned


def commits_from(state) -> datetime | None:
    """The earliest commit a later rebalance can read: its leavers' partitions' commits count only after
    their last own record, and the state keeps each member's last before the first kept entry."""
    if not state.entries:
        return None
    members = {m["member_id"] for entry in state.entries for m in entry["members"]}
    times = [state.entries[0]["recorded_at"], *(min(state.own_records[m]) for m in members if state.own_records.get(m))]
    return min(times)
