"""The fold of share groups (KIP-932) and streams groups (KIP-1071) on record sequences written out: the
coordinators' records (share types 10-14, streams 17, 19-22) in, gold rows out, in milliseconds and
without a JVM. Both sequences follow the lab's scenarios (lab/README.md): members join one at a time, one
leaves cleanly, one is fenced at its session timeout. No Spark."""

from __future__ import annotations

import json

from tests.history_epochs import records, row
from tests.history_fold import at, fold_at_once, fold_in_two, in_order
from tests.history_twins import (
    SHARE_NAMES,
    STREAMS_UNREVOKED,
    share_current,
    share_epoch,
    share_joined,
    share_left,
    share_target,
    share_target_epoch,
    streams_current,
    streams_epoch,
    streams_joined,
    streams_left,
    streams_target,
    streams_target_epoch,
)
from tests.unit.test_history_epochs import SETTINGS, by_generation, owned


def share_group(m3_fenced_at: float = 41.2) -> list[dict]:
    """m1 joins while Tasks' share partitions are initialised (epoch 1 targets nothing; epoch 2, same
    member, assigns them); m2 and m3 join; m2 leaves 0.6 s after its last heartbeat; m3 is killed after
    its record at 31 s and fenced at `m3_fenced_at` (10.2 s later: its session, 10 s, ran out)."""
    return records(
        share_joined(0, 0, "m1"), share_epoch(1, 0, 1), share_target(2, 0, "m1", []), share_target_epoch(3, 0, 1),
        share_current(4, 0.2, "m1", 1, []),
        share_epoch(5, 1, 2), share_target(6, 1, "m1", [0, 1, 2]), share_target_epoch(7, 1, 2),
        share_current(8, 1.5, "m1", 2, [0, 1, 2]),
        share_joined(10, 10, "m2"), share_epoch(11, 10, 3), share_target(12, 10, "m1", [0]),
        share_target(13, 10, "m2", [1, 2]), share_target_epoch(14, 10, 3),
        share_current(15, 10.5, "m1", 3, [0]), share_current(16, 11, "m2", 3, [1, 2]),
        share_joined(20, 20, "m3"), share_epoch(21, 20, 4), share_target(22, 20, "m2", [1]),
        share_target(23, 20, "m3", [2]), share_target_epoch(24, 20, 4),
        share_current(25, 20.5, "m2", 4, [1]), share_current(26, 21, "m3", 4, [2]),
        share_current(27, 29.4, "m2", 4, [1]),
        share_left(28, 30, "m2"), share_epoch(31, 30, 5), share_target(32, 30, "m1", [0, 1]),
        share_target_epoch(33, 30, 5), share_current(34, 30.5, "m1", 5, [0, 1]), share_current(35, 31, "m3", 5, [2]),
        share_left(40, m3_fenced_at, "m3"), share_epoch(43, m3_fenced_at, 6),
        share_target(44, m3_fenced_at, "m1", [0, 1, 2]), share_target_epoch(45, m3_fenced_at, 6),
        share_current(46, m3_fenced_at + 0.8, "m1", 6, [0, 1, 2]),
    )  # fmt: skip


def test_a_share_groups_epochs_are_share_rebalances_and_its_first_waits_for_its_partitions():
    tables = fold_at_once(share_group(), [], SETTINGS, SHARE_NAMES)
    generations = by_generation(tables["generations"])
    assert {(g["group_protocol"], g["protocol_type"]) for g in generations.values()} == {("share", "share")}
    assert owned(generations[4]) == {"m1": [0], "m2": [1], "m3": [2]}
    assert generations[4]["members"][0]["assigned_partitions"][0]["topic"] == "Tasks"
    rebalances = by_generation(tables["rebalances"])
    assert sorted(rebalances) == [2, 3, 4, 5, 6]  # epoch 1 only waited: epoch 2 completes its join
    first = rebalances[2]
    assert (first["first_round_generation"], first["round_count"], first["join_completed_at"]) == (1, 2, at(0))
    assert {r["rebalance_protocol"] for r in rebalances.values()} == {"share"}
    assert [rebalances[g]["cause"] for g in (3, 4, 5, 6)] == [
        "member_joined", "member_joined", "member_left_cleanly", "member_left_after_timeout"
    ]  # fmt: skip
    assert rebalances[3]["moved_partition_count"] == 2
    assert {r["moved_standby_task_count"] for r in rebalances.values()} == {None}  # streams groups' only
    assert tables["generation_capacity"] == [] and tables["streams_members"] == []  # share partitions, not owned


