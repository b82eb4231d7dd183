"""One consumer group member as its own process, so a scenario can stop it cleanly (SIGTERM: leave the
group) or kill it (SIGKILL: the coordinator notices only when its session times out).

    python -m lab.consumer_process --bootstrap HOST:PORT --group G --topics a,b [--assignor range]
        [--protocol classic|consumer] [--instance-id ID] [--session-timeout-ms 6000] [--metadata TEXT]

It consumes and commits what it consumed every --commit-interval-ms, with --metadata as the commit's
metadata string. `--client kafka-python` uses kafka-python (for the eager `sticky` assignor, which
librdkafka does not implement).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time


def run_confluent(args: argparse.Namespace, should_stop) -> None:
    from confluent_kafka import Consumer, TopicPartition

    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "log_level": 3,
    }
    if args.protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config.update(
            {
                "partition.assignment.strategy": args.assignor,
                "session.timeout.ms": args.session_timeout_ms,
                "heartbeat.interval.ms": 500,
            }
        )
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    consumer.subscribe(args.topics.split(","))
    positions: dict[tuple[str, int], int] = {}
    last_commit = time.monotonic()
    try:
        while not should_stop():
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                positions[(message.topic(), message.partition())] = message.offset() + 1
            owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
            due = time.monotonic() - last_commit >= args.commit_interval_ms / 1000
            to_commit = [
                TopicPartition(topic, partition, offset, metadata=args.metadata)
                for (topic, partition), offset in positions.items()
                if (topic, partition) in owned
            ]
            if due and to_commit:
                try:
                    consumer.commit(offsets=to_commit, asynchronous=False)
                except Exception as error:  # a commit racing a rebalance is retried on the next tick
                    print(f"commit failed: {error}", file=sys.stderr, flush=True)
                last_commit = time.monotonic()
    finally:
        consumer.close()


def run_kafka_python(args: argparse.Namespace, should_stop) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    consumer = KafkaConsumer(
        *args.topics.split(","),
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        partition_assignment_strategy=[StickyPartitionAssignor],
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=500,
    )
    try:
        while not should_stop():
            batches = consumer.poll(timeout_ms=args.commit_interval_ms)
            offsets = {
                TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(records[-1].offset + 1, args.metadata, -1)
                for tp, records in batches.items()
                if records
            }
            if offsets:
                try:
                    consumer.commit(offsets)
                except Exception as error:  # a commit racing a rebalance is retried on the next poll
                    print(f"commit failed: {error}", file=sys.stderr, flush=True)
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topics", required=True)
    parser.add_argument("--client-id", default="groupscope-lab")
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--instance-id")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--commit-interval-ms", type=int, default=500)
    parser.add_argument("--metadata", default="")
    parser.add_argument("--client", choices=("confluent", "kafka-python"), default="confluent")
    args = parser.parse_args(argv)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    runner = run_kafka_python if args.client == "kafka-python" else run_confluent
    runner(args, lambda: bool(stopping))
    return 0


if __name__ == "__main__":
    sys.exit(main())
