"""The fold of KIP-848 consumer groups (transforms/history) on record sequences written out: the
coordinator's records (types 3, 5-8) in, gold rows out, in milliseconds and without a JVM. No Spark."""

from __future__ import annotations

from tests.history_epochs import (
    NAMES,
    ORDER_ID,
    UNRELEASED,
    UNREVOKED,
    current,
    fenced,
    group_epoch,
    joined,
    records,
    target,
    target_epoch,
)
from tests.history_fold import at, commit, fold_at_once, fold_in_two, in_order
from transforms.history.fold import fold
from transforms.history.settings import HistorySettings

# The lab broker's: a member is fenced 10 s after its last heartbeat, which it sends every second.
SETTINGS = HistorySettings(default_session_timeout_ms=10_000, default_heartbeat_interval_ms=1_000)


def by_generation(rows: list[dict]) -> dict:
    return {row["generation"]: row for row in rows}


def owned(generation_row: dict) -> dict:
    return {
        m["member_id"]: [p for a in m["assigned_partitions"] for p in a["partitions"]]
        for m in generation_row["members"]
    }


def targeted(generation_row: dict) -> dict:
    return {
        m["member_id"]: [p for a in m["target_partitions"] for p in a["partitions"]] for m in generation_row["members"]
    }


def crash_with_a_join() -> tuple[list[dict], list[dict]]:
    """k1 alone, k2 joins and k1 hands 3-5 over; k2 crashes after its commit at 20 s and k3 joins at 21 s,
    in the same moment: epoch 3 targets k3 4-5, still k2's, which k3 owns only once k2 is fenced at 30 s
    (its session, 10 s, ran out) and epoch 4 gives them to it."""
    written = records(
        joined(0, 0, "k1"), group_epoch(1, 0, 1), target(2, 0, "k1", range(6)), target_epoch(3, 0, 1),
        current(4, 0.5, "k1", 1, range(6)),
        joined(10, 10, "k2"), group_epoch(11, 10, 2), target(12, 10, "k1", [0, 1, 2]), target(13, 10, "k2", [3, 4, 5]),
        target_epoch(14, 10, 2),
        current(15, 10.5, "k1", 2, [0, 1, 2], pending=[3, 4, 5], state=UNREVOKED),
        current(16, 11, "k1", 2, [0, 1, 2]),
        current(17, 12, "k2", 2, [3, 4, 5]),
        joined(20, 21, "k3"), group_epoch(21, 21, 3), target(22, 21, "k1", [0, 1]), target(23, 21, "k2", [2, 3]),
        target(24, 21, "k3", [4, 5]), target_epoch(25, 21, 3),
        current(26, 21.5, "k3", 3, [], state=UNRELEASED),
        current(27, 22, "k1", 3, [0, 1]),
        fenced(30, 30, "k2"), group_epoch(33, 30, 4), target(34, 30, "k1", [0, 1, 2]), target(35, 30, "k3", [3, 4, 5]),
        target_epoch(36, 30, 4),
        current(37, 31, "k3", 4, [3, 4, 5]),
        current(38, 31.5, "k1", 4, [0, 1, 2]),
    )  # fmt: skip
    commits = [commit(18, 15, "Order", 3), commit(19, 20, "Order", 4), commit(39, 32, "Order", 3)]
    return written, commits


def test_a_newcomer_targeted_a_crashed_members_partitions_owns_them_only_when_its_current_assignment_does():
    tables = fold_at_once(*crash_with_a_join(), SETTINGS, NAMES)
    generations = by_generation(tables["generations"])
    joined_in = generations[3]
    assert targeted(joined_in) == {"k1": [0, 1], "k2": [2, 3], "k3": [4, 5]}
    assert owned(joined_in) == {"k1": [0, 1], "k2": [3, 4, 5], "k3": []}  # k2 never reconciled: it was gone
    assert joined_in["reconciled_at"] is None and joined_in["join_completed_at"] == at(21)
    k2_holding = next(m for m in joined_in["members"] if m["member_id"] == "k2")["ownership"]
    assert {(o["partition"], o["owned_from"], o["owned_until"]) for o in k2_holding} == {
        (p, at(12), at(30)) for p in (3, 4, 5)
    }
    assert owned(generations[4]) == {"k1": [0, 1, 2], "k3": [3, 4, 5]}
    assert generations[4]["reconciled_at"] == at(31.5)
    assert joined_in["members"][0]["assigned_partitions"][0]["topic"] == "Order"
    assert joined_in["members"][0]["assigned_partitions"][0]["topic_id"] == ORDER_ID
    idle = by_generation(tables["generation_capacity"])[3]["idle_members"]
    assert [(m["member_id"], m["reason"]) for m in idle] == [("k3", "assignor_gave_none")]  # its target waits


