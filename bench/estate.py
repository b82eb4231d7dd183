"""The estate the generator simulates: topics and their traffic, consumer groups and their habits.

Deterministic from a seed. Shaped like a large multi-team cluster: 1,500 topics with about 17,000
partitions (most small, a few of 128-256 partitions; many idle, some hot), and
thousands of consumer groups of every protocol and client found in the wild:

- eager classic groups (range and roundrobin from the Java client and librdkafka, kafka-python's
  sticky), cooperative-sticky (Java and librdkafka), static membership (group.instance.id),
  KIP-848 `consumer` groups (some subscribed by regular expression), and exactly-once applications
  that commit offsets inside transactions;
- auto-commit every 5 s (Java commits every assigned partition each time, librdkafka only the ones
  that moved), manual commits from every second to every minute, a few commits with a retention
  (OffsetCommitValue v1);
- consumers that keep up, lag, or stall; groups that churn now and then, a few that flap (rebalance
  storms), groups that die (go Empty) and are deleted, groups created during the window.

Offsets are a function of time: a partition's end offset grows at its rate from its offset at the
window's start, so end-offset snapshots and commits agree (a commit never passes the end offset).
"""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass

from transforms.partitioning import DEFAULT_OFFSETS_PARTITIONS, offsets_partition

WINDOW_START_MS = 1_793_577_600_000  # 2026-11-02T00:00:00Z: fixed, so a seed always gives the same bytes
PROTOCOL_RANGE, PROTOCOL_ROUNDROBIN, PROTOCOL_STICKY = "range", "roundrobin", "sticky"
PROTOCOL_COOPERATIVE, PROTOCOL_CONSUMER = "cooperative-sticky", "consumer"
CLIENT_JAVA, CLIENT_LIBRDKAFKA, CLIENT_KAFKA_PYTHON = "java", "librdkafka", "kafka-python"
LAG_HEALTHY, LAG_LAGGING, LAG_STALLED = "healthy", "lagging", "stalled"

# (protocol, client, static, transactional, weight): the mix of group kinds.
GROUP_KINDS = (
    (PROTOCOL_RANGE, CLIENT_JAVA, False, False, 20),
    (PROTOCOL_RANGE, CLIENT_LIBRDKAFKA, False, False, 10),
    (PROTOCOL_ROUNDROBIN, CLIENT_LIBRDKAFKA, False, False, 6),
    (PROTOCOL_ROUNDROBIN, CLIENT_JAVA, False, False, 4),
    (PROTOCOL_STICKY, CLIENT_KAFKA_PYTHON, False, False, 4),
    (PROTOCOL_COOPERATIVE, CLIENT_JAVA, False, False, 14),
    (PROTOCOL_COOPERATIVE, CLIENT_LIBRDKAFKA, False, False, 8),
    (PROTOCOL_RANGE, CLIENT_JAVA, True, False, 8),
    (PROTOCOL_CONSUMER, CLIENT_JAVA, False, False, 12),
    (PROTOCOL_CONSUMER, CLIENT_LIBRDKAFKA, False, False, 6),
    (PROTOCOL_RANGE, CLIENT_JAVA, False, True, 3),
)
_PARTITION_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256)
_PARTITION_COUNT_WEIGHTS = (14, 8, 12, 8, 14, 10, 10, 8, 5, 4, 2, 2, 1, 0.5)  # mean about 12.5
_MEMBER_COUNTS = (1, 1, 1, 2, 2, 3, 4, 4, 6, 8, 12, 16, 24, 32)
_COMMIT_INTERVALS_MS = (5_000, 5_000, 5_000, 5_000, 5_000, 1_000, 2_000, 10_000, 30_000, 60_000)
_TEAMS = ("payments", "orders", "ledger", "search", "ads", "fraud", "billing", "catalog", "shipping", "identity",
          "notifications", "inventory", "pricing", "risk", "analytics", "reco", "checkout", "support")  # fmt: skip
