"""The classic group fold (transforms/history) on record sequences written out: the seeds' scenarios in,
gold rows out, in milliseconds and without a JVM. No Spark."""

from __future__ import annotations

import pytest

from tests.history_fold import at, commit, fold_at_once, member, record, records
from transforms.history.fold import FOLD_VERSION, GENERATION_TABLES, State, fold

ORDER, STOCK = range(7), range(5)


def on_order(member_id: str, partitions, **identity) -> dict:
    """A member subscribed to Order only."""
    return member(member_id, {"Order": partitions} if partitions else {}, topics=("Order",), **identity)


def by_key(rows: list[dict]) -> dict:
    return {(row["incarnation"], row["generation"]): row for row in rows}


def crash_of_c3() -> tuple[list[dict], list[dict]]:
    """C1 alone, C2 joins, C3 joins (range over Order and Stock), C3 crashes: it commits last at 75 s and
    the coordinator ends its session (10 s) and completes the rebalance without it at 86.5 s."""
    written = [
        record(0, 0, 1, [member("C1", {"Order": ORDER, "Stock": STOCK})]),
        record(
            10,
            30,
            2,
            [
                member("C1", {"Order": [0, 1, 2, 3], "Stock": [0, 1, 2]}),
                member("C2", {"Order": [4, 5, 6], "Stock": [3, 4]}),
            ],
            joined_at=28,
        ),
        record(
            20,
            60,
            3,
            [
                member("C1", {"Order": [0, 1, 2], "Stock": [0, 1]}),
                member("C2", {"Order": [3, 4], "Stock": [2, 3]}),
                member("C3", {"Order": [5, 6], "Stock": [4]}),
            ],
            joined_at=58,
        ),
        record(
            40,
            87,
            4,
            [
                member("C1", {"Order": [0, 1, 2, 3], "Stock": [0, 1, 2]}),
                member("C2", {"Order": [4, 5, 6], "Stock": [3, 4]}),
            ],
            joined_at=86.5,
        ),
    ]
    commits = [
        commit(5, 10, "Order", 0),
        commit(21, 65, "Order", 5),
        commit(22, 70, "Stock", 4),
        commit(23, 75, "Order", 6),  # C3's last sign of life
        commit(30, 85, "Order", 0),  # the group's last commit before the join completes
        commit(41, 88, "Order", 3),  # its first after the rebalance
    ]
    return records(*written), commits


def test_the_crash_of_c3_is_a_timeout_with_five_moves_of_which_three_were_needed():
    tables = fold_at_once(*crash_of_c3())
    crash = by_key(tables["rebalances"])[(0, 4)]
    assert (crash["previous_generation"], crash["rebalance_protocol"], crash["round_count"]) == (3, "eager", 1)
    assert (crash["cause"], crash["causes"]) == ("member_left_after_timeout", ["member_left_after_timeout"])
    (left,) = crash["members_left"]
    assert (left["member_id"], left["how"], left["last_seen_at"], left["silent_ms"]) == (
        "C3",
        "timeout",
        at(75),
        11_500,
    )
    assert (crash["moved_partition_count"], crash["minimal_moves"], crash["minimal_moves_method"]) == (5, 3, "exact")
    assert (crash["stickiness"], crash["skew"], crash["skew_by_topic"]) == (0.6, 2, {"Order": 1, "Stock": 1})
    assert (crash["estimated_pause_ms"], crash["pause_estimate_method"]) == (3_000, "commit_gap")
    moves = {
        (m["topic"], m["partition"]): (m["from_member_id"], m["to_member_id"], m["is_forced"])
        for m in tables["partition_movements"]
        if m["generation"] == 4
    }
    assert moves == {
        ("Order", 3): ("C2", "C1", False),
        ("Stock", 2): ("C2", "C1", False),
        ("Order", 5): ("C3", "C2", True),
        ("Order", 6): ("C3", "C2", True),
        ("Stock", 4): ("C3", "C2", True),
    }  # fmt: skip
    assert [r["cause"] for r in sorted(tables["rebalances"], key=lambda r: r["generation"])] == [
        "member_joined", "member_joined", "member_joined", "member_left_after_timeout"
    ]  # fmt: skip
    generations = by_key(tables["generations"])
    assert [generations[(0, g)]["member_count"] for g in (1, 2, 3, 4)] == [1, 2, 3, 2]
    third = [a for a in tables["generation_assignments"] if a["generation"] == 3]
    assert len(third) == 12 and {a["valid_until"] for a in third} == {at(87)}


