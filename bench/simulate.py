"""One `__consumer_offsets` partition over the window: every append its group coordinator makes.

Event-driven: the groups that live in this partition (Kafka's hash of the group id) commit on their
cadence, gain and lose members, rebalance by their protocol, die and are deleted; each coordinator
write is an `Append` (one request's records, or one transaction marker), in log order. Before the
window, the log already holds each existing group's latest records (what compaction leaves of the
past days); records older than two days were written before the broker was upgraded from 3.9
(the Scala coordinator: OffsetCommitValue v3, batches with baseSequence -1).

What the coordinator writes, and when (kafka-record-formats.md section 8): a classic group record per
completed rebalance (cooperative: two, revoke then assign), the same generation again when a static
member is replaced, an Empty record when the last member leaves, a generation-0 record when the Java
coordinator creates a group; KIP-848 groups write member metadata (5), group epoch (3), target
assignment (7, then 6) and each member's reconciliation (8: unrevoked, then stable at the new epoch),
tombstones of 8, 7 and 5 when a member leaves; deletion writes offset tombstones first, then the
group's. Exactly-once applications commit inside transactions that end in COMMIT or (rarely) ABORT
markers; the last may still be open when the window ends.
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from bench import records as rec
from bench.assignors import TopicPartition, grouped, range_assignment, roundrobin_assignment, sticky_assignment
from bench.batch_builder import ABORT, COMMIT
from bench.estate import (
    CLIENT_JAVA,
    CLIENT_KAFKA_PYTHON,
    CLIENT_LIBRDKAFKA,
    LAG_LAGGING,
    LAG_STALLED,
    PROTOCOL_CONSUMER,
    PROTOCOL_COOPERATIVE,
    PROTOCOL_RANGE,
    PROTOCOL_ROUNDROBIN,
    WINDOW_START_MS,
    Estate,
    GroupPlan,
    Topic,
)
from transforms.decoder.layout_reader import uuid_to_kafka_string

UPGRADE_AGE_MS = 2 * 86_400_000  # records older than this were written by the 3.9 broker
OFFSETS_RETENTION_MS = 7 * 86_400_000  # offsets.retention.minutes default
EXPIRY_SWEEP_MS = 600_000  # offsets.retention.check.interval.ms default
ABORT_SHARE = 0.03


@dataclass(slots=True)
class Append:
    """One coordinator write: one request's records, or one transaction marker."""

    at_ms: int
    records: list[tuple[bytes, bytes | None]]
    producer_id: int = -1
    producer_epoch: int = -1
    is_transactional: bool = False
    marker: int | None = None  # COMMIT or ABORT
    is_scala_coordinator: bool = False


@dataclass(slots=True)
class Member:
    member_id: str
    slot: int
    client_id: str
    host: str
    instance_id: str | None
    assigned: list[TopicPartition] = field(default_factory=list)
    token: int = 0  # changes when the member leaves or restarts, cancelling its scheduled commits
    epoch: int = 0  # KIP-848 member epoch
    target: list[TopicPartition] = field(default_factory=list)  # KIP-848 target assignment
    producer_epoch: int = 0
    user_data_generation: int = -1  # the generation its owned partitions came from (sticky assignors)


class Coordinator:
    """The log of one `__consumer_offsets` partition, and the clock that drives its groups."""

    def __init__(self, estate: Estate, partition: int, seed: int) -> None:
        self.estate, self.partition = estate, partition
        self.rng = random.Random(seed * 1_000_003 + partition)
        self.appends: list[Append] = []
        self._events: list = []
        self._sequence = 0

    def at(self, at_ms: int, action: Callable, *args) -> None:
        if at_ms < self.estate.end_ms:
            self._sequence += 1
            heapq.heappush(self._events, (at_ms, self._sequence, action, args))

    def append(self, at_ms: int, records: list, **batch) -> None:
        is_scala = at_ms < WINDOW_START_MS - UPGRADE_AGE_MS
        self.appends.append(Append(at_ms, records, is_scala_coordinator=is_scala, **batch))

    def run(self, groups: list[GroupPlan]) -> list[Append]:
        return list(self.appends_of(groups))

    def appends_of(self, groups: list[GroupPlan]) -> Iterator[Append]:
        """The partition's appends in log order, each handed on once written (the log is never held whole)."""
        states = [
            (ConsumerGroup if plan.protocol == PROTOCOL_CONSUMER else ClassicGroup)(self, plan) for plan in groups
        ]
        history = []
        for state in states:
            history.extend(state.history())
        history.sort(key=lambda entry: entry[0])
        for at_ms, records in history:
            self.append(at_ms, records)
        for state in states:
            state.start()
        yield from self._written()
        while self._events:
            at_ms, _, action, args = heapq.heappop(self._events)
            action(at_ms, *args)
            yield from self._written()

    def _written(self) -> list[Append]:
        written, self.appends = self.appends, []
        return written

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)