_THINGS = ("events", "commands", "changes", "audit", "clicks", "metrics", "updates", "requests", "snapshots", "jobs")
_APPS = ("indexer", "sink", "enricher", "aggregator", "router", "archiver", "projector", "notifier", "scorer")


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    topic_id: bytes  # 16 bytes; Kafka prints its base64url form
    rates: tuple[float, ...]  # messages per second, per partition
    start_offsets: tuple[int, ...]  # end offset of each partition at the window's start
    leader_epochs: tuple[int, ...]

    def end_offset(self, partition: int, at_ms: int) -> int:
        return self.start_offsets[partition] + int(self.rates[partition] * (at_ms - WINDOW_START_MS) / 1000)


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One consumer group's character; the simulation gives it members, generations and commits."""

    index: int
    group_id: str
    protocol: str
    client: str
    is_static: bool
    is_transactional: bool
    topics: tuple[str, ...]
    regex: str | None  # KIP-848 groups subscribed by pattern
    members: int  # members at the start (or at birth); 0: a stale group, Empty since before the window
    commit_interval_ms: int
    commits_every_partition: bool  # Java auto-commit: every assigned partition, moved or not
    lag_profile: str
    lag_factor: float  # lagging: the share of the produce rate consumed
    stall_at_ms: int | None
    churn_mean_ms: float  # mean time between membership changes
    born_at_ms: int | None  # created during the window (None: existed before it)
    dies_at_ms: int | None  # every member leaves: the group goes Empty
    deleted_at_ms: int | None  # offsets and group deleted (after dying)
    retention_ms: int | None  # commits with an explicit retention: OffsetCommitValue v1
    metadata: bytes  # commit metadata, UTF-8
    session_timeout_ms: int
    rebalance_timeout_ms: int

    @property
    def offsets_partition(self) -> int:
        return offsets_partition(self.group_id, DEFAULT_OFFSETS_PARTITIONS)


@dataclass(frozen=True, slots=True)
class Estate:
    topics: dict[str, Topic]
    groups: tuple[GroupPlan, ...]
    seed: int
    duration_ms: int

    @property
    def end_ms(self) -> int:
        return WINDOW_START_MS + self.duration_ms


def topic_id(rng: random.Random) -> bytes:
    """A random Uuid as Kafka makes them (never the all-zero or reserved ids)."""
    return uuid.UUID(int=rng.getrandbits(128), version=4).bytes


def build_topics(rng: random.Random, count: int, max_partitions: int) -> dict[str, Topic]:
    topics = {}
    for index in range(count):
        name = f"{rng.choice(_TEAMS)}.{rng.choice(_THINGS)}.v{rng.randint(1, 3)}-{index:04d}"
        partitions = min(max_partitions, rng.choices(_PARTITION_COUNTS, _PARTITION_COUNT_WEIGHTS)[0])
        traffic = rng.random()
        rates = tuple(
            0.0 if traffic < 0.35 else rng.lognormvariate(math.log(2.0 if traffic < 0.9 else 300.0), 1.0)
            for _ in range(partitions)
        )
        starts = tuple(rng.randint(0, 50_000_000) for _ in range(partitions))
        epochs = tuple(rng.randint(0, 4) for _ in range(partitions))
        topics[name] = Topic(name, topic_id(rng), rates, starts, epochs)
    return topics


def _group_id(rng: random.Random, index: int, protocol: str) -> str:
    app = f"{rng.choice(_TEAMS)}-{rng.choice(_APPS)}"
    if index % 97 == 13:
        return f"{app}-grüße-{index}"  # non-ASCII group ids exist; UTF-16 hashing places them
    prefix = "connect-" if index % 53 == 7 and protocol != PROTOCOL_CONSUMER else ""
    return f"{prefix}{app}-{index:04d}"


