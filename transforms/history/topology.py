"""A streams group's topology changes (KIP-1071), from its topology records (type 23, StreamsGroupTopology).

Kafka Streams 4.2-4.4 sends topology epoch 0 whatever its topology, and the broker refuses a member whose
topology differs from the group's: a changed topology comes into a group only by a redeploy, the group
deleted (its topology record too: a tombstone) and created again under the same id. So the topology a
rebalance runs is compared with the last one the group ran before, across deletions, by the records' values.
A rebalance is caused by a topology change when a topology record that differs from the last one before it
came after the previous closing epoch's start and before its own (`is_changed`).
"""

from __future__ import annotations

from collections.abc import Mapping

RECORD_STREAMS_TOPOLOGY = 23


def seen(tracked: dict, record: Mapping) -> None:
    """Folds a topology record into `tracked`: the last record's value (None: a tombstone) and position,
    and the last value before it that was not a tombstone."""
    if tracked.get("value") is not None:
        tracked["previous"] = tracked["value"]
    tracked["value"] = None if record["is_tombstone"] else record["topology"]
    tracked["position"] = [record["source_partition"], record["source_offset"]]


def changed_at(tracked: Mapping) -> list | None:
    """The position of the last topology record if it changed the group's topology, else None."""
    value, previous = tracked.get("value"), tracked.get("previous")
    if value is None or previous is None or value == previous:
        return None
    return tracked["position"]


def is_changed(closing: Mapping, before: Mapping | None) -> bool:
    """Whether the closing epoch is the first to start after a topology change (`before`: the closing epoch
    before it in its incarnation; None: the incarnation's first)."""
    at = closing.get("topology_changed_at")
    if at is None:
        return False
    return before is None or at > [before["source_partition"], before["source_offset"]]
