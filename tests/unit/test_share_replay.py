"""The share coordinator's replay (transforms/gold/share_replay.py), without Spark: batch combining by
Kafka's precedence rule, and the state in force after each record of the real captures, read from
Kafka's own DumpLogSegments output. The state after the last record of a partition is what
`kafka-share-groups --describe --offsets` reads back: its START-OFFSET must be the replayed one.
"""

from __future__ import annotations

import pytest

from lab.dump import parse_dump
from tests.conftest import REPO_ROOT
from transforms.gold.share_replay import combine_batches, replay, state_counts

SHARE_CAPTURES = sorted((REPO_ROOT / "tests" / "captures").glob("kafka-*/share"))


def test_overlapping_batches_keep_the_most_delivered_then_the_higher_state():
    old = [(0, 9, 0, 1)]  # ten offsets delivered once, available again
    new = [(3, 4, 2, 1), (5, 6, 0, 2), (8, 8, 4, 3)]
    assert combine_batches(old, new, 0) == [
        (0, 2, 0, 1),
        (3, 4, 2, 1),
        (5, 6, 0, 2),
        (7, 7, 0, 1),
        (8, 8, 4, 3),
        (9, 9, 0, 1),
    ]
    # An older record with more deliveries is not overridden by a newer one with fewer.
    assert combine_batches([(0, 1, 4, 3)], [(0, 1, 0, 1)], 0) == [(0, 1, 4, 3)]


def test_batches_before_the_start_offset_are_dropped_and_alike_neighbours_joined():
    assert combine_batches([(0, 4, 2, 1)], [(5, 7, 2, 1)], 3) == [(3, 7, 2, 1)]
    assert combine_batches([(0, 4, 2, 1)], [], -1) == [(0, 4, 2, 1)]


def test_counts_take_offsets_from_the_start_offset_on():
    counts = state_counts([(0, 2, 0, 1), (3, 4, 2, 1), (5, 5, 4, 3), (6, 9, 0, 2)], 1)
    assert counts == {"in_flight_count": 6, "acknowledged_count": 2, "archived_count": 1, "max_delivery_count": 3}


def _silver_like(record: dict) -> dict:
    """A DumpLogSegments record in the shape of a silver share_group_state row (Kafka's values as printed)."""
    value = record["value"] or {}
    return {
        "record_type": record["type"],
        "is_tombstone": record["value"] is None,
        "snapshot_epoch": value.get("snapshotEpoch"),
        "state_epoch": value.get("stateEpoch"),
        "leader_epoch": value.get("leaderEpoch"),
        "start_offset": value.get("startOffset"),
        "delivery_complete_count": value.get("deliveryCompleteCount", -1),
        "state_batches": [
            {
                "first_offset": b["firstOffset"],
                "last_offset": b["lastOffset"],
                "delivery_state": b["deliveryState"],
                "delivery_count": b["deliveryCount"],
            }
            for b in value.get("stateBatches", [])
        ],
    }


@pytest.mark.parametrize("capture", SHARE_CAPTURES, ids=lambda path: path.parent.name)
def test_replayed_start_offsets_at_the_end_are_the_ones_kafka_describes(capture):
    records = parse_dump((capture / "dump-share-state.txt").read_text())
    keys: dict[tuple, list[dict]] = {}
    for record in records:
        key = record["key"]
        keys.setdefault((key["groupId"], key["topicId"], key["partition"]), []).append(_silver_like(record))
    last = {key: list(replay(rows))[-1][1] for key, rows in keys.items()}
    live = {(key[0], key[2]): state["start_offset"] for key, state in last.items() if not state["is_deleted"]}
    lines = (capture / "describe-share.txt").read_text().split("\n")
    described = {(g, int(p)): int(s) for g, _, p, s, _ in (line.split() for line in lines[2:] if line.strip())}
    assert described and live == described


def test_an_update_keeps_start_offset_and_leader_epoch_it_writes_as_minus_one_and_sets_the_count():
    snapshot = {"record_type": 0, "is_tombstone": False, "snapshot_epoch": 1, "state_epoch": 3, "leader_epoch": 2,
                "start_offset": 5, "delivery_complete_count": 0, "state_batches": []}  # fmt: skip
    update = {**snapshot, "record_type": 1, "state_epoch": None, "leader_epoch": -1, "start_offset": -1,
              "delivery_complete_count": 2, "state_batches": [{"first_offset": 5, "last_offset": 6,
                                                               "delivery_state": 2, "delivery_count": 1}]}  # fmt: skip
    tombstone = {**snapshot, "is_tombstone": True}
    states = [state for _, state in replay([snapshot, update, tombstone, update])]
    assert (states[1]["start_offset"], states[1]["leader_epoch"], states[1]["state_epoch"]) == (5, 2, 3)
    assert (states[1]["delivery_complete_count"], states[1]["acknowledged_count"]) == (2, 2)
    assert states[2]["is_deleted"] and states[2]["start_offset"] is None
    # An update with no state before it is the state, state epoch 0 (ShareGroupOffset.fromRecord).
    assert (states[3]["start_offset"], states[3]["state_epoch"]) == (-1, 0)