def test_the_state_holds_the_open_generation_and_the_one_before_it_and_a_continuing_fold_re_emits_from_there():
    _, state = fold(None, *crash_of_c3()[:1], [(c["topic"], c["partition"], c["record_at"]) for c in crash_of_c3()[1]])
    assert state.frontier == {"incarnation": 0, "generation": 4}
    assert [entry["generation"] for entry in state.entries] == [3, 4]
    assert state.commits_from == at(60)
    again, _ = fold(State.from_dict(state.to_dict()), [])
    assert again.frontier == {"incarnation": 0, "generation": 4}
    assert {name: sorted({row["generation"] for row in again.tables[name]}) for name in GENERATION_TABLES} == {
        "generations": [4],
        "generation_assignments": [4],
        "generation_capacity": [4],
        "rebalances": [4],
        "partition_movements": [4],
        "streams_members": [],  # a streams group's only
    }
    # rebalance_frequency is keyed by period: the fold gives the day of the frontier whole again
    assert again.frequency_from == at(0).replace(hour=0)
    assert {(r["period"], r["rebalance_count"]) for r in again.tables["rebalance_frequency"]} == {
        ("hour", 4),
        ("day", 4),
    }


def test_a_state_of_another_fold_version_is_refused_so_the_group_is_folded_from_scratch():
    _, state = fold(None, crash_of_c3()[0])
    assert State.from_dict({**state.to_dict(), "fold_version": FOLD_VERSION + 1}) is None


def cooperative_two_rounds(second_round_at: float = 21) -> tuple[list[dict], list[dict]]:
    """C1 owns Order; C2 joins a cooperative-sticky group: round one revokes 4-6 from C1, round two gives them to C2."""
    written = [
        record(0, 0, 1, [on_order("C1", ORDER)], assignor="cooperative-sticky"),
        record(
            10, 20, 2, [on_order("C1", [0, 1, 2, 3]), on_order("C2", [])], assignor="cooperative-sticky", joined_at=19
        ),
        record(
            11,
            second_round_at,
            3,
            [on_order("C1", [0, 1, 2, 3]), on_order("C2", [4, 5, 6])],
            assignor="cooperative-sticky",
        ),
    ]
    return records(*written), [commit(12, second_round_at + 1, "Order", 4)]


def test_a_cooperative_rebalance_in_two_rounds_is_one_rebalance_and_counts_each_move_once():
    tables = fold_at_once(*cooperative_two_rounds())
    rebalances = by_key(tables["rebalances"])
    assert sorted(rebalances) == [(0, 1), (0, 3)]
    joined = rebalances[(0, 3)]
    assert (joined["first_round_generation"], joined["previous_generation"], joined["round_count"]) == (2, 1, 2)
    assert (joined["rebalance_protocol"], joined["join_completed_at"], joined["cause"]) == (
        "cooperative",
        at(19),
        "member_joined",
    )
    assert (joined["moved_partition_count"], joined["minimal_moves"], joined["estimated_pause_ms"]) == (3, 3, None)
    capacity = by_key(tables["generation_capacity"])
    assert [(m["member_id"], m["reason"]) for m in capacity[(0, 2)]["idle_members"]] == [("C2", "assignor_gave_none")]
    assert (capacity[(0, 2)]["capacity_used"], capacity[(0, 2)]["idle_since"], capacity[(0, 3)]["idle_since"]) == (
        0.5,
        at(20),
        None,
    )


def test_a_second_round_later_than_the_rebalance_timeout_is_a_rebalance_of_its_own():
    rebalances = by_key(fold_at_once(*cooperative_two_rounds(second_round_at=200))["rebalances"])
    assert sorted(rebalances) == [(0, 1), (0, 2), (0, 3)]
    assert (rebalances[(0, 2)]["moved_partition_count"], rebalances[(0, 2)]["unassigned_partition_count"]) == (0, 3)


def static_replacement() -> tuple[list[dict], list[dict]]:
    """Static members i1 and i2; i1 restarts as a new member id within its session (same generation), then
    i2 leaves and i1 takes its partitions."""
    written = [
        record(0, 0, 1, [on_order("m1", [0, 1, 2, 3], instance="i1"), on_order("m2", [4, 5, 6], instance="i2")]),
        record(5, 30, 1, [on_order("m1b", [0, 1, 2, 3], instance="i1"), on_order("m2", [4, 5, 6], instance="i2")]),
        record(9, 60, 2, [on_order("m1b", ORDER, instance="i1")], joined_at=59),
    ]
    return records(*written), []


