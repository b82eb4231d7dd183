"""One consumer-group member in its own process, so a scenario can stop it cleanly (SIGTERM: it closes
and leaves the group) or kill it (SIGKILL: nothing is sent; the coordinator notices when the session
times out).

    python -m lab.member --bootstrap HOST:PORT --group G --topics a,b --name c1 --events c1.jsonl
        [--client confluent|kafka-python] [--protocol classic|consumer] [--assignor range]
        [--instance-id ID] [--session-timeout-ms 6000] [--metadata TEXT]

The member consumes and, every --commit-interval-ms, commits the positions that advanced since its last
commit, with --metadata as the commit's metadata string; on a revocation it first commits what it
consumed from the revoked partitions. Every assignment, revocation and commit is appended to --events
as one JSON line with the wall time: the member's own side of the ground truth.

Clients: confluent-kafka (librdkafka) for range, roundrobin, cooperative-sticky and the KIP-848
`consumer` protocol; kafka-python for the eager `sticky` assignor, which librdkafka does not implement.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path


class EventLog:
    """Appends one JSON line per event and flushes it, so a killed member's events survive it."""

    def __init__(self, path: Path, member: str):
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the process lifetime
        self.member = member

    def __call__(self, event: str, **details) -> None:
        line = {"at_ms": int(time.time() * 1000), "event": event, "member": self.member, **details}
        self.file.write(json.dumps(line, sort_keys=True) + "\n")
        self.file.flush()


def partitions(items) -> list[str]:
    return sorted(f"{item.topic}-{item.partition}" for item in items)


def run_confluent(args: argparse.Namespace, log: EventLog, stopping: Callable[[], bool]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "log_level": 3,
    }
    if args.protocol == "consumer":  # KIP-848: session, heartbeat and assignor are the broker's business
        config |= {"group.protocol": "consumer"}
        if args.assignor:
            config["group.remote.assignor"] = args.assignor
    else:
        config |= {
            "partition.assignment.strategy": args.assignor or "range",
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": 500,
        }
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    consumed: dict[tuple[str, int], int] = {}  # next offset to read, per partition
    committed: dict[tuple[str, int], int] = {}

    def commit(owned: set[tuple[str, int]]) -> None:
        due = {key: offset for key, offset in consumed.items() if key in owned and committed.get(key) != offset}
        if not due:
            return
        # confluent-kafka sends a given metadata string with a trailing NUL byte (seen in the log as "...\u0000").
        extra = {} if args.metadata is None else {"metadata": args.metadata}
        offsets = [TopicPartition(topic, part, offset, **extra) for (topic, part), offset in due.items()]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except Exception as error:  # e.g. a commit racing a rebalance; the next tick commits again
            log("commit_failed", error=str(error))
            return
        committed.update(due)
        log("committed", offsets={f"{t}-{p}": o for (t, p), o in sorted(due.items())}, metadata=args.metadata)

    def on_assign(_, assigned) -> None:
        log("assigned", partitions=partitions(assigned))

    def on_revoke(_, revoked) -> None:
        commit({(item.topic, item.partition) for item in revoked})
        log("revoked", partitions=partitions(revoked))

    def on_lost(_, lost) -> None:
        log("lost", partitions=partitions(lost))

    consumer.subscribe(args.topics.split(","), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    log("subscribed", topics=args.topics.split(","), group=args.group)
    last_commit = time.monotonic()
    try:
        while not stopping():
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                consumed[(message.topic(), message.partition())] = message.offset() + 1
            if time.monotonic() - last_commit >= args.commit_interval_ms / 1000:
                commit({(item.topic, item.partition) for item in consumer.assignment()})
                last_commit = time.monotonic()
    finally:
        commit({(item.topic, item.partition) for item in consumer.assignment()})
        consumer.close()  # a dynamic member leaves the group; a static one does not
        log("closed")


def run_kafka_python(args: argparse.Namespace, log: EventLog, stopping: Callable[[], bool]) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignors = {"sticky": StickyPartitionAssignor}
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id,
        client_id=args.name,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        partition_assignment_strategy=[assignors[args.assignor or "sticky"]],
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=500,
    )
    consumed: dict[TopicPartition, int] = {}
    committed: dict[TopicPartition, int] = {}

    def generation() -> int:
        return consumer._coordinator._generation.generation_id  # the member's own view, for the ground truth

    def commit(owned) -> None:
        due = {tp: offset for tp, offset in consumed.items() if tp in owned and committed.get(tp) != offset}
        if not due:
            return
        try:
            metadata = args.metadata or ""
            consumer.commit({tp: OffsetAndMetadata(offset, metadata, -1) for tp, offset in due.items()})
        except Exception as error:  # e.g. a commit racing a rebalance; the next poll commits again
            log("commit_failed", error=str(error))
            return
        committed.update(due)
        log(
            "committed",
            offsets={f"{tp.topic}-{tp.partition}": o for tp, o in sorted(due.items())},
            metadata=args.metadata,
        )

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            commit(set(revoked))
            log("revoked", partitions=partitions(revoked))

        def on_partitions_assigned(self, assigned):
            log("assigned", partitions=partitions(assigned), generation=generation())

    consumer.subscribe(args.topics.split(","), listener=Listener())
    log("subscribed", topics=args.topics.split(","), group=args.group)
    try:
        while not stopping():
            for tp, records in consumer.poll(timeout_ms=200).items():
                if records:
                    consumed[tp] = records[-1].offset + 1
            commit(consumer.assignment())
    finally:
        commit(consumer.assignment())
        consumer.close()
        log("closed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topics", required=True)
    parser.add_argument("--name", required=True, help="client.id, and the member's name in the events")
    parser.add_argument("--events", type=Path, required=True)
    parser.add_argument("--client", choices=("confluent", "kafka-python"), default="confluent")
    parser.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--assignor")
    parser.add_argument("--instance-id")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--commit-interval-ms", type=int, default=500)
    parser.add_argument("--metadata", help="commit metadata string; none given: the client's default")
    args = parser.parse_args(argv)
    stop_requested: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _: stop_requested.append(signum))
    log = EventLog(args.events, args.name)
    runner = run_kafka_python if args.client == "kafka-python" else run_confluent
    runner(args, log, lambda: bool(stop_requested))
    return 0


if __name__ == "__main__":
    sys.exit(main())
