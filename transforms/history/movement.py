"""Partition ownership before and after one logical rebalance: which partitions moved, the minimal moves
any balanced assignment needed, and skew (rules and reasoning of transforms/gold/assignment_math.py).

`changes` pairs each partition's owners at the rebalance's two ends (a partition revoked and assigned
again in between counts once): an owner that keeps it with itself, then those that lost it with those
that took it, in owner-key order, one to one. An owner is a member_key.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from itertools import zip_longest

from transforms.history.generations import member_key

METHOD_EXACT, METHOD_LOWER_BOUND = "exact", "lower_bound"
OWNER = ("member_key", "member_id", "group_instance_id", "client_id", "client_host")


def class_key(subscribed_topics: Sequence[str] | None) -> str:
    return ",".join(sorted(subscribed_topics or []))


def _sorted_nulls_first(values):
    return sorted(values, key=lambda value: (value is not None, value or ""))


def partition_changes(before: Sequence[Mapping], after: Sequence[Mapping], members: Sequence[Mapping]) -> list[dict]:
    """Owned partitions before and after (generations.owned_partitions) and the members after -> one
    change per (topic, partition, owner pair), with before_* and after_* owners (None when absent)."""
    by_partition: dict[tuple, tuple[dict, dict]] = defaultdict(lambda: ({}, {}))
    for side, owned in enumerate((before, after)):
        for row in owned:
            by_partition[(row["topic"], row["partition"])][side][row["member_key"]] = row
    subscriptions = {member_key(m): m["subscribed_topics"] or [] for m in members}
    changes = []
    for (topic, partition), (owners_before, owners_after) in by_partition.items():
        kept = [(owners_before[key], owners_after[key]) for key in owners_before if key in owners_after]
        lost = [owners_before[key] for key in _sorted_nulls_first(owners_before) if key not in owners_after]
        taken = [owners_after[key] for key in _sorted_nulls_first(owners_after) if key not in owners_before]
        for was, now in [*kept, *zip_longest(lost, taken)]:
            change = {"topic": topic, "partition": partition}
            change.update({f"before_{name}": None if was is None else was[name] for name in OWNER})
            change.update({f"after_{name}": None if now is None else now[name] for name in OWNER})
            was_key, now_key = change["before_member_key"], change["after_member_key"]
            subscribed = subscriptions.get(was_key)
            change["is_moved"] = was_key is not None and now_key is not None and was_key != now_key
            change["is_forced"] = was_key is not None and (
                subscribed is None or (len(subscribed) > 0 and topic not in subscribed)
            )
            changes.append(change)
    by_topic: dict[str, list[dict]] = defaultdict(list)
    for change in changes:
        by_topic[change["topic"]].append(change)
    for topic_changes in by_topic.values():
        known_before = any(c["before_member_key"] is not None for c in topic_changes)
        gone = not any(c["after_member_key"] is not None for c in topic_changes) and any(
            c["before_member_key"] is not None and not c["is_forced"] for c in topic_changes
        )
        for change in topic_changes:
            change["is_topic_known_before"], change["is_topic_gone"] = known_before, gone
    return changes


def movement_counts(changes: Sequence[Mapping]) -> dict:
    def is_new(c):
        return c["before_member_key"] is None and c["after_member_key"] is not None

    return {
        "moved_partition_count": sum(c["is_moved"] for c in changes),
        "newly_assigned_partition_count": sum(is_new(c) for c in changes),
        "unassigned_partition_count": sum(
            c["before_member_key"] is not None and c["after_member_key"] is None for c in changes
        ),
        "has_partitions_added": any(is_new(c) and c["is_topic_known_before"] for c in changes) if changes else None,
        "has_partitions_removed": any(c["is_topic_gone"] for c in changes) if changes else None,
    }


def _topic_classes(members: Sequence[Mapping]) -> tuple[list[str], dict[str, list[str]]]:
    """Each member's class (its subscription), and each topic's covering classes (one per subscriber)."""
    classes = [class_key(m["subscribed_topics"]) for m in members]
    covering: dict[str, list[str]] = defaultdict(list)
    for member, key in zip(members, classes, strict=True):
        for topic in member["subscribed_topics"] or []:
            covering[topic].append(key)
    return classes, covering


def minimal_moves(changes: Sequence[Mapping], members: Sequence[Mapping]) -> tuple[int, str]:
    """(minimal_moves, minimal_moves_method) of the partitions the rebalance assigned."""
    universe = [c for c in changes if c["after_member_key"] is not None]
    if not universe:
        return 0, METHOD_EXACT
    classes, covering = _topic_classes(members)
    member_classes = {member_key(m): key for m, key in zip(members, classes, strict=True)}
    owners_after = Counter((c["topic"], c["partition"]) for c in universe)
    owners: dict[tuple, dict] = {}
    for change in universe:
        distinct = set(classes)
        topic_covering = set(covering.get(change["topic"], []))
        topic_class = next(iter(distinct)) if len(distinct) == 1 else None
        if topic_class is None and len(topic_covering) == 1:
            topic_class = next(iter(topic_covering))
        class_size = sum(key == topic_class for key in classes) if topic_class is not None else 0
        before = change["before_member_key"]
        keeps = before is not None and before in member_classes and member_classes[before] == topic_class
        group = owners.setdefault((topic_class, class_size, before, keeps), {"c": 0, "forced": 0, "shared": False})
        group["c"] += 1
        group["forced"] += change["is_forced"]
        group["shared"] |= owners_after[(change["topic"], change["partition"])] > 1
    kept_total = 0
    for topic_class in {key[0] for key in owners}:
        in_class = [(key, group) for key, group in owners.items() if key[0] == topic_class]
        n = sum(group["c"] for _, group in in_class)
        ranked = sorted(
            in_class, key=lambda item: (-(item[1]["c"] if item[0][3] else 0), item[0][2] is not None, item[0][2] or "")
        )
        for rank, ((_, class_size, _, keeps), group) in enumerate(ranked, start=1):
            if class_size > 0:
                target = n // class_size + (1 if rank <= n % class_size else 0)
                kept_total += min(group["c"] if keeps else 0, target)
    is_exact = all(key[0] is not None and key[1] > 0 and not group["shared"] for key, group in owners.items())
    if is_exact:
        prior = sum(group["c"] for key, group in owners.items() if key[2] is not None)
        return prior - kept_total, METHOD_EXACT
    return sum(group["forced"] for group in owners.values()), METHOD_LOWER_BOUND


def skew(changes: Sequence[Mapping], members: Sequence[Mapping]) -> tuple[int, dict[str, int]]:
    """(max - min partitions per member over all topics, the same per topic). Members holding none count
    as 0; per topic, the members subscribed to it (all members when none names it)."""
    per_member_topic = Counter(
        (c["topic"], c["after_member_key"]) for c in changes if c["after_member_key"] is not None
    )
    _, covering = _topic_classes(members)
    by_topic: dict[str, list[int]] = defaultdict(list)
    per_member: Counter = Counter()
    for (topic, owner), n in per_member_topic.items():
        by_topic[topic].append(n)
        per_member[owner] += n

    def spread(counts: list[int], eligible: int) -> int:
        return max(counts) - (min(counts) if len(counts) >= eligible else 0)

    skew_by_topic = {
        topic: spread(counts, len(covering.get(topic)) if topic in covering else len(members))
        for topic, counts in by_topic.items()
    }
    overall = spread(list(per_member.values()), len(members)) if per_member else 0
    return overall, skew_by_topic


MOVEMENT_COLUMNS = (
    "moved_partition_count",
    "newly_assigned_partition_count",
    "unassigned_partition_count",
    "minimal_moves",
    "minimal_moves_method",
    "stickiness",
    "skew",
    "skew_by_topic",
)


def movement_columns(changes: Sequence[Mapping], members: Sequence[Mapping]) -> dict:
    """A rebalance's MOVEMENT_COLUMNS (skew null when no member is left), and has_partitions_added and
    has_partitions_removed for its causes."""
    counts = movement_counts(changes)
    minimal, method = minimal_moves(changes, members)
    overall_skew, skew_by_topic = skew(changes, members)
    moved = counts["moved_partition_count"]
    return {
        **counts,
        "minimal_moves": minimal,
        "minimal_moves_method": method,
        "stickiness": minimal / moved if moved > 0 else 1.0,
        "skew": overall_skew if members else None,
        "skew_by_topic": skew_by_topic if members else None,
    }


def movement_rows(rebalance_key: Mapping, previous_generation, completed_at, changes: Sequence[Mapping]) -> list[dict]:
    """The rebalance's rows of gold `partition_movements`: one per partition that changed owner."""
    owner = OWNER[1:]
    return [
        {
            **rebalance_key,
            "previous_generation": previous_generation,
            "completed_at": completed_at,
            "topic": c["topic"],
            "partition": c["partition"],
            **{f"from_{name}": c[f"before_{name}"] for name in owner},
            **{f"to_{name}": c[f"after_{name}"] for name in owner},
            "is_forced": c["is_forced"],
        }
        for c in changes
        if c["is_moved"]
    ]
