"""Scenario drivers: real consumer-group history on a real broker, with the ground truth written down.

Each scenario is `run(lab)`: it creates topics, produces, starts and stops member processes and
records every event in `lab.events`. Waits poll the broker's own view (DescribeGroups, committed
offsets) against a deadline; no sleep stands in for a state being reached. Members stay alive at
the end, so the capture shows each group as `kafka-consumer-groups --describe` saw it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from lab.broker import Broker

WAIT_DEADLINE_S = 90


class ScenarioError(RuntimeError):
    pass


@dataclass
class Lab:
    broker: Broker
    events: list[dict] = field(default_factory=list)
    members: dict[str, subprocess.Popen] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.admin = AdminClient({"bootstrap.servers": self.broker.bootstrap_servers, "log_level": 3})
        self.producer = Producer({"bootstrap.servers": self.broker.bootstrap_servers, "linger.ms": 5})

    def record(self, event: str, **details) -> None:
        self.events.append({"at_ms": int(time.time() * 1000), "event": event, **details})

    def create_topic(self, name: str, partitions: int) -> None:
        if self.topics.get(name) == partitions:  # scenarios composed on one broker share topics
            return
        self.admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
        self.topics[name] = partitions
        self.record("topic_created", topic=name, partitions=partitions)

    def add_partitions(self, name: str, total: int) -> None:
        self.admin.create_partitions([NewPartitions(name, total)])[name].result(30)
        self.wait_for(
            f"{name} to have {total} partitions",
            lambda: len(self.producer.list_topics(name, 10).topics[name].partitions) == total,
        )
        self.topics[name] = total
        self.record("partitions_added", topic=name, partitions=total)

    def produce(self, topic: str, count: int) -> None:
        for index in range(count):
            self.producer.produce(topic, key=str(index).encode(), value=b"x" * 16, partition=index % self.topics[topic])
        if self.producer.flush(30):
            raise ScenarioError(f"could not deliver {count} messages to {topic}")
        self.record("produced", topic=topic, messages=count)

    def start_member(self, name: str, group: str, topics: str, **options: str) -> None:
        command = [
            sys.executable,
            "-m",
            "lab.consumer_process",
            "--bootstrap",
            self.broker.bootstrap_servers,
            "--group",
            group,
            "--topics",
            topics,
            "--client-id",
            name,
        ]
        for option, value in options.items():
            command += [f"--{option.replace('_', '-')}", str(value)]
        with open(self.broker.workdir / f"{name}.log", "ab") as log:
            self.members[name] = subprocess.Popen(command, stderr=log)
        self.record("member_started", member=name, group=group, topics=topics, **options)

    def stop_member(self, name: str) -> None:
        """A clean leave: the member sends LeaveGroup (dynamic members) before exiting."""
        process = self.members.pop(name)
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        self.record("member_left", member=name)

    def kill_member(self, name: str) -> None:
        """A crash: nothing is sent; the coordinator notices when the session times out."""
        process = self.members.pop(name)
        process.kill()
        process.wait(30)
        self.record("member_killed", member=name)

    def close_clients(self) -> None:
        if hasattr(self, "_reader"):
            self._reader.close()
        self.producer.flush(5)

    def kill_all_members(self) -> None:
        for name in list(self.members):
            process = self.members.pop(name)
            process.kill()
            process.wait(30)

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_DEADLINE_S
        last_error = None
        while time.monotonic() < deadline:
            try:
                if condition():
                    return
            except KafkaException as error:  # e.g. NOT_COORDINATOR while offsets load: ask again
                last_error = error
            time.sleep(0.2)  # polling interval between checks of the broker's state, not a readiness guess
        raise ScenarioError(f"timed out waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))

    def describe(self, group: str):
        return self.admin.describe_consumer_groups([group])[group].result(30)

    def wait_for_group(self, group: str, members: int, topics: tuple[str, ...] | None = None) -> None:
        """Stable with `members` members, every partition of `topics` assigned."""
        wanted = sum(self.topics[topic] for topic in topics) if topics else None

        def settled() -> bool:
            description = self.describe(group)
            assigned = sum(len(member.assignment.topic_partitions) for member in description.members)
            return (
                str(description.state).endswith("STABLE")
                and len(description.members) == members
                and (wanted is None or assigned == wanted)
            )

        self.wait_for(f"group {group} stable with {members} member(s)", settled)
        description = self.describe(group)
        self.record(
            "group_stable",
            group=group,
            members=members,
            assignment={
                member.client_id: sorted(f"{tp.topic}-{tp.partition}" for tp in member.assignment.topic_partitions)
                for member in description.members
            },
        )

    def wait_for_empty(self, group: str) -> None:
        self.wait_for(f"group {group} empty", lambda: str(self.describe(group).state).endswith("EMPTY"))
        self.record("group_empty", group=group)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        request = [ConsumerGroupTopicPartitions(group)]
        result = self.admin.list_consumer_group_offsets(request)[group].result(30)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}

    def wait_caught_up(self, group: str, topics: tuple[str, ...]) -> None:
        def caught_up() -> bool:
            committed = self.committed(group)
            return all(
                committed.get((topic, partition)) == self.end_offset(topic, partition)
                for topic in topics
                for partition in range(self.topics[topic])
            )

        self.wait_for(f"group {group} to commit everything in {topics}", caught_up)

    def end_offset(self, topic: str, partition: int) -> int:
        consumer = self._offsets_reader()
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]

    def _offsets_reader(self) -> Consumer:
        if not hasattr(self, "_reader"):
            self._reader = Consumer(
                {"bootstrap.servers": self.broker.bootstrap_servers, "group.id": "lab-reader", "log_level": 3}
            )
        return self._reader

    def end_offsets(self) -> dict[str, dict[str, int]]:
        return {
            topic: {str(partition): self.end_offset(topic, partition) for partition in range(count)}
            for topic, count in self.topics.items()
        }


def classic_eager(lab: Lab, assignor: str) -> None:
    """Three members join one by one; one leaves cleanly, one crashes (session timeout)."""
    group = f"eager-{assignor}"
    lab.create_topic("orders", 6)
    lab.create_topic("stock", 3)
    lab.produce("orders", 120)
    lab.produce("stock", 30)
    topics = ("orders", "stock")
    for count, name in enumerate(("c1", "c2", "c3"), start=1):
        lab.start_member(name, group, "orders,stock", assignor=assignor, metadata=f"{name}-checkpoint")
        lab.wait_for_group(group, count, topics)
    lab.produce("orders", 60)
    lab.wait_caught_up(group, topics)
    lab.stop_member("c2")
    lab.wait_for_group(group, 2, topics)
    lab.kill_member("c3")
    lab.wait_for_group(group, 1, topics)
    lab.produce("orders", 30)
    lab.wait_caught_up(group, topics)


def cooperative(lab: Lab) -> None:
    """Two cooperative-sticky members, a third joins: one logical rebalance over two generations."""
    group = "coop"
    lab.create_topic("orders", 6)
    lab.produce("orders", 60)
    for count, name in enumerate(("c1", "c2", "c3"), start=1):
        lab.start_member(name, group, "orders", assignor="cooperative-sticky")
        lab.wait_for_group(group, count, ("orders",))
    lab.produce("orders", 60)
    lab.wait_caught_up(group, ("orders",))


def sticky_eager(lab: Lab) -> None:
    """The eager StickyAssignor (kafka-python): three members, then one crashes."""
    group = "sticky"
    lab.create_topic("orders", 6)
    lab.produce("orders", 60)
    for count, name in enumerate(("c1", "c2", "c3"), start=1):
        lab.start_member(name, group, "orders", client="kafka-python")
        lab.wait_for_group(group, count, ("orders",))
    lab.kill_member("c2")
    lab.wait_for_group(group, 2, ("orders",))
    lab.produce("orders", 30)
    lab.wait_caught_up(group, ("orders",))


def static_membership(lab: Lab) -> None:
    """A static member restarts within its session timeout (replaced, no rebalance), then past it."""
    group = "static"
    lab.create_topic("shipments", 4)
    lab.produce("shipments", 40)
    lab.start_member("s1", group, "shipments", instance_id="static-1", session_timeout_ms=6000)
    lab.wait_for_group(group, 1, ("shipments",))
    lab.start_member("s2", group, "shipments", instance_id="static-2", session_timeout_ms=6000)
    lab.wait_for_group(group, 2, ("shipments",))
    lab.kill_member("s1")
    lab.start_member("s1-restarted", group, "shipments", instance_id="static-1", session_timeout_ms=6000)
    lab.wait_for_group(group, 2, ("shipments",))
    lab.record("expected", note="static-1 replaced within its session timeout: same generation, no rebalance")
    lab.kill_member("s2")
    lab.wait_for_group(group, 1, ("shipments",))
    lab.record("expected", note="static-2 gone past its session timeout: a rebalance")
    lab.start_member("s2-back", group, "shipments", instance_id="static-2", session_timeout_ms=6000)
    lab.wait_for_group(group, 2, ("shipments",))
    lab.produce("shipments", 20)
    lab.wait_caught_up(group, ("shipments",))


def commit_with_retention(
    lab: Lab, group: str, topic: str, partition: int, offset: int, retention_ms: int, metadata: str
) -> None:
    """An OffsetCommit (v2-v4) carrying retention_time_ms: the broker then writes an OffsetCommitValue v1.

    No maintained client exposes the field, so the request is built with kafka-python's protocol classes.
    """
    from kafka import KafkaAdminClient
    from kafka.protocol.consumer import OffsetCommitRequest

    topic_type = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=retention_ms,
        max_version=4,
        topics=[
            topic_type(
                name=topic,
                partitions=[
                    topic_type.OffsetCommitRequestPartition(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=metadata,
                    )
                ],
            )
        ],
    )
    admin = KafkaAdminClient(bootstrap_servers=lab.broker.bootstrap_servers)

    async def send():
        coordinator = await admin._find_coordinator_id(group)
        return await admin._manager.send(request, node_id=coordinator)

    try:
        response = admin._manager.run(send)
    finally:
        admin.close()
    errors = [partition.error_code for topic in response.topics for partition in topic.partitions]
    if any(errors):
        raise ScenarioError(f"commit with retention refused: error codes {errors}")
    lab.record(
        "committed_with_retention",
        group=group,
        topic=topic,
        partition=partition,
        offset=offset,
        retention_ms=retention_ms,
    )


def lifecycle(lab: Lab) -> None:
    """Groups going Empty, offsets deleted, a group deleted, commits with metadata and with retention."""
    lab.create_topic("events", 2)
    lab.create_topic("audit", 1)
    lab.produce("events", 20)
    lab.produce("audit", 5)
    for group in ("life-empty", "life-deleted"):
        lab.start_member(f"{group}-m", group, "events,audit", metadata=f"{group}:batch-7")
        lab.wait_for_group(group, 1, ("events", "audit"))
        lab.wait_caught_up(group, ("events", "audit"))
        lab.stop_member(f"{group}-m")
        lab.wait_for_empty(group)
    lab.broker.consumer_groups_command("--delete-offsets", "--group", "life-empty", "--topic", "audit:0")
    lab.record("offsets_deleted", group="life-empty", partitions=["audit-0"])
    lab.admin.delete_consumer_groups(["life-deleted"])["life-deleted"].result(30)
    lab.record("group_deleted", group="life-deleted")
    commit_with_retention(lab, "life-retention", "events", 0, 11, retention_ms=86_400_000, metadata="kept a day")
    commit_with_retention(lab, "life-expiring", "events", 1, 3, retention_ms=1_500, metadata="gone soon")
    lab.wait_for("the short-retention offset to expire", lambda: not lab.committed("life-expiring"))
    lab.record("offsets_expired", group="life-expiring")


def transactions(lab: Lab) -> None:
    """Transactional offset commits: one committed, one aborted, one still open at capture time."""
    group = "txn-group"
    lab.create_topic("refunds", 2)
    lab.produce("refunds", 40)
    consumer = Consumer({"bootstrap.servers": lab.broker.bootstrap_servers, "group.id": group, "log_level": 3})
    producer = Producer(
        {"bootstrap.servers": lab.broker.bootstrap_servers, "transactional.id": "lab-txn", "log_level": 3}
    )
    producer.init_transactions(30)
    try:
        for offset, outcome in ((10, "commit"), (20, "abort"), (30, "open")):
            producer.begin_transaction()
            producer.send_offsets_to_transaction(
                [TopicPartition("refunds", 0, offset), TopicPartition("refunds", 1, offset)],
                consumer.consumer_group_metadata(),
                30,
            )
            if outcome == "commit":
                producer.commit_transaction(30)
            elif outcome == "abort":
                producer.abort_transaction(30)
            lab.record(f"transaction_{outcome}", group=group, offset=offset)
        lab.wait_for("the committed transactional offset", lambda: lab.committed(group).get(("refunds", 0)) == 10)
    finally:
        consumer.close()
    lab.open_transaction_producer = producer  # kept open: its offsets stay pending in the capture


def kip848(lab: Lab) -> None:
    """A KIP-848 `consumer`-protocol group: members join and leave, partitions are added."""
    group = "kip848"
    lab.create_topic("payments", 4)
    lab.produce("payments", 40)
    for count, name in enumerate(("k1", "k2", "k3"), start=1):
        lab.start_member(name, group, "payments", protocol="consumer")
        lab.wait_for_group(group, count, ("payments",))
    lab.stop_member("k2")
    lab.wait_for_group(group, 2, ("payments",))
    lab.add_partitions("payments", 6)
    lab.wait_for_group(group, 2, ("payments",))
    lab.produce("payments", 30)
    lab.wait_caught_up(group, ("payments",))


def tour(lab: Lab) -> None:
    """Several scenarios on one broker: the small, rich capture shipped in samples/ for the quick start."""
    classic_eager(lab, "range")
    cooperative(lab)
    static_membership(lab)
    transactions(lab)
    lifecycle(lab)
    kip848(lab)


SCENARIOS: dict[str, tuple[Callable[[Lab], None], tuple[str, ...]]] = {
    "eager-range": (lambda lab: classic_eager(lab, "range"), ("4", "3.9")),
    "eager-roundrobin": (lambda lab: classic_eager(lab, "roundrobin"), ("4", "3.9")),
    "sticky": (sticky_eager, ("4", "3.9")),
    "cooperative": (cooperative, ("4", "3.9")),
    "static": (static_membership, ("4", "3.9")),
    "lifecycle": (lifecycle, ("4", "3.9")),
    "transactions": (transactions, ("4", "3.9")),
    "kip848": (kip848, ("4",)),
    "tour": (tour, ("4",)),
}