def test_the_crash_is_a_timeout_and_its_partitions_move_when_the_crashed_member_is_fenced():
    tables = fold_at_once(*crash_with_a_join(), SETTINGS, NAMES)
    rebalances = by_generation(tables["rebalances"])
    join = rebalances[3]
    assert (join["rebalance_protocol"], join["cause"], join["moved_partition_count"]) == (
        "consumer",
        "member_joined",
        0,
    )
    assert join["unassigned_partition_count"] == 1  # k1 released 2; nobody owned it until epoch 4
    crash = rebalances[4]
    (left,) = crash["members_left"]
    # k2's last sign of life is its commit at 20 s (its own last record was at 12 s): silent 10 s, fenced.
    assert (left["member_id"], left["how"], left["last_seen_at"], left["silent_ms"]) == (
        "k2",
        "timeout",
        at(20),
        10_000,
    )
    # Partition 2, released by k1 and owned by nobody when epoch 3 ended, reads as a partition added.
    assert crash["causes"] == ["member_left_after_timeout", "partitions_added"]
    moves = {
        (m["partition"], m["from_member_id"], m["to_member_id"], m["is_forced"]) for m in tables["partition_movements"]
    }
    assert {move for move in moves if move[2] == "k3"} == {(p, "k2", "k3", True) for p in (3, 4, 5)}
    assigned = {(a["member_id"], a["partition"]): a for a in tables["generation_assignments"] if a["generation"] == 4}
    assert (assigned[("k3", 4)]["assigned_at"], assigned[("k3", 4)]["valid_until"]) == (at(31), None)


def handover() -> tuple[list[dict], list[dict]]:
    """k1 owns Order; k2 joins: k1 revokes 3-5 (pending until it has committed them), then k2 takes them."""
    written = records(
        joined(0, 0, "k1"), group_epoch(1, 0, 1), target(2, 0, "k1", range(6)), target_epoch(3, 0, 1),
        current(4, 0.5, "k1", 1, range(6)),
        joined(10, 10, "k2"), group_epoch(11, 10, 2), target(12, 10, "k1", [0, 1, 2]), target(13, 10, "k2", [3, 4, 5]),
        target_epoch(14, 10, 2),
        current(15, 10.2, "k2", 2, [], state=UNRELEASED),
        current(16, 10.5, "k1", 2, [0, 1, 2], pending=[3, 4, 5], state=UNREVOKED),
        current(17, 11, "k1", 2, [0, 1, 2]),
        current(18, 11.5, "k2", 2, [3, 4, 5]),
    )  # fmt: skip
    return written, [commit(19, 12, "Order", 3)]


def test_a_handover_moves_each_partition_once_and_each_holding_ends_when_it_was_released():
    tables = fold_at_once(*handover(), SETTINGS, NAMES)
    (joined_rebalance,) = [row for row in tables["rebalances"] if row["generation"] == 2]
    assert (joined_rebalance["moved_partition_count"], joined_rebalance["minimal_moves"]) == (3, 3)
    assert joined_rebalance["members_joined"][0]["member_id"] == "k2"
    valid = {(a["generation"], a["member_id"], a["partition"]): (a["assigned_at"], a["valid_until"])
             for a in tables["generation_assignments"]}  # fmt: skip
    assert valid[(1, "k1", 0)] == (at(0.5), at(10))  # held on in epoch 2: valid until it started
    assert valid[(1, "k1", 4)] == (at(0.5), at(11))  # revoked at 11 s, after epoch 2 started
    assert valid[(2, "k2", 4)] == (at(11.5), None)
    assert by_generation(tables["generations"])[2]["reconciled_at"] == at(11.5)


def epoch_written_again() -> tuple[list[dict], list[dict]]:
    """k1 owns nothing of Order 0-1, k2 both; k2 leaves, epoch 2 targets k1 both, k1 takes them, and epoch 2's
    type 6 is written again after that (as bench.generate writes it when members leave in quick succession)."""
    written = records(
        joined(0, 0, "k1"), joined(1, 0, "k2"), group_epoch(2, 0, 1), target(3, 0, "k1", []),
        target(4, 0, "k2", [0, 1]), target_epoch(5, 0, 1),
        current(6, 0.5, "k1", 1, []), current(7, 0.5, "k2", 1, [0, 1]),
        fenced(10, 10, "k2"), group_epoch(13, 10, 2), target(14, 10.3, "k1", [0, 1]), target_epoch(15, 10.3, 2),
        current(16, 10.5, "k1", 2, [0, 1]),
        target_epoch(17, 11, 2),
    )  # fmt: skip
    return written, []


