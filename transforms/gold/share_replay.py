"""The share coordinator's replay of one share-partition's `__share_group_state` records, in plain Python.

Kafka's ShareCoordinatorShard keeps one state per (group, topic id, partition) and replays the records
in log order (checked against the 4.2.1 and 4.3.1 jars, ShareCoordinatorShard.merge and
ShareGroupOffset.fromRecord; the two lines agree):
- a ShareSnapshot replaces the state;
- a ShareUpdate keeps the snapshot and state epochs, takes its start offset and leader epoch unless -1,
  always takes its delivery-complete count, and merges its batches into the state's
  (PersisterStateBatchCombiner: where two batches overlap with different delivery information the one
  with more deliveries wins, at equal counts the higher state; batches before the start offset go);
  with no state before it (its snapshot compacted away) it is the state, state epoch 0;
- a tombstone deletes the state.

This is a fold over a key's records, which Spark has no built-in for; like the decoder it runs as a
Python function over Arrow batches (transforms/gold/share_state.py), and is tested here without Spark.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from schemas.share_gold import DELIVERY_ACKNOWLEDGED, DELIVERY_ARCHIVED

RECORD_SHARE_SNAPSHOT = 0
RECORD_SHARE_UPDATE = 1
NOT_WRITTEN = -1

Batch = tuple[int, int, int, int]  # first_offset, last_offset, delivery_state, delivery_count


def _precedence(batch: Batch) -> tuple[int, int]:
    return batch[3], batch[2]


def combine_batches(old: list[Batch], new: list[Batch], start_offset: int) -> list[Batch]:
    """Kafka's combined batches: per offset the batch with the most deliveries (then the higher state)
    wins, offsets before `start_offset` (when not -1) are dropped, neighbours alike are joined."""
    batches = [*old, *new]
    if start_offset != NOT_WRITTEN:
        batches = [(max(b[0], start_offset), *b[1:]) for b in batches if b[1] >= start_offset]
    cuts = sorted({b[0] for b in batches} | {b[1] + 1 for b in batches})
    combined: list[Batch] = []
    for first, after in itertools.pairwise(cuts):
        covering = [b for b in batches if b[0] <= first and after - 1 <= b[1]]
        if not covering:
            continue
        winner = max(covering, key=_precedence)
        if combined and combined[-1][1] == first - 1 and combined[-1][2:] == winner[2:]:
            combined[-1] = (combined[-1][0], after - 1, *winner[2:])
        else:
            combined.append((first, after - 1, *winner[2:]))
    return combined


def state_counts(batches: list[Batch], start_offset: int) -> dict:
    """In-flight (delivered, not complete), acknowledged and archived offsets at or after the start offset."""
    counts = {"in_flight_count": 0, "acknowledged_count": 0, "archived_count": 0, "max_delivery_count": None}
    for first, last, state, delivery_count in batches:
        first = max(first, start_offset)
        if last < first:
            continue
        size = last - first + 1
        if state == DELIVERY_ACKNOWLEDGED:
            counts["acknowledged_count"] += size
        elif state == DELIVERY_ARCHIVED:
            counts["archived_count"] += size
        else:
            counts["in_flight_count"] += size
        counts["max_delivery_count"] = max(counts["max_delivery_count"] or 0, delivery_count)
    return counts


def _batches_of(record: dict) -> list[Batch]:
    return [
        (b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
        for b in record["state_batches"] or []
    ]


def _next_state(state: dict | None, record: dict) -> dict | None:
    if record["is_tombstone"]:
        return None
    batches = _batches_of(record)
    if record["record_type"] == RECORD_SHARE_SNAPSHOT or state is None:
        return {
            "snapshot_epoch": record["snapshot_epoch"],
            "state_epoch": record["state_epoch"] if record["record_type"] == RECORD_SHARE_SNAPSHOT else 0,
            "leader_epoch": record["leader_epoch"],
            "start_offset": record["start_offset"],
            "delivery_complete_count": record["delivery_complete_count"],
            "batches": batches,
        }
    start = state["start_offset"] if record["start_offset"] == NOT_WRITTEN else record["start_offset"]
    leader = state["leader_epoch"] if record["leader_epoch"] == NOT_WRITTEN else record["leader_epoch"]
    return {
        **state,
        "leader_epoch": leader,
        "start_offset": start,
        "delivery_complete_count": record["delivery_complete_count"],
        "batches": combine_batches(state["batches"], batches, start),
    }


def replay(records: Iterable[dict]) -> Iterator[dict]:
    """One key's silver share_group_state rows in log order -> the state in force after each (see
    schemas.share_gold.share_partition_state_schema for the columns besides the record's own)."""
    state = None
    for record in records:
        state = _next_state(state, record)
        row = {"is_deleted": state is None}
        if state is None:
            row |= dict.fromkeys(
                ("snapshot_epoch", "state_epoch", "leader_epoch", "start_offset", "delivery_complete_count",
                 "state_batches", "in_flight_count", "acknowledged_count", "archived_count", "max_delivery_count"),
            )  # fmt: skip
        else:
            row |= {key: state[key] for key in ("snapshot_epoch", "state_epoch", "leader_epoch", "start_offset")}
            row["delivery_complete_count"] = state["delivery_complete_count"]
            row["state_batches"] = [
                {"first_offset": b[0], "last_offset": b[1], "delivery_state": b[2], "delivery_count": b[3]}
                for b in state["batches"]
            ]
            row |= state_counts(state["batches"], max(state["start_offset"], 0))
        yield record, row