def build_groups(
    rng: random.Random, topics: dict[str, Topic], count: int, duration_ms: int, churn_minutes: float | None
) -> tuple[GroupPlan, ...]:
    names = list(topics)
    # A few topics are read by many groups (the shared event streams); most by one or two.
    popularity = [rng.paretovariate(2.0) for _ in names]
    weights = [kind[-1] for kind in GROUP_KINDS]
    busiest = max(names, key=lambda name: sum(topics[name].rates))
    groups = []
    for index in range(count):
        kind = rng.choices(GROUP_KINDS, weights)[0]
        # The first groups take every kind in turn, so even a small estate has all of them.
        protocol, client, is_static, is_transactional, _ = GROUP_KINDS[index] if index < len(GROUP_KINDS) else kind
        topic_count = rng.choices((1, 2, 3, 6), (80, 14, 5, 1))[0]
        chosen = tuple(dict.fromkeys(rng.choices(names, popularity, k=topic_count)))
        if is_transactional:  # exactly-once applications process a live stream
            chosen = tuple(name for name in chosen if any(topics[name].rates)) or (busiest,)
        partitions = sum(len(topics[name].rates) for name in chosen)
        regex = None
        if protocol == PROTOCOL_CONSUMER and index % 9 == 0:
            prefix = chosen[0].split(".")[0]
            chosen = tuple(name for name in names if name.startswith(prefix + ".events"))[:4] or chosen
            regex = f"{prefix}\\.events\\..*"
        profile = rng.choices((LAG_HEALTHY, LAG_LAGGING, LAG_STALLED), (85, 10, 5))[0]
        # Each of every 50 groups in these places has a fate, so any estate shows every one of them.
        featured = index % 50
        # Stale: went Empty days ago, only its old offsets are left, and they expire in the window.
        is_stale = (rng.random() < 0.05 or featured == 3) and protocol != PROTOCOL_CONSUMER and not is_transactional
        is_flapping = rng.random() < 0.02
        is_born = (rng.random() < 0.05 or featured in (2, 9)) and not is_stale
        dies = (rng.random() < 0.06 or featured in (1, 8)) and not is_stale
        born_at = WINDOW_START_MS + int(rng.uniform(0.05, 0.6) * duration_ms) if is_born else None
        dies_at = WINDOW_START_MS + int(rng.uniform(0.2 if not is_born else 0.7, 0.9) * duration_ms) if dies else None
        is_deleted = dies_at is not None and (rng.random() < 0.6 or featured == 8)
        deleted_at = dies_at + int(rng.uniform(0.01, 0.08) * duration_ms) if is_deleted else None
        has_retention = rng.random() < 0.01 or featured == 0
        groups.append(
            GroupPlan(
                index=index,
                group_id=_group_id(rng, index, protocol),
                protocol=protocol,
                client=client,
                is_static=is_static,
                is_transactional=is_transactional,
                topics=chosen,
                regex=regex,
                members=0 if is_stale else max(1, min(partitions, rng.choice(_MEMBER_COUNTS))),
                commit_interval_ms=5_000 if is_transactional else rng.choice(_COMMIT_INTERVALS_MS),
                commits_every_partition=client == CLIENT_JAVA and not is_transactional,
                lag_profile=profile,
                lag_factor=rng.uniform(0.5, 0.95),
                stall_at_ms=WINDOW_START_MS + int(rng.uniform(0.1, 0.8) * duration_ms)
                if profile == LAG_STALLED
                else None,
                churn_mean_ms=rng.uniform(60_000, 180_000)
                if is_flapping
                else (churn_minutes or rng.uniform(10, 60)) * 60_000,
                born_at_ms=born_at,
                dies_at_ms=dies_at,
                deleted_at_ms=deleted_at,
                retention_ms=86_400_000 if has_retention else None,
                metadata=rng.choice((b"",) * 8 + (b"\x00", f"host-{index}:{protocol}".encode(), "λ-worker".encode())),
                session_timeout_ms=rng.choice((10_000, 30_000, 45_000)),
                rebalance_timeout_ms=rng.choice((60_000, 300_000)),
            )
        )
    return tuple(groups)


@dataclass(frozen=True)
class EstateShape:
    """The knobs of an estate; the defaults make a large one."""

    groups: int = 2_000
    topics: int = 1_500
    max_partitions: int = 256
    churn_minutes: float | None = None  # mean minutes between a group's membership changes (default 10-60)
    cleaned_fraction: float = 0.3  # share of the window the log cleaner has compacted


def build_estate(seed: int, shape: EstateShape, window_ms: int) -> Estate:
    topic_map = build_topics(random.Random(seed), shape.topics, shape.max_partitions)
    groups = build_groups(random.Random(seed + 1), topic_map, shape.groups, window_ms, shape.churn_minutes)
    return Estate(topic_map, groups, seed, window_ms)