def test_a_static_member_replaced_rewrites_its_generation_and_is_no_rebalance():
    tables = fold_at_once(*static_replacement())
    first = by_key(tables["generations"])[(0, 1)]
    assert (first["record_count"], first["last_recorded_at"]) == (2, at(30))
    assert [m["member_id"] for m in first["members"]] == ["m1", "m2"]  # the rebalance's outcome: the first record
    replaced = {"group_instance_id": "i1", "previous_member_id": "m1", "member_id": "m1b", "replaced_at": at(30)}
    assert first["static_replacements"] == [replaced]
    rebalances = by_key(tables["rebalances"])
    assert sorted(rebalances) == [(0, 1), (0, 2)]
    left = rebalances[(0, 2)]
    assert ([d["member_id"] for d in left["members_left"]], left["members_joined"]) == (["m2"], [])
    assert left["static_replacements"] == [{**replaced, "replaced_at": at(60)}]
    assert (left["moved_partition_count"], left["minimal_moves"], left["minimal_moves_method"]) == (3, 3, "exact")


def deleted_and_recreated() -> tuple[list[dict], list[dict]]:
    """The group empties, is deleted (its tombstone written twice) and created again under the same name."""
    written = [
        record(0, 0, 1, [on_order("C1", ORDER)]),
        record(1, 30, 2, []),
        record(2, 40, None),
        record(3, 41, None),
        record(4, 50, 1, [on_order("C9", ORDER)]),
    ]
    return records(*written), []


def test_a_deleted_group_created_again_starts_a_new_incarnation():
    tables = fold_at_once(*deleted_and_recreated())
    generations = by_key(tables["generations"])
    assert sorted(generations, key=repr) == sorted([(0, 1), (0, 2), (0, None), (1, 1)], key=repr)
    assert [generations[key]["state"] for key in [(0, 1), (0, 2), (0, None), (1, 1)]] == [
        "stable",
        "empty",
        "deleted",
        "stable",
    ]
    assert (generations[(0, None)]["previous_generation"], generations[(1, 1)]["previous_generation"]) == (2, None)
    rebalances = by_key(tables["rebalances"])
    assert {key: row["cause"] for key, row in rebalances.items()} == {
        (0, 1): "member_joined",
        (0, 2): "group_emptied",
        (1, 1): "member_joined",
    }
    assert (rebalances[(1, 1)]["previous_generation"], rebalances[(1, 1)]["member_count_before"]) == (None, 0)
    valid_until = {(a["incarnation"], a["generation"]): a["valid_until"] for a in tables["generation_assignments"]}
    assert valid_until == {(0, 1): at(30), (1, 1): None}


def storm() -> tuple[list[dict], list[dict]]:
    """C2 joins and leaves every five minutes from noon (eight rebalances in the hour), then once more
    after midnight."""
    alone, pair = [on_order("C1", ORDER)], [on_order("C1", [0, 1, 2, 3]), on_order("C2", [4, 5, 6])]
    flapping = [
        record(generation, 300 * generation, generation, pair if generation % 2 else alone) for generation in range(8)
    ]
    return records(*flapping, record(8, 12 * 3600 + 600, 8, pair)), []


def test_an_hour_with_six_rebalances_or_more_is_a_storm_and_so_is_its_day():
    rows = fold_at_once(*storm())["rebalance_frequency"]
    found = {
        (r["period"], r["period_start"]): (r["rebalance_count"], r["storm_hour_count"], r["is_storm"]) for r in rows
    }
    assert found == {
        ("hour", at(0)): (8, 1, True),
        ("hour", at(12 * 3600)): (1, 0, False),
        ("day", at(-12 * 3600)): (8, 1, True),
        ("day", at(12 * 3600)): (1, 0, False),
    }


SCENARIOS = {
    "storm": storm,
    "crash_of_c3": crash_of_c3,
    "cooperative_two_rounds": cooperative_two_rounds,
    "static_replacement": static_replacement,
    "deleted_and_recreated": deleted_and_recreated,
}


def test_a_record_below_the_state_is_refused_so_the_group_is_folded_again_from_silver():
    records_, _ = crash_of_c3()
    _, state = fold(None, records_[2:])
    with pytest.raises(ValueError, match="re-fold the group"):
        fold(state, records_[:1])
