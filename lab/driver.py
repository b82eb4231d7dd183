"""What scenario drivers share: the ground-truth log (`ScenarioLog`) and `Lab`, the helper that creates
topics, produces, starts and stops member processes and waits for the broker's own view of a group.

Waits poll the broker (DescribeGroups, ListOffsets, OffsetFetch) against a deadline; a short pause
between two polls is the only sleep, never a guess that a state has been reached.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from lab.broker import TOOL_JVM_OPTIONS, Broker, classpath
from lab.snapshots import record_timestamps

WAIT_DEADLINE_S = 60
POLL_INTERVAL_S = 0.2
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
SESSION_TIMEOUT_MS = 6000  # classic members; the broker's group.consumer.session.timeout.ms matches it


class ScenarioError(RuntimeError):
    pass


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ScenarioLog:
    """The ground truth of one scenario run: every event a driver caused, with its wall time, plus what
    is known by construction (`expected`). Member processes append their own events (assignments,
    revocations, commits) to JSON-lines files in `workdir`; `as_json()` merges them in time order.
    """

    scenario: str
    kafka_version: str
    workdir: Path
    events: list[dict] = field(default_factory=list)
    expected: list[dict] = field(default_factory=list)
    topics: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    # {topic: {partition: [[offset, timestamp_ms], ...]}} of topics deleted during the scenario, read just
    # before the deletion (the capture reads the others at the end): the truth time lag is checked against.
    deleted_topic_records: dict[str, dict] = field(default_factory=dict)
    still_running: list[Callable[[], None]] = field(default_factory=list)

    def event(self, event: str, **details) -> None:
        self.events.append({"at_ms": now_ms(), "event": event, **details})

    def expect(self, group: str, note: str, **facts) -> None:
        """Something true by construction, e.g. `generation=3` right after a rebalance the driver caused."""
        self.expected.append({"at_ms": now_ms(), "group": group, "note": note, **facts})

    def keep_running(self, closer: Callable[[], None]) -> None:
        """Something left running for the capture to see (members, an open transaction); closed after it."""
        self.still_running.append(closer)

    def close(self) -> None:
        """Closes everything left running, last registered first; one failure does not stop the others."""
        errors = []
        while self.still_running:
            try:
                self.still_running.pop()()
            except Exception as error:  # re-raised below, once the rest is closed
                errors.append(error)
        if errors:
            raise errors[0]

    def member_events(self) -> list[dict]:
        events = []
        for path in sorted(self.workdir.glob("member-*.jsonl")):
            events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return events

    def as_json(self) -> dict:
        return {
            "scenario": self.scenario,
            "kafka_version": self.kafka_version,
            "topics": sorted(self.topics),
            "groups": sorted(self.groups),
            "expected": self.expected,
            "events": sorted(self.events + self.member_events(), key=lambda event: event["at_ms"]),
        }


class Lab:
    """Clients and member processes of one scenario against one broker; records into `record`."""

    def __init__(self, broker: Broker, record: ScenarioLog):
        self.broker = broker
        self.record = record
        self.admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
        self.producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "log_level": 0})
        self.members: dict[str, subprocess.Popen] = {}
        self.partitions: dict[str, int] = {}
        record.keep_running(self.close)

    # --- topics and data -------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int) -> None:
        self.admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
        self._wait_for_leaders(name, partitions)
        self.partitions[name] = partitions
        self.record.topics.add(name)
        self.record.event("topic_created", topic=name, partitions=partitions)

    def add_partitions(self, name: str, total: int) -> None:
        self.admin.create_partitions([NewPartitions(name, total)])[name].result(30)
        self._wait_for_leaders(name, total)
        self.partitions[name] = total
        self.record.event("partitions_added", topic=name, partitions=total)

    def delete_topic(self, name: str) -> None:
        self.record.deleted_topic_records[name] = record_timestamps(self.broker.bootstrap_servers, [name])[name]
        self.admin.delete_topics([name])[name].result(30)
        self.wait_for(f"topic {name} deleted", lambda: name not in self.admin.list_topics(timeout=10).topics)
        self.partitions.pop(name)
        self.record.topics.discard(name)
        self.record.event("topic_deleted", topic=name)

    def _wait_for_leaders(self, name: str, partitions: int) -> None:
        def led() -> bool:
            # Asked through the producer, so its own metadata cache learns new partitions too.
            topic = self.producer.list_topics(name, timeout=10).topics.get(name)
            return (
                bool(topic)
                and len(topic.partitions) == partitions
                and all(partition.leader >= 0 for partition in topic.partitions.values())
            )

        self.wait_for(f"{name} to have {partitions} partitions with leaders", led)

    def produce(self, topic: str, count: int) -> None:
        """`count` small records spread round-robin over the topic's partitions."""
        for index in range(count):
            self.producer.produce(
                topic, key=f"k{index}".encode(), value=b"v" * 16, partition=index % self.partitions[topic]
            )
        if self.producer.flush(30):
            raise ScenarioError(f"could not deliver {count} records to {topic}")
        self.record.event("produced", topic=topic, records=count)

    # --- members ---------------------------------------------------------------------------------
    def start_member(self, name: str, group: str, topics: Iterable[str], **options: object) -> None:
        """A member process (lab.member); options are its flags, e.g. assignor="range", instance_id="s1".
        client="java" runs Kafka's own console consumer (the Java client of the broker's line) instead."""
        topic_list = ",".join(topics)
        if options.get("client") == "java":
            command = self._java_member(name, group, topic_list, **options)
        else:
            command = [sys.executable, "-m", "lab.member", "--bootstrap", self.broker.bootstrap_servers]
            command += ["--group", group, "--topics", topic_list, "--name", name]
            command += ["--events", str(self.record.workdir / f"member-{name}.jsonl")]
            for option, value in options.items():
                command += [f"--{option.replace('_', '-')}", str(value)]
        with open(self.record.workdir / f"member-{name}.log", "ab") as log:
            self.members[name] = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        self.record.groups.add(group)
        self.record.event("member_started", member=name, group=group, topics=topic_list, **options)

    def _java_member(self, name: str, group: str, topics: str, **options: object) -> list[str]:
        """kafka-console-consumer as a group member: auto-commit every 2 s, output discarded."""
        properties = {"client.id": name, "auto.commit.interval.ms": 2000}
        if options.get("protocol") == "consumer":
            properties["group.protocol"] = "consumer"
        else:
            properties |= {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 500}
            if options.get("assignor"):
                properties["partition.assignment.strategy"] = options["assignor"]
        if options.get("instance_id"):
            properties["group.instance.id"] = options["instance_id"]
        command = ["java", *TOOL_JVM_OPTIONS, "-cp", classpath(self.broker.version), CONSOLE_CONSUMER]
        command += ["--bootstrap-server", self.broker.bootstrap_servers, "--group", group, "--from-beginning"]
        command += ["--include", "|".join(topics.split(","))]
        for key, value in properties.items():
            command += ["--consumer-property", f"{key}={value}"]
        return command

    def stop_member(self, name: str) -> None:
        """A clean stop: the member commits, closes and (if dynamic) sends LeaveGroup."""
        process = self.members.pop(name)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise ScenarioError(f"member {name} did not stop within 30s") from None
        self.record.event("member_stopped", member=name)

    def kill_member(self, name: str) -> None:
        """A crash: SIGKILL, nothing is sent; the coordinator notices when the session times out."""
        process = self.members.pop(name)
        process.kill()
        process.wait(30)
        self.record.event("member_killed", member=name)

    def close(self) -> None:
        """After the capture (broker stopped): members still running are killed; nothing reaches the log."""
        for name in list(self.members):
            process = self.members.pop(name)
            process.kill()
            process.wait(30)
            self.record.event("member_killed_after_capture", member=name)
        self.producer.flush(5)

    # --- waiting on the broker's view ------------------------------------------------------------
    def wait_for(self, what: str, condition: Callable[[], bool], deadline_s: float = WAIT_DEADLINE_S) -> None:
        deadline = time.monotonic() + deadline_s
        last_error = None
        while time.monotonic() < deadline:
            try:
                if condition():
                    return
            except KafkaException as error:  # e.g. COORDINATOR_LOAD_IN_PROGRESS: ask again
                last_error = error
            time.sleep(POLL_INTERVAL_S)
        raise ScenarioError(
            f"timed out after {deadline_s}s waiting for {what}" + (f": {last_error}" if last_error else "")
        )

    def set_group_config(self, group: str, config: str) -> None:
        """Group configs (`a=1,b=2`, kafka-configs --entity-type groups), set before the group exists and
        read back: share and streams groups take settings from them that no client or broker-wide setting
        gives (the share group's start offset, the streams group's standby replicas and session)."""
        args = ("--entity-type", "groups", "--entity-name", group)
        self.broker.configs(*args, "--alter", "--add-config", config)
        described = self.broker.configs(*args, "--describe")
        if any(setting not in described for setting in config.split(",")):
            raise ScenarioError(f"group config {config} not applied to {group}: {described}")
        self.record.event("group_config_set", group=group, config=config)

    def describe(self, group: str):
        return self.admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)

    def wait_for_group(self, group: str, members: int, topics: Iterable[str]) -> dict[str, list[str]]:
        """Waits until `group` is Stable with `members` members owning every partition of `topics`;
        records and returns the assignment {client id: partitions}."""
        wanted = sorted(f"{topic}-{part}" for topic in topics for part in range(self.partitions[topic]))

        def assignment(description) -> dict[str, list[str]]:
            return {
                member.client_id: sorted(f"{tp.topic}-{tp.partition}" for tp in member.assignment.topic_partitions)
                for member in description.members
            }

        def settled() -> bool:
            description = self.describe(group)
            owned = sorted(part for parts in assignment(description).values() for part in parts)
            return description.state.name == "STABLE" and len(description.members) == members and owned == wanted

        self.wait_for(f"group {group} Stable with {members} member(s) owning {len(wanted)} partitions", settled)
        result = assignment(self.describe(group))
        self.record.event("group_stable", group=group, members=members, assignment=result)
        return result

    def wait_for_state(self, group: str, state: str) -> None:
        self.wait_for(f"group {group} {state}", lambda: self.describe(group).state.name == state.upper())
        self.record.event("group_state", group=group, state=state)

    def group_gone(self, group: str) -> bool:
        """The coordinator no longer knows the group (deleted, or expired with all its offsets)."""
        try:
            return self.describe(group).state.name == "DEAD"
        except KafkaException as error:
            if error.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return True
            raise

    def group_epoch(self, group: str) -> int | None:
        """A KIP-848 group's epoch as kafka-consumer-groups --describe --state --verbose prints it (the
        column arrived after 3.9: None there)."""
        lines = [
            line.split()
            for line in self.broker.consumer_groups("--describe", "--group", group, "--state", "--verbose").splitlines()
        ]
        header = next((line for line in lines if line[:1] == ["GROUP"]), [])
        row = next((line for line in lines if line[:1] == [group]), [])
        if "GROUP-EPOCH" not in header or not row:
            return None
        # "COORDINATOR (ID)" is one column in two words, "host:port  (id)" one value in two: same offsets.
        return int(row[header.index("GROUP-EPOCH")])

    def member_ids(self, group: str) -> dict[str, str]:
        """{group.instance.id or client id: member id}."""
        return {
            member.group_instance_id or member.client_id: member.member_id for member in self.describe(group).members
        }

    def committed(self, group: str) -> dict[str, int]:
        """{"topic-partition": committed offset} as OffsetFetch returns it (read_committed view)."""
        request = [ConsumerGroupTopicPartitions(group)]
        try:
            result = self.admin.list_consumer_group_offsets(request)[group].result(30)
        except KafkaException as error:
            if error.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return {}
            raise
        return {f"{tp.topic}-{tp.partition}": tp.offset for tp in result.topic_partitions if tp.offset >= 0}

    def end_offsets(self, topics: Iterable[str]) -> dict[str, int]:
        ends = self.broker.end_offsets(topics)
        return {f"{topic}-{part}": end for topic, parts in ends.items() for part, end in parts.items()}

    def wait_caught_up(self, group: str, topics: Iterable[str]) -> None:
        """Waits until the group has committed the end offset of every non-empty partition of `topics`."""
        ends = {part: end for part, end in self.end_offsets(topics).items() if end > 0}

        def caught_up() -> bool:
            committed = self.committed(group)
            return all(committed.get(part) == end for part, end in ends.items())

        self.wait_for(f"group {group} to commit up to {ends}", caught_up)
        self.record.event("group_caught_up", group=group, committed=ends)