def test_a_share_member_is_judged_by_its_own_records_and_the_full_session_timeout():
    rebalances = by_generation(fold_at_once(share_group(), [], SETTINGS, SHARE_NAMES)["rebalances"])
    (left_cleanly,) = rebalances[5]["members_left"]
    assert (left_cleanly["member_id"], left_cleanly["last_seen_at"], left_cleanly["silent_ms"]) == ("m2", at(29.4), 600)
    (fenced,) = rebalances[6]["members_left"]
    assert (fenced["how"], fenced["silent_ms"], fenced["session_timeout_ms"]) == ("timeout", 10_200, 10_000)
    # A share member commits nothing: silent 9.5 s of a 10 s session it cannot have timed out (a consumer
    # member could have: a commit may follow its last heartbeat by up to one interval, 1 s here).
    early = fold_at_once(share_group(m3_fenced_at=40.5), [], SETTINGS, SHARE_NAMES)
    (quick,) = by_generation(early["rebalances"])[6]["members_left"]
    assert (quick["how"], quick["silent_ms"]) == ("clean", 9_500)


def streams_group() -> list[dict]:
    """s1 joins before the topology is validated (epoch 1 targets no task; epoch 2, same member, assigns
    the four tasks of subtopologies 0 and 1); s2 joins and s1 hands 0_1 and 1_1 over, keeping a
    standby of 0_1; s3 joins and takes 1_1 and that standby; s2 leaves cleanly."""
    return records(
        streams_joined(0, 0, "s1", 8081), streams_epoch(1, 0, 1), streams_target(2, 0, "s1", {}),
        streams_target_epoch(3, 0, 1), streams_current(4, 0.3, "s1", 1, {}),
        streams_epoch(5, 2, 2), streams_target(6, 2, "s1", {"0": [0, 1], "1": [0, 1]}), streams_target_epoch(7, 2, 2),
        streams_current(8, 2.5, "s1", 2, {"0": [1, 0], "1": [0, 1]}),
        streams_joined(10, 10, "s2", 8082), streams_epoch(11, 10, 3),
        streams_target(12, 10, "s1", {"0": [0], "1": [0]}, standby={"0": [1]}),
        streams_target(13, 10, "s2", {"0": [1], "1": [1]}, standby={"0": [0]}), streams_target_epoch(14, 10, 3),
        streams_current(15, 10.3, "s1", 3, {"0": [0], "1": [0]}, pending={"0": [1], "1": [1]}, state=STREAMS_UNREVOKED),
        streams_current(16, 10.6, "s1", 3, {"0": [0], "1": [0]}, standby={"0": [1]}),
        streams_current(17, 11, "s2", 3, {"0": [1], "1": [1]}, standby={"0": [0]}),
        streams_joined(20, 20, "s3", 8083), streams_epoch(21, 20, 4),
        streams_target(22, 20, "s2", {"0": [1]}, standby={"0": [0]}),
        streams_target(23, 20, "s3", {"1": [1]}, standby={"0": [1]}), streams_target_epoch(24, 20, 4),
        streams_current(25, 20.3, "s2", 4, {"0": [1]}, standby={"0": [0]}, pending={"1": [1]}, state=STREAMS_UNREVOKED),
        streams_current(26, 20.5, "s2", 4, {"0": [1]}, standby={"0": [0]}),
        streams_current(27, 21, "s3", 4, {"1": [1]}, standby={"0": [1]}),
        streams_current(28, 21.2, "s1", 4, {"0": [0], "1": [0]}),
        streams_current(29, 29.5, "s2", 4, {"0": [1]}, standby={"0": [0]}),
        streams_left(30, 30, "s2"), streams_epoch(33, 30, 5),
        streams_target(34, 30, "s1", {"0": [0, 1], "1": [0]}, standby={"1": [1]}),
        streams_target(35, 30, "s3", {"1": [1]}, standby={"0": [0, 1]}), streams_target_epoch(36, 30, 5),
        streams_current(37, 30.4, "s1", 5, {"0": [0, 1], "1": [0]}, standby={"1": [1]}),
        streams_current(38, 30.6, "s3", 5, {"1": [1]}, standby={"0": [0, 1]}),
    )  # fmt: skip


