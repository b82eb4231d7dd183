"""Partition assignment as the clients and the broker compute it, for the generator's groups.

Range and roundrobin follow Kafka's `RangeAssignor` / `RoundRobinAssignor` (members sorted by id);
sticky, cooperative-sticky and the broker's uniform assignor (KIP-848) are modelled by one sticky
balance: every member keeps what it owned up to its fair share, and only the surplus moves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TopicPartition = tuple[str, int]


def range_assignment(members: Sequence[str], partitions: Mapping[str, int]) -> dict[str, list[TopicPartition]]:
    ordered = sorted(members)
    assigned: dict[str, list[TopicPartition]] = {member: [] for member in ordered}
    for topic in sorted(partitions):
        count, share = partitions[topic], divmod(partitions[topic], len(ordered))
        start = 0
        for index, member in enumerate(ordered):
            size = share[0] + (1 if index < share[1] else 0)
            assigned[member].extend((topic, partition) for partition in range(start, min(start + size, count)))
            start += size
    return assigned


def roundrobin_assignment(members: Sequence[str], partitions: Mapping[str, int]) -> dict[str, list[TopicPartition]]:
    ordered = sorted(members)
    assigned: dict[str, list[TopicPartition]] = {member: [] for member in ordered}
    every = [(topic, partition) for topic in sorted(partitions) for partition in range(partitions[topic])]
    for index, topic_partition in enumerate(every):
        assigned[ordered[index % len(ordered)]].append(topic_partition)
    return assigned


def sticky_assignment(
    members: Sequence[str], partitions: Mapping[str, int], owned: Mapping[str, Sequence[TopicPartition]]
) -> dict[str, list[TopicPartition]]:
    """Balanced (sizes differ by at most one) with the fewest moves from `owned`."""
    ordered = sorted(members)
    every = [(topic, partition) for topic in sorted(partitions) for partition in range(partitions[topic])]
    base, extra = divmod(len(every), len(ordered))
    # Members that own the most get the larger quotas, so fewer partitions move.
    by_ownership = sorted(ordered, key=lambda member: (-len(owned.get(member, ())), member))
    quota = {member: base + (1 if rank < extra else 0) for rank, member in enumerate(by_ownership)}
    valid, taken = set(every), set()
    assigned: dict[str, list[TopicPartition]] = {}
    for member in ordered:
        kept = [tp for tp in owned.get(member, ()) if tp in valid and tp not in taken][: quota[member]]
        taken.update(kept)
        assigned[member] = kept
    free = iter(tp for tp in every if tp not in taken)
    for member in ordered:
        missing = quota[member] - len(assigned[member])
        assigned[member].extend(next(free) for _ in range(missing))
    return assigned


def grouped(partitions: Sequence[TopicPartition]) -> list[tuple[str, list[int]]]:
    """[(topic, [partition, ...])] in first-seen topic order, as assignments are serialised."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return list(by_topic.items())