def commit_with_retention(
    lab: Lab, group: str, offsets: dict[tuple[str, int], int], retention_ms: int, metadata: str
) -> None:
    """A standalone OffsetCommit (v4, generation -1) carrying retention_time_ms: the broker then writes
    OffsetCommitValue v1 with an expire timestamp. Retention left the request in v5 (KIP-211), and no
    maintained client sets it, so the request is built from kafka-python's protocol classes.
    """
    from kafka import KafkaAdminClient
    from kafka.protocol.consumer import OffsetCommitRequest

    topic_type = OffsetCommitRequest.OffsetCommitRequestTopic
    partition_type = topic_type.OffsetCommitRequestPartition
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            partition_type(
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata=metadata,
            )
        )
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=retention_ms,
        max_version=4,
        topics=[topic_type(name=topic, partitions=parts) for topic, parts in by_topic.items()],
    )
    admin = KafkaAdminClient(bootstrap_servers=lab.broker.bootstrap_servers)

    async def send():
        coordinator = await admin._find_coordinator_id(group)
        return await admin._manager.send(request, node_id=coordinator)

    try:
        response = admin._manager.run(send)
    finally:
        admin.close()
    errors = [part.error_code for topic in response.topics for part in topic.partitions]
    if any(errors):
        raise ScenarioError(f"OffsetCommit with retention for {group} refused: error codes {errors}")
    lab.record.groups.add(group)
    lab.record.event(
        "committed_with_retention",
        group=group,
        offsets={f"{topic}-{part}": offset for (topic, part), offset in sorted(offsets.items())},
        retention_ms=retention_ms,
        metadata=metadata,
    )