def test_a_streams_member_owns_its_active_tasks_and_its_standby_replicas_move_apart():
    tables = fold_at_once(streams_group(), [], SETTINGS)
    generations = by_generation(tables["generations"])
    assert owned(generations[4]) == {"s1": [0, 0], "s2": [1], "s3": [1]}
    s2_task = generations[4]["members"][1]["assigned_partitions"][0]
    assert (s2_task["topic"], s2_task["topic_id"], s2_task["topic_name_source"]) == ("0", "0", "subtopology")
    assert generations[3]["reconciled_at"] == at(11)  # a streams member is STABLE at state 1
    rebalances = by_generation(tables["rebalances"])
    assert sorted(rebalances) == [2, 3, 4, 5]  # epoch 1 waited for the topology
    assert (rebalances[2]["round_count"], rebalances[2]["rebalance_protocol"]) == (2, "streams")
    moves = {g: (r["moved_partition_count"], r["moved_standby_task_count"]) for g, r in rebalances.items()}
    # epoch 4: 1_1 s2 -> s3, and 0_1's standby s1 -> s3; epoch 5: 0_0's standby s2 -> s3, 0_1 s2 -> s1
    assert moves == {2: (0, 0), 3: (2, 0), 4: (1, 1), 5: (1, 1)}
    (left,) = rebalances[5]["members_left"]
    assert (left["member_id"], left["how"], left["silent_ms"]) == ("s2", "clean", 500)


def test_streams_members_hold_each_members_process_endpoint_and_tasks_as_its_epoch_ended():
    members = {
        (m["generation"], m["member_id"]): m for m in fold_at_once(streams_group(), [], SETTINGS)["streams_members"]
    }
    assert sorted(members) == [
        (1, "s1"), (2, "s1"), (3, "s1"), (3, "s2"), (4, "s1"), (4, "s2"), (4, "s3"), (5, "s1"), (5, "s3")
    ]  # fmt: skip
    s1 = members[(3, "s1")]  # its last record before epoch 4: STABLE at 10.6 s, 0_1 kept as a standby
    assert (s1["member_epoch"], s1["process_id"], s1["user_endpoint"], s1["client_tags"]) == (
        3, "process-s1", "10.0.0.3:8081", {"zone": "a"}
    )  # fmt: skip
    assert (s1["active_tasks"], s1["standby_tasks"], s1["warmup_tasks"]) == (
        [{"subtopology_id": "0", "partitions": [0]}, {"subtopology_id": "1", "partitions": [0]}],
        [{"subtopology_id": "0", "partitions": [1]}],
        [],
    )
    assert members[(2, "s1")]["active_tasks"][0] == {"subtopology_id": "0", "partitions": [0, 1]}  # sorted
    assert members[(1, "s1")]["active_tasks"] == [] and members[(1, "s1")]["member_epoch"] == 1
    assert members[(4, "s2")]["member_epoch"] == 4  # it left after epoch 4: held until its tombstone


def test_share_and_streams_groups_folded_in_two_at_every_cut_equal_folding_at_once():
    for written, names in ((share_group(), SHARE_NAMES), (streams_group(), {})):
        at_once = in_order(fold_at_once(written, [], SETTINGS, names))
        differing = [
            cut
            for cut in range(len(written) + 1)
            if in_order(fold_in_two(written, [], cut, SETTINGS, names)) != at_once
        ]
        assert differing == []