def test_an_epoch_written_again_starts_at_its_last_type_6_and_the_epoch_before_ends_there():
    tables = fold_at_once(*epoch_written_again(), SETTINGS, NAMES)
    generations = by_generation(tables["generations"])
    assert (generations[2]["source_offset"], generations[2]["recorded_at"]) == (17, at(11))
    # Gold's reading (transforms/gold/epochs.py anchors an epoch at its last type 6): k1's current assignment
    # at 10.5 s came before epoch 2 started, so it ends epoch 1, where k2's holding of 0-1 ended at 10 s.
    assert owned(generations[1]) == {"k1": [0, 1], "k2": [0, 1]}
    assert owned(generations[2]) == {"k1": [0, 1]}
    assert by_generation(tables["generation_capacity"])[1]["assigned_partition_count"] == 4


def fenced_and_back() -> list[dict]:
    """m1 and m2 share Order; m1 is fenced at 20 s and rejoins under its own member id at 30 s (a KIP-848
    consumer keeps its id), targeted partition 0 in epoch 4, which closes (m3 joins) before m1's first
    current assignment since."""
    return records(
        joined(0, 0, "m1"), group_epoch(1, 0, 1), target(2, 0, "m1", [0, 1]), target_epoch(3, 0, 1),
        current(4, 0.5, "m1", 1, [0, 1]),
        joined(5, 5, "m2"), group_epoch(6, 5, 2), target(7, 5, "m1", [0]), target(8, 5, "m2", [1]),
        target_epoch(9, 5, 2), current(10, 5.5, "m1", 2, [0]), current(11, 6, "m2", 2, [1]),
        fenced(12, 20, "m1"), group_epoch(15, 20, 3), target(16, 20, "m2", [0, 1]), target_epoch(17, 20, 3),
        current(18, 20.5, "m2", 3, [0, 1], state=UNREVOKED),
        joined(19, 30, "m1"), group_epoch(20, 30, 4), target(21, 30, "m1", [0]), target(22, 30, "m2", [1]),
        target_epoch(23, 30, 4),
        joined(24, 31, "m3"), group_epoch(25, 31, 5), target(26, 31, "m3", []), target_epoch(27, 31, 5),
    )  # fmt: skip


def test_a_member_back_under_its_own_id_owns_nothing_until_its_first_current_assignment_since():
    generations = by_generation(fold_at_once(fenced_and_back(), [], SETTINGS)["generations"])
    assert owned(generations[2]) == {"m1": [0], "m2": [1]}
    assert owned(generations[4]) == {"m1": [], "m2": [0, 1]}


def test_a_member_back_under_its_own_id_folded_in_two_at_every_cut_equals_folding_at_once():
    written = fenced_and_back()
    at_once = in_order(fold_at_once(written, [], SETTINGS))
    assert [
        cut for cut in range(len(written) + 1) if in_order(fold_in_two(written, [], cut, SETTINGS)) != at_once
    ] == []


def test_the_state_keeps_no_member_that_left_the_group_and_its_kept_epochs():
    """Forty members, one after another: each joins, takes Order over, and its predecessor is fenced. The
    state a night leaves holds the members of the epochs it keeps, not everyone the group ever had."""
    written = [joined(0, 0, "m0"), group_epoch(1, 0, 1), target(2, 0, "m0", [0]), target_epoch(3, 0, 1)]
    written.append(current(4, 0.5, "m0", 1, [0]))
    for n in range(1, 41):
        offset, seconds = 10 * n, 10.0 * n
        written += [joined(offset, seconds, f"m{n}"), *fenced(offset + 1, seconds, f"m{n - 1}")]
        written += [group_epoch(offset + 4, seconds, n + 1), target(offset + 5, seconds, f"m{n}", [0])]
        written += [target_epoch(offset + 6, seconds, n + 1), current(offset + 7, seconds + 0.5, f"m{n}", n + 1, [0])]
    _, state = fold(None, records(*written), [], SETTINGS)
    kept = {m["member_id"] for entry in state.entries for m in entry["members"]} | set(state.replay["members"])
    remembered = [set(state.replay[name]) for name in ("trackers", "stable", "streams")] + [set(state.own_records)]
    assert len(kept) <= 3 and all(names <= kept for names in remembered), (kept, remembered)