class GroupState:
    """What every group kind shares: members, commits, offsets, churn, death and deletion.

    Event handlers append only at their own time; later writes are scheduled as events, so the log
    stays in time order. A rebalance token cancels the steps of a rebalance that a newer one overtook.
    """

    def __init__(self, coordinator: Coordinator, plan: GroupPlan) -> None:
        self.log, self.plan, self.rng = coordinator, plan, coordinator.rng
        self.topics: dict[str, Topic] = {name: coordinator.estate.topics[name] for name in plan.topics}
        self.partition_counts = {name: len(topic.rates) for name, topic in self.topics.items()}
        self.members: dict[str, Member] = {}
        self.committed: dict[TopicPartition, int] = {}
        self._keys: dict[TopicPartition, bytes] = {}
        self._next_slot = 0
        self.is_active = plan.members > 0 and plan.born_at_ms is None
        self.rebalance_token = 0
        self.backlog_ms = self.rng.randint(30_000, 900_000)
        self.app = plan.group_id.rsplit("-", 1)[0]

    # ---- members -------------------------------------------------------------------------
    def new_member(self) -> Member:
        slot, self._next_slot = self._next_slot, self._next_slot + 1
        client = self.plan.client
        if client == CLIENT_JAVA:
            client_id = f"consumer-{self.plan.group_id}-{slot + 1}"
        elif client == CLIENT_LIBRDKAFKA:
            client_id = f"{self.app}-{slot}"
        else:
            client_id = "kafka-python-3.0.12"
        instance_id = f"{self.app}-instance-{slot}" if self.plan.is_static else None
        host = f"/10.{self.rng.randint(0, 255)}.{self.rng.randint(0, 255)}.{self.rng.randint(1, 254)}"
        return Member(self.member_id(client_id, instance_id), slot, client_id, host, instance_id)

    def member_id(self, client_id: str, instance_id: str | None) -> str:
        """Classic member ids: the client id (or instance id) and a UUID, as the broker makes them."""
        return f"{instance_id or client_id}-{self.log.uuid()}"

    def random_member(self) -> Member:
        return self.members[self.rng.choice(list(self.members))]

    # ---- commits -------------------------------------------------------------------------
    def key(self, topic_partition: TopicPartition) -> bytes:
        key = self._keys.get(topic_partition)
        if key is None:
            key = self._keys[topic_partition] = rec.offset_commit_key(self.plan.group_id, *topic_partition)
        return key

    def position(self, topic_partition: TopicPartition, at_ms: int) -> int:
        """The offset the group has consumed to: the end offset a moment ago, less its lag."""
        plan = self.plan
        topic, partition = self.topics[topic_partition[0]], topic_partition[1]
        end = topic.end_offset(partition, at_ms)
        if plan.lag_profile == LAG_LAGGING:
            elapsed_s = (at_ms - WINDOW_START_MS - self.backlog_ms) / 1000
            consumed = topic.start_offsets[partition] + int(topic.rates[partition] * plan.lag_factor * elapsed_s)
        elif plan.lag_profile == LAG_STALLED and at_ms >= plan.stall_at_ms:
            consumed = topic.end_offset(partition, plan.stall_at_ms - self.backlog_ms // 100)
        else:
            consumed = topic.end_offset(partition, at_ms - self.rng.randrange(3_000))
        return max(0, min(end, max(consumed, self.committed.get(topic_partition, 0))))

    def offsets_to_commit(self, partitions: list[TopicPartition], at_ms: int) -> list[tuple[TopicPartition, int]]:
        """Java auto-commit sends every assigned partition; the other clients only those that moved."""
        every = self.plan.commits_every_partition
        moved = []
        for topic_partition in partitions:
            offset = self.position(topic_partition, at_ms)
            if every or self.committed.get(topic_partition) != offset:
                moved.append((topic_partition, offset))
        return moved

    def commit_records(self, offsets: list[tuple[TopicPartition, int]], at_ms: int) -> list:
        plan = self.plan
        version = 1 if plan.retention_ms else 3 if at_ms < WINDOW_START_MS - UPGRADE_AGE_MS else 4
        commit_ms = at_ms - self.rng.randrange(25)  # the broker's clock when it handled the request
        expire_ms = commit_ms + plan.retention_ms if plan.retention_ms else -1
        is_java = plan.client == CLIENT_JAVA
        metadata = b"" if is_java else plan.metadata
        records = []
        for topic_partition, offset in offsets:
            epoch = self.topics[topic_partition[0]].leader_epochs[topic_partition[1]] if is_java else -1
            value = rec.offset_commit_value(version, offset, epoch, metadata, commit_ms, expire_ms)
            records.append((self.key(topic_partition), value))
        return records

    def schedule_commits(self, member: Member, from_ms: int) -> None:
        self.log.at(from_ms + self.rng.randrange(self.plan.commit_interval_ms), self.commit, member, member.token)

    def commit(self, at_ms: int, member: Member, token: int) -> None:
        if not self.is_active or member.token != token or self.members.get(member.member_id) is not member:
            return
        offsets = self.offsets_to_commit(member.assigned, at_ms)
        if offsets:
            if self.plan.is_transactional:
                self.commit_in_transaction(member, offsets, at_ms)
            else:
                self.committed.update(offsets)
                self.log.append(at_ms, self.commit_records(offsets, at_ms))
        jitter = self.plan.commit_interval_ms // 50
        self.log.at(
            at_ms + self.plan.commit_interval_ms + self.rng.randint(-jitter, jitter), self.commit, member, token
        )

    def commit_in_transaction(self, member: Member, offsets: list, at_ms: int) -> None:
        """TxnOffsetCommit: pending until the transaction coordinator writes its marker here."""
        producer = {"producer_id": 4_000 + self.plan.index * 128 + member.slot % 128, "producer_epoch": 0}
        self.log.append(at_ms, self.commit_records(offsets, at_ms), is_transactional=True, **producer)
        outcome = ABORT if self.rng.random() < ABORT_SHARE else COMMIT
        ends_ms = at_ms + self.rng.randint(5, 400)
        if at_ms > self.log.estate.end_ms - self.plan.commit_interval_ms:
            ends_ms = self.log.estate.end_ms  # the capture is taken mid-transaction: this one stays pending
        self.log.at(ends_ms, self.end_transaction, producer, offsets, outcome)

    def end_transaction(self, at_ms: int, producer: dict, offsets: list, outcome: int) -> None:
        self.log.append(at_ms, [], is_transactional=True, marker=outcome, **producer)
        if outcome == COMMIT:
            self.committed.update(offsets)

    def history_commits(self, members: list[Member], before_ms: int) -> list[tuple[int, list]]:
        entries = []
        for member in members:
            at_ms = before_ms - 1 - self.rng.randrange(self.plan.commit_interval_ms)
            offsets = [(tp, self.position(tp, at_ms)) for tp in member.assigned]
            self.committed.update(offsets)
            if offsets:
                entries.append((at_ms, self.commit_records(offsets, at_ms)))
        return entries

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        plan = self.plan
        if plan.members == 0:
            self.expire_offsets_later()
            return
        if plan.born_at_ms is not None:
            self.log.at(plan.born_at_ms, self.born)
        for member in self.members.values():
            self.schedule_commits(member, WINDOW_START_MS)
        if plan.dies_at_ms is not None:
            self.log.at(plan.dies_at_ms, self.die)
        if plan.deleted_at_ms is not None:
            self.log.at(plan.deleted_at_ms, self.delete)
        quiet_until = WINDOW_START_MS if plan.born_at_ms is None else plan.born_at_ms + 60_000
        self.log.at(quiet_until + int(self.rng.expovariate(1 / plan.churn_mean_ms)), self.churn)

    def churn(self, at_ms: int) -> None:
        if not self.is_active:
            return
        self.log.at(at_ms + 1 + int(self.rng.expovariate(1 / self.plan.churn_mean_ms)), self.churn)
        self.rebalance_token += 1
        token, draw = self.rebalance_token, self.rng.random()
        room = sum(self.partition_counts.values()) + 1
        if self.plan.is_static and self.members and draw < 0.7:
            self.log.at(at_ms + self.rng.randint(2_000, 20_000), self.replace_static_member, token)
        elif not self.members or (draw < 0.5 and len(self.members) < room):
            self.log.at(at_ms + self.rng.randint(20, 3_000), self.join, self.new_member(), token)
        else:
            leaving = self.random_member()
            leaving.token += 1  # it stops committing now
            crashed = draw > 0.85  # the coordinator notices only when its session times out
            delay = self.plan.session_timeout_ms if crashed else self.rng.randint(20, 800)
            self.log.at(at_ms + delay, self.leave, leaving, token)

    def expire_offsets_later(self) -> None:
        """A stale group's offsets expire retention after it went Empty, at the next expiry sweep."""
        due_ms = self.stale_since_ms + OFFSETS_RETENTION_MS
        sweep_ms = due_ms + EXPIRY_SWEEP_MS - (due_ms - WINDOW_START_MS) % EXPIRY_SWEEP_MS
        self.log.at(max(sweep_ms, WINDOW_START_MS), self.delete)

    def delete(self, at_ms: int) -> None:
        """DeleteGroups, or the expiry sweep of an empty group: offset tombstones first, then the group's."""
        self.is_active = False
        self.rebalance_token += 1
        tombstones = [(self.key(topic_partition), None) for topic_partition in sorted(self.committed)]
        self.committed.clear()
        self.log.append(at_ms, tombstones + self.group_tombstones())

    def current(self, token: int) -> bool:
        return self.is_active and token == self.rebalance_token

    def history(self) -> list[tuple[int, list]]:
        """What the log holds of this group from before the window (what compaction left)."""
        raise NotImplementedError

    def born(self, at_ms: int) -> None:
        raise NotImplementedError

    def die(self, at_ms: int) -> None:
        raise NotImplementedError

    def join(self, at_ms: int, member: Member, token: int) -> None:
        raise NotImplementedError

    def leave(self, at_ms: int, member: Member, token: int) -> None:
        raise NotImplementedError

    def replace_static_member(self, at_ms: int, token: int) -> None:
        raise NotImplementedError

    def group_tombstones(self) -> list:
        raise NotImplementedError


class ClassicGroup(GroupState):
    """The classic protocol: JoinGroup/SyncGroup rounds, one group record per completed round."""

    def __init__(self, coordinator: Coordinator, plan: GroupPlan) -> None:
        super().__init__(coordinator, plan)
        self.generation = 0
        self.stale_since_ms = WINDOW_START_MS

    def assign(self, members: list[Member]) -> dict[str, list[TopicPartition]]:
        protocol = self.plan.protocol
        if protocol == PROTOCOL_RANGE:
            # Static members are ordered by instance id (KIP-345), so a restart keeps the assignment.
            by_key = {member.instance_id or member.member_id: member.member_id for member in members}
            return {by_key[key]: tps for key, tps in range_assignment(list(by_key), self.partition_counts).items()}
        ids = [member.member_id for member in members]
        if protocol == PROTOCOL_ROUNDROBIN:
            return roundrobin_assignment(ids, self.partition_counts)
        owned = {member.member_id: member.assigned for member in members}
        return sticky_assignment(ids, self.partition_counts, owned)

    def user_data(self, owned: list[TopicPartition], generation: int) -> bytes | None:
        """Assignor user data in each client's own layout (kafka-record-formats.md 5.2, lab README)."""
        client, protocol = self.plan.client, self.plan.protocol
        if client == CLIENT_KAFKA_PYTHON:
            return b"" if generation < 1 else b"\x00\x01" + rec.sticky_user_data(grouped(owned), generation)
        if client == CLIENT_LIBRDKAFKA:
            is_sticky = protocol == PROTOCOL_COOPERATIVE and generation > 0
            return rec.sticky_user_data(grouped(owned), generation) if is_sticky else b""
        if protocol == PROTOCOL_COOPERATIVE and generation > 0:
            return rec.cooperative_sticky_user_data(generation)
        return None

    def member_record(self, member: Member, owned: list[TopicPartition], assigned: list[TopicPartition]) -> bytes:
        client, topics = self.plan.client, sorted(self.plan.topics)
        generation = member.user_data_generation
        user_data = self.user_data(owned, generation)
        if client == CLIENT_KAFKA_PYTHON:
            subscription = rec.consumer_subscription(0, topics, user_data)
        elif self.plan.protocol == PROTOCOL_COOPERATIVE:
            rack = "" if client == CLIENT_LIBRDKAFKA else None
            subscription = rec.consumer_subscription(3, topics, user_data, grouped(owned), generation, rack)
        else:
            subscription = rec.consumer_subscription(
                3, topics, user_data, rack_id="" if client == CLIENT_LIBRDKAFKA else None
            )
        if client == CLIENT_JAVA:
            assignment = rec.consumer_assignment(3, grouped(assigned), None)
        else:  # librdkafka echoes its sticky user data into the assignment; others send it empty
            assignment = rec.consumer_assignment(0, grouped(assigned), user_data if user_data else b"")
        timeouts = (self.plan.rebalance_timeout_ms, self.plan.session_timeout_ms)
        identity = (member.member_id, member.instance_id, member.client_id, member.host)
        return rec.group_member(*identity, *timeouts, subscription, assignment)

    def group_record(self, at_ms: int, members: list[Member], assignment: dict, owned: dict) -> tuple:
        """One completed round: each member's subscription (with what it owned) and assignment."""
        encoded = [
            self.member_record(member, owned.get(member.member_id, []), assignment.get(member.member_id, []))
            for member in members
        ]
        protocol, leader = (self.plan.protocol, members[0].member_id) if members else (None, None)
        value = rec.group_metadata_value(
            "consumer", self.generation, protocol, leader, at_ms - self.rng.randint(3, 60), encoded
        )
        return rec.group_metadata_key(self.plan.group_id), value

    def complete_round(self, at_ms: int, members: list[Member], assignment: dict) -> None:
        self.generation += 1
        owned = {member.member_id: member.assigned for member in members}
        self.log.append(at_ms, [self.group_record(at_ms, members, assignment, owned)])
        for member in members:
            member.assigned = assignment.get(member.member_id, [])
            member.user_data_generation = self.generation

    def rebalance(self, at_ms: int, token: int) -> None:
        members = list(self.members.values())
        if not members:
            self.generation += 1
            self.log.append(at_ms, [self.group_record(at_ms, [], {}, {})])
            return
        target = self.assign(members)
        if self.plan.protocol != PROTOCOL_COOPERATIVE:
            for member in members:  # eager: everything is revoked before the members rejoin
                member.assigned = []
            self.complete_round(at_ms, members, target)
            return
        kept = {m.member_id: [tp for tp in m.assigned if tp in set(target[m.member_id])] for m in members}
        if any(len(kept[member.member_id]) != len(member.assigned) for member in members):
            self.complete_round(at_ms, members, kept)  # the first round revokes what moves
            self.log.at(at_ms + self.rng.randint(200, 2_000), self.second_round, target, token)
        else:
            self.complete_round(at_ms, members, target)

    def second_round(self, at_ms: int, target: dict, token: int) -> None:
        members = list(self.members.values())
        if self.current(token) and {member.member_id for member in members} == set(target):
            self.complete_round(at_ms, members, target)

    def join(self, at_ms: int, member: Member, token: int) -> None:
        if self.current(token):
            self.members[member.member_id] = member
            self.rebalance(at_ms, token)
            self.schedule_commits(member, at_ms)

    def leave(self, at_ms: int, member: Member, token: int) -> None:
        if self.current(token) and member.member_id in self.members:
            del self.members[member.member_id]
            self.rebalance(at_ms, token)

    def replace_static_member(self, at_ms: int, token: int) -> None:
        """A static member restarted within its session: same generation, a new member id, no rebalance."""
        if not self.current(token) or not self.members:
            return
        old = self.random_member()
        old.token += 1
        new = Member(self.member_id(old.client_id, old.instance_id), old.slot, old.client_id, old.host, old.instance_id)
        new.assigned, new.user_data_generation = old.assigned, old.user_data_generation
        self.members = {
            (new.member_id if key == old.member_id else key): (new if key == old.member_id else member)
            for key, member in self.members.items()
        }
        members = list(self.members.values())
        assignment = {member.member_id: member.assigned for member in members}
        self.log.append(at_ms, [self.group_record(at_ms, members, assignment, {})])
        self.schedule_commits(new, at_ms)

    def born(self, at_ms: int) -> None:
        """The Java coordinator writes an empty generation-0 record when JoinGroup creates the group."""
        empty = rec.group_metadata_value("", 0, None, None, at_ms - self.rng.randint(1, 30), [])
        self.log.append(at_ms, [(rec.group_metadata_key(self.plan.group_id), empty)])
        self.is_active = True
        for _ in range(self.plan.members):
            member = self.new_member()
            self.members[member.member_id] = member
        self.log.at(at_ms + self.rng.randint(100, 3_000), self.first_round, self.rebalance_token)

    def first_round(self, at_ms: int, token: int) -> None:
        if self.current(token):
            self.rebalance(at_ms, token)
            for member in self.members.values():
                self.schedule_commits(member, at_ms)

    def die(self, at_ms: int) -> None:
        """Every member leaves: the round completes with nobody, and the group is Empty."""
        if not self.is_active:
            return
        for member in self.members.values():
            member.token += 1
        self.members.clear()
        self.rebalance(at_ms, self.rebalance_token)
        self.is_active = False

    def group_tombstones(self) -> list:
        self.members.clear()
        return [(rec.group_metadata_key(self.plan.group_id), None)]

    def history(self) -> list[tuple[int, list]]:
        if self.plan.born_at_ms is not None:
            return []
        self.generation = self.rng.randint(1, 300)
        if self.plan.members == 0:
            return self.stale_history()
        members = [self.new_member() for _ in range(self.plan.members)]
        assignment = self.assign(members)
        rebalanced_ms = WINDOW_START_MS - self.rng.randint(60_000, 5 * 86_400_000)
        record = self.group_record(rebalanced_ms, members, assignment, {})
        for member in members:
            self.members[member.member_id] = member
            member.assigned, member.user_data_generation = assignment[member.member_id], self.generation
        return [(rebalanced_ms, [record]), *self.history_commits(members, WINDOW_START_MS)]

    def stale_history(self) -> list[tuple[int, list]]:
        """Members committed until days ago, then left: the last commits and the Empty record remain."""
        # Expiring in the first two thirds of the window (or beyond it).
        expires_in_ms = int(self.rng.uniform(0, 1.5) * self.log.estate.duration_ms)
        self.stale_since_ms = WINDOW_START_MS - OFFSETS_RETENTION_MS + expires_in_ms
        members = [self.new_member() for _ in range(self.rng.randint(1, 4))]
        for member, (_, assigned) in zip(members, self.assign(members).items(), strict=True):
            member.assigned = assigned
        commits = self.history_commits(members, self.stale_since_ms - self.rng.randint(1_000, 60_000))
        self.generation += 1
        empty = self.group_record(self.stale_since_ms, [], {}, {})
        return [*commits, (self.stale_since_ms, [empty])]


class ConsumerGroup(GroupState):
    """KIP-848: the broker assigns; records per member and per epoch, reconciled in steps."""

    def __init__(self, coordinator: Coordinator, plan: GroupPlan) -> None:
        super().__init__(coordinator, plan)
        self.epoch = 0
        self.metadata_hash = self.rng.getrandbits(63) - (1 << 62)
        self.has_regex_record = False

    def member_id(self, client_id: str, instance_id: str | None) -> str:
        return uuid_to_kafka_string(self.log.uuid().bytes)  # KIP-848 clients make their own Uuid

    def by_topic_id(self, partitions: list[TopicPartition]) -> list[tuple[bytes, list[int]]]:
        return [(self.topics[topic].topic_id, parts) for topic, parts in grouped(partitions)]

    def member_metadata(self, member: Member) -> tuple:
        plan = self.plan
        regex = plan.regex or ("" if plan.client == CLIENT_LIBRDKAFKA else None)
        topics = [] if plan.regex else sorted(plan.topics)
        value = rec.member_metadata_value(member.client_id, member.host, topics, regex, plan.rebalance_timeout_ms)
        return rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, plan.group_id, member.member_id), value

    def epoch_bump(self) -> tuple:
        self.epoch += 1
        value = rec.consumer_group_metadata_value(self.epoch, self.metadata_hash)
        return rec.group_key(rec.CONSUMER_GROUP_METADATA, self.plan.group_id), value

    def target_records(self) -> list:
        """New targets of the members whose target changed (7), then the assignment epoch (6)."""
        group, members = self.plan.group_id, list(self.members.values())
        owned = {member.member_id: member.target for member in members}
        targets = sticky_assignment(list(owned), self.partition_counts, owned)
        out = []
        for member in members:
            if targets[member.member_id] != member.target or member.epoch == 0:
                member.target = targets[member.member_id]
                key = rec.member_key(rec.TARGET_ASSIGNMENT_MEMBER, group, member.member_id)
                out.append((key, rec.target_assignment_member_value(self.by_topic_id(member.target))))
        epoch_record = rec.target_assignment_metadata_value(self.epoch)
        return [*out, (rec.group_key(rec.TARGET_ASSIGNMENT_METADATA, group), epoch_record)]

    def current_assignment(self, member: Member, epoch: int, previous: int, state: int, pending: list) -> tuple:
        assigned, revoking = self.by_topic_id(member.assigned), self.by_topic_id(pending)
        value = rec.current_member_assignment_value(epoch, previous, state, assigned, revoking)
        return rec.member_key(rec.CURRENT_MEMBER_ASSIGNMENT, self.plan.group_id, member.member_id), value

    def regex_record(self, at_ms: int) -> tuple:
        self.has_regex_record = True
        value = rec.regular_expression_value(sorted(self.plan.topics), self.rng.randint(100, 100_000), at_ms)
        return rec.regular_expression_key(self.plan.group_id, self.plan.regex), value

    def join(self, at_ms: int, member: Member, token: int) -> None:
        if not self.current(token):
            return
        self.is_active = True
        self.members[member.member_id] = member
        records = [self.member_metadata(member), self.epoch_bump(), *self.target_records()]
        if self.plan.regex and not self.has_regex_record:
            records.append(self.regex_record(at_ms))
        held_by_others = {tp for other in self.members.values() if other is not member for tp in other.assigned}
        waits = any(tp in held_by_others for tp in member.target)
        if not waits:
            member.assigned = list(member.target)
        state = rec.MEMBER_UNRELEASED_PARTITIONS if waits else rec.MEMBER_STABLE
        records.append(self.current_assignment(member, self.epoch, 0, state, []))
        member.epoch = self.epoch
        self.log.append(at_ms, records)
        self.log.at(at_ms + self.rng.randint(100, 1_500), self.revoke, token)
        self.schedule_commits(member, at_ms)

    def revoke(self, at_ms: int, token: int) -> None:
        """Members that must give partitions up report UNREVOKED_PARTITIONS, then stable at the new epoch."""
        if not self.current(token):
            return
        for member in self.members.values():
            target = set(member.target)
            revoked = [tp for tp in member.assigned if tp not in target]
            if revoked and member.epoch != self.epoch:
                member.assigned = [tp for tp in member.assigned if tp in target]
                state = rec.MEMBER_UNREVOKED_PARTITIONS
                self.log.append(at_ms, [self.current_assignment(member, member.epoch, member.epoch, state, revoked)])
                self.log.at(at_ms + self.rng.randint(2, 15), self.heartbeat, member, token)
        self.log.at(at_ms + self.rng.randint(100, 1_500), self.converge, token)

    def converge(self, at_ms: int, token: int) -> None:
        """Every other member reaches the group's epoch with its whole target on its next heartbeat."""
        if self.current(token):
            for member in self.members.values():
                self.log.at(at_ms + self.rng.randint(0, 300), self.heartbeat, member, token)

    def heartbeat(self, at_ms: int, member: Member, token: int) -> None:
        is_settled = member.epoch == self.epoch and member.assigned == member.target
        if not self.current(token) or member.member_id not in self.members or is_settled:
            return
        previous = member.epoch
        member.assigned, member.epoch = list(member.target), self.epoch
        self.log.append(at_ms, [self.current_assignment(member, self.epoch, previous, rec.MEMBER_STABLE, [])])

    def member_tombstones(self, member: Member) -> list:
        group = self.plan.group_id
        types = (rec.CURRENT_MEMBER_ASSIGNMENT, rec.TARGET_ASSIGNMENT_MEMBER, rec.CONSUMER_GROUP_MEMBER_METADATA)
        return [(rec.member_key(record_type, group, member.member_id), None) for record_type in types]

    def leave(self, at_ms: int, member: Member, token: int) -> None:
        if not self.current(token) or member.member_id not in self.members:
            return
        del self.members[member.member_id]
        self.log.append(at_ms, [*self.member_tombstones(member), self.epoch_bump()])
        if self.members:
            self.log.at(at_ms + self.rng.randint(100, 600), self.retarget, token)

    def retarget(self, at_ms: int, token: int) -> None:
        if self.current(token) and self.members:
            self.log.append(at_ms, self.target_records())
            self.log.at(at_ms + self.rng.randint(100, 1_500), self.converge, token)

    def replace_static_member(self, at_ms: int, token: int) -> None:
        raise AssertionError("the estate has no static KIP-848 groups")

    def born(self, at_ms: int) -> None:
        token = self.rebalance_token
        self.is_active = True
        for index in range(self.plan.members):
            self.log.at(at_ms + index * self.rng.randint(50, 2_000), self.join, self.new_member(), token)

    def die(self, at_ms: int) -> None:
        """Every member leaves, one heartbeat after another."""
        if not self.is_active:
            return
        self.rebalance_token += 1
        for member in self.members.values():
            member.token += 1
            at_ms += self.rng.randint(10, 500)
            self.log.at(at_ms, self.leave, member, self.rebalance_token)
        self.log.at(at_ms + 1, self.deactivate)

    def deactivate(self, at_ms: int) -> None:
        self.is_active = False

    def group_tombstones(self) -> list:
        """Group deletion: 8 and 7 of every member, 6, 5 of every member, 16, then 3."""
        group, members = self.plan.group_id, list(self.members.values())
        member_types = (rec.CURRENT_MEMBER_ASSIGNMENT, rec.TARGET_ASSIGNMENT_MEMBER)
        keys = [rec.member_key(kind, group, member.member_id) for kind in member_types for member in members]
        keys.append(rec.group_key(rec.TARGET_ASSIGNMENT_METADATA, group))
        keys += [rec.member_key(rec.CONSUMER_GROUP_MEMBER_METADATA, group, member.member_id) for member in members]
        if self.has_regex_record:
            keys.append(rec.regular_expression_key(group, self.plan.regex))
        keys.append(rec.group_key(rec.CONSUMER_GROUP_METADATA, group))
        self.members.clear()
        return [(key, None) for key in keys]

    def history(self) -> list[tuple[int, list]]:
        if self.plan.born_at_ms is not None:
            return []
        at_ms = WINDOW_START_MS - self.rng.randint(60_000, UPGRADE_AGE_MS - 60_000)
        members = [self.new_member() for _ in range(self.plan.members)]
        self.members = {member.member_id: member for member in members}
        self.epoch = self.rng.randint(1, 200)
        records = [self.member_metadata(member) for member in members]
        records += [self.epoch_bump(), *self.target_records()]
        if self.plan.regex:
            records.append(self.regex_record(at_ms))
        for member in members:
            member.assigned, member.epoch = list(member.target), self.epoch
            records.append(self.current_assignment(member, self.epoch, self.epoch - 1, rec.MEMBER_STABLE, []))
        return [(at_ms, records), *self.history_commits(members, WINDOW_START_MS)]