def test_a_streams_member_back_after_the_groups_deletion_runs_no_task_of_the_deleted_group():
    """s1, back with its member id after the group was deleted, has reconciled nothing in the new
    incarnation's first epoch: its streams_members row shows no task and no member epoch, as the
    generation's own members (ownership by incarnation) say it owns nothing. The Spark gold the fold
    replaced showed the task it ran before the deletion (it read a member's latest current assignment in
    any incarnation): a bug, fixed on purpose."""
    written = records(
        streams_joined(0, 0, "s1", 8081), streams_epoch(1, 0, 1), streams_target(2, 0, "s1", {"0": [0]}),
        streams_target_epoch(3, 0, 1), streams_current(4, 0.5, "s1", 1, {"0": [0]}),
        streams_left(5, 10, "s1"), streams_epoch(8, 10, 2), streams_target_epoch(9, 10, 2),
        row(10, 20, 17, is_tombstone=True),
        streams_joined(11, 30, "s1", 8081), streams_epoch(12, 30, 1), streams_target(13, 30, "s1", {"0": [0]}),
        streams_target_epoch(14, 30, 1),
        streams_joined(15, 30.2, "s2", 8082), streams_epoch(16, 30.2, 2), streams_target_epoch(17, 30.2, 2),
    )  # fmt: skip
    tables = fold_at_once(written, [], SETTINGS)
    members = {(m["incarnation"], m["generation"], m["member_id"]): m for m in tables["streams_members"]}
    back = members[(1, 1, "s1")]
    assert (back["member_epoch"], back["active_tasks"], back["standby_tasks"]) == (None, [], [])
    assert members[(0, 1, "s1")]["active_tasks"] == [{"subtopology_id": "0", "partitions": [0]}]
    generation = next(g for g in tables["generations"] if (g["incarnation"], g["generation"]) == (1, 1))
    assert owned(generation) == {"s1": []}


def streams_topology(offset: int, seconds: float, source_topics: list[str] | None) -> dict:
    """A streams group's topology record (type 23): one subtopology reading `source_topics` (None: the
    record's tombstone, written when the group is deleted)."""
    if source_topics is None:
        return row(offset, seconds, 23, True)
    value = {"epoch": 0, "subtopologies": [{"subtopology_id": "0", "source_topics": source_topics}]}
    return row(offset, seconds, 23, value_json=json.dumps(value))


def redeployed(topics_after: list[str]) -> list[dict]:
    """An application of two epochs (the second: s2 joins) deleted with its topology, created again under
    the same id with `topics_after` as its source topics, its topology record written again unchanged
    before its second epoch."""
    return records(
        streams_topology(0, 0, ["orders"]),
        streams_joined(1, 0, "s1", 8081), streams_epoch(2, 0, 1), streams_target(3, 0, "s1", {"0": [0]}),
        streams_target_epoch(4, 0, 1), streams_current(5, 0.5, "s1", 1, {"0": [0]}),
        streams_joined(6, 5, "s2", 8082), streams_epoch(7, 5, 2), streams_target(8, 5, "s2", {}),
        streams_target_epoch(9, 5, 2),
        streams_left(10, 10, "s1"), streams_left(13, 10, "s2"), row(16, 10, 17, is_tombstone=True),
        streams_topology(17, 10, None),
        streams_topology(20, 30, topics_after),
        streams_joined(21, 30, "r1", 8081), streams_epoch(22, 30, 1), streams_target(23, 30, "r1", {"0": [0]}),
        streams_target_epoch(24, 30, 1), streams_current(25, 30.5, "r1", 1, {"0": [0]}),
        streams_topology(26, 35, topics_after),
        streams_joined(27, 35, "r2", 8082), streams_epoch(28, 35, 2), streams_target(29, 35, "r2", {}),
        streams_target_epoch(30, 35, 2),
    )  # fmt: skip


def test_a_redeploy_with_a_changed_topology_causes_the_first_rebalance_of_the_group_that_came_back():
    """Kafka Streams changes a group's topology only by a redeploy (topology.py): the first rebalance after
    the group came back names it, right after `group_emptied`'s place; the topology record written again
    unchanged, and a redeploy of the same topology, name no change."""
    tables = fold_at_once(redeployed(["orders", "returns"]), [], SETTINGS)
    causes = {(r["incarnation"], r["generation"]): r["causes"] for r in tables["rebalances"]}
    assert causes == {
        (0, 1): ["member_joined"],
        (0, 2): ["member_joined"],
        (1, 1): ["topology_changed", "member_joined"],
        (1, 2): ["member_joined"],
    }
    same = fold_at_once(redeployed(["orders"]), [], SETTINGS)
    assert all("topology_changed" not in r["causes"] for r in same["rebalances"])


def test_the_topology_a_group_ran_is_kept_across_its_deletion_at_every_cut():
    written = redeployed(["orders", "returns"])
    at_once = in_order(fold_at_once(written, [], SETTINGS))
    differing = [cut for cut in range(len(written) + 1) if in_order(fold_in_two(written, [], cut, SETTINGS)) != at_once]
    assert differing == []
