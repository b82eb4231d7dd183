"""A share group (KIP-932, queues) on Kafka's own KafkaShareConsumer: records in `__consumer_offsets`
(types 9-15: share group epochs, members, target and current assignments, state partition metadata)
and the delivery state in `__share_group_state` (ShareSnapshot and ShareUpdate, by the share coordinator).

The members are lab/share/LabShareConsumer.java, compiled here with javac against the broker line's
jars (the share consumer ships in kafka-clients). Each record's value tells the members how to
acknowledge it (accept, reject, release-once, release-always), so which record ends acknowledged,
archived after rejection or archived at the delivery count limit (3 here) is known when it is produced.

m1, m2, m3 join one at a time (topics `tasks` (3) and `scratch` (2)); m3 joins once m1 and m2 have
done every record, and m2 leaves cleanly as soon as the three have settled (a share member's only signs
of life in `__consumer_offsets` are its epoch records, so the history can tell a clean leave from a
session timeout only within one session of the member's last record); `scratch` is
deleted under the group; m3 is killed while idle (no record acquired) and fenced when its 6 s share
session expires. m1 runs on; `tasks` grows from 3 to 4 partitions under it. A second group,
`share-lab-deleted`, reads `tasks` with one member that stops, and the group is deleted with
kafka-share-groups --delete. Groups start from the earliest offset (`share.auto.offset.reset=earliest`,
a group config set before the group exists; Kafka's default is latest). The driver waits on what each
member's admin client reads from DescribeShareGroups and on kafka-share-groups --describe (start
offsets), never on a guessed time.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from confluent_kafka import Producer

from lab.broker import TOOL_JVM_OPTIONS, Broker, classpath
from lab.driver import Lab, ScenarioError, ScenarioLog
from lab.jvm_member import JvmMember, events_file

VERSIONS = ("4", "4.3", "4.4")
DELIVERY_COUNT_LIMIT = 3
SESSION_TIMEOUT_MS = 6000
SHARE_SETTINGS = {
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": SESSION_TIMEOUT_MS,
    "group.share.min.heartbeat.interval.ms": 500,
    "group.share.heartbeat.interval.ms": 1000,
    "group.share.delivery.count.limit": DELIVERY_COUNT_LIMIT,
    # A snapshot every few updates (Kafka's default is 500), so the capture holds ShareSnapshot
    # records written from a partition's running state, not only the ones written at initialisation.
    "share.coordinator.snapshot.update.records.per.snapshot": 4,
}
BROKER_SETTINGS = {line: SHARE_SETTINGS for line in VERSIONS}
GROUP, DELETED_GROUP = "share-lab", "share-lab-deleted"
TOPICS = {"tasks": 3, "scratch": 2}
PLANS = ("accept", "release-once", "reject", "release-always")
GROUP_CONFIG = f"share.auto.offset.reset=earliest,share.session.timeout.ms={SESSION_TIMEOUT_MS}"
SOURCE = Path(__file__).resolve().parent.parent / "share" / "LabShareConsumer.java"
SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def build_client(version: str, workdir: Path) -> Path:
    """javac LabShareConsumer.java against the broker line's jars; returns the classes directory."""
    classes = workdir / "share-classes"
    shutil.rmtree(classes, ignore_errors=True)
    command = ["javac", "-nowarn", "--release", "17", "-d", str(classes), "-cp", classpath(version), str(SOURCE)]
    subprocess.run(command, check=True)
    return classes


def share_groups(broker: Broker, *args: str) -> str:
    return broker.run_tool(SHARE_GROUP_COMMAND, "--bootstrap-server", broker.bootstrap_servers, *args)


def describe(broker: Broker) -> dict[str, str]:
    """Kafka's own view of the share groups at the end (capture files beside kafka-consumer-groups')."""
    everything = ("--describe", "--all-groups")
    return {
        "describe-share.txt": share_groups(broker, *everything, "--offsets"),
        "describe-share-members.txt": share_groups(broker, *everything, "--members", "--verbose"),
        "describe-share-state.txt": share_groups(broker, *everything, "--state", "--verbose"),
    }


class Member(JvmMember):
    """One LabShareConsumer process. stop() = SIGTERM: the consumer commits pending acknowledgements and
    leaves the group."""

    def __init__(self, lab: Lab, group: str, name: str, topics: Iterable[str], classes: Path):
        command = ["java", *TOOL_JVM_OPTIONS, "-cp", f"{classes}:{classpath(lab.broker.version)}"]
        command += ["groupscope.lab.LabShareConsumer", lab.broker.bootstrap_servers, group, name, ",".join(topics)]
        command += [str(events_file(lab, name))]
        super().__init__(lab, group, name, "share_member", command, topics=sorted(topics))

    def view(self) -> dict:
        """Its latest entry in DescribeShareGroups (empty before the first one)."""
        return self.last("share_assignment")


def produce_plans(lab: Lab, topic: str, count: int) -> None:
    """`count` records round-robin over the topic's partitions, the plans in turn (3 partitions, 4 plans:
    every partition gets every plan); records where each landed, from the delivery reports."""
    landed: list[dict] = []
    producer = Producer({"bootstrap.servers": lab.broker.bootstrap_servers, "linger.ms": 5, "log_level": 0})

    def delivered(error, message) -> None:
        if error is None:
            where = {"topic": message.topic(), "partition": message.partition(), "offset": message.offset()}
            landed.append(where | {"plan": message.value().decode()})

    for index in range(count):
        plan = PLANS[index % len(PLANS)].encode()
        partition = index % lab.partitions[topic]
        producer.produce(topic, key=f"k{index}".encode(), value=plan, partition=partition, on_delivery=delivered)
    producer.flush(30)
    if len(landed) != count:
        raise ScenarioError(f"{count - len(landed)} of {count} records to {topic} not delivered")
    lab.record.event("share_records_produced", topic=topic, records=sorted(landed, key=lambda r: tuple(r.values())))


def wait_for_members(
    lab: Lab, members: list[Member], topics: Iterable[str], after_epoch: int = -1
) -> dict[str, list[str]]:
    """Until every live member's own description says: these members, its member epoch at the group's
    epoch and target assignment epoch (reconciled), the same epoch for all of them (a view read just
    before a bump is no answer for the next epoch: a 4.4.0 run took m1's view at epoch 7 and m3's at 6 as
    settled, and killed m3 before it had reconciled epoch 7), later than `after_epoch`, and together they
    hold every partition of `topics`."""
    names = sorted(member.name for member in members)
    wanted = sorted(f"{topic}-{part}" for topic in topics for part in range(lab.partitions[topic]))

    def settled() -> bool:
        views = [member.view() for member in members]
        if any(not view or view["group_members"] != names for view in views):
            return False
        if any(not view["member_epoch"] == view["group_epoch"] == view["assignment_epoch"] for view in views):
            return False
        if len({view["group_epoch"] for view in views}) != 1 or views[0]["group_epoch"] <= after_epoch:
            return False
        return sorted({part for view in views for part in view["assignment"]}) == wanted

    lab.wait_for(f"share group {members[0].group} held by {names}", settled, deadline_s=90)
    assignment = {member.name: member.view()["assignment"] for member in members}
    lab.record.event("share_group_stable", group=members[0].group, members=names, assignment=assignment)
    return assignment


def described(lab: Lab, group: str, *options: str) -> list[dict[str, str]]:
    """kafka-share-groups --describe <options> --group G: the group's rows as {column: value}."""
    text = share_groups(lab.broker, "--describe", *options, "--group", group)
    lines = [line.split() for line in text.splitlines()]
    header = next((line for line in lines if line[:1] == ["GROUP"]), [])
    return [dict(zip(header, line, strict=True)) for line in lines if header and line[:1] == [group]]


def share_lag(lab: Lab, group: str) -> dict[str, str]:
    """{"topic-partition": LAG} from kafka-share-groups --describe --offsets (the broker's view; KIP-1226:
    end offset - start offset - records past the start offset already acknowledged or archived)."""
    return {f"{row['TOPIC']}-{row['PARTITION']}": row["LAG"] for row in described(lab, group, "--offsets")}


def wait_empty(lab: Lab, group: str) -> None:
    """Until the group is Empty in the broker's view (--state --verbose); records its group and target
    assignment epochs then. Whether an emptied group gets a target-assignment epoch of its own is the
    line's: 4.4.0 writes one (type 12), 4.3.1 keeps the last members' epoch."""
    state: dict[str, str] = {}

    def empty() -> bool:
        rows = described(lab, group, "--state", "--verbose")
        state.update(rows[0] if rows else {})
        return state.get("STATE", "").upper() == "EMPTY"

    lab.wait_for(f"{group} empty", empty)
    epochs = {"group_epoch": int(state["GROUP-EPOCH"]), "assignment_epoch": int(state["ASSIGNMENT-EPOCH"])}
    lab.record.event("share_group_empty", group=group, **epochs)


def wait_done(lab: Lab, group: str, topics: Iterable[str]) -> None:
    """Until the group's lag is 0 on every non-empty partition of `topics`: every record acknowledged or
    archived, in the broker's view (the start offset itself may stay behind acknowledged records)."""
    ends = {part: end for part, end in lab.end_offsets(topics).items() if end > 0}

    def done() -> bool:
        lag = share_lag(lab, group)
        return all(lag.get(part) == "0" for part in ends)

    lab.wait_for(f"share group {group} to finish {ends}", done, deadline_s=120)
    lab.record.event("share_group_done", group=group, end_offsets=ends)


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    for topic, partitions in TOPICS.items():
        lab.create_topic(topic, partitions)
    lab.set_group_config(GROUP, GROUP_CONFIG)
    lab.set_group_config(DELETED_GROUP, GROUP_CONFIG)
    classes = build_client(broker.version, record.workdir)
    record.event("share_settings", delivery_count_limit=DELIVERY_COUNT_LIMIT, plans=list(PLANS))
    produce_plans(lab, "tasks", 12)
    produce_plans(lab, "scratch", 4)

    members: list[Member] = []
    for name in ("m1", "m2"):
        members.append(Member(lab, GROUP, name, TOPICS, classes))
        wait_for_members(lab, members, TOPICS)
    wait_done(lab, GROUP, TOPICS)
    # Not after this join: the wait for every record's end took longer than the session on a loaded
    # 4.4.0 run, and m2's clean leave read as a timeout.
    members.append(Member(lab, GROUP, "m3", TOPICS, classes))
    wait_for_members(lab, members, TOPICS)

    m1, m2, m3 = members
    m2.stop()
    wait_for_members(lab, [m1, m3], TOPICS)
    produce_plans(lab, "tasks", 9)
    wait_done(lab, GROUP, TOPICS)

    before_deletion = m1.view()["group_epoch"]
    lab.delete_topic("scratch")
    # The members' views drop a deleted topic's partitions at once (no name for its id any more); the
    # group drops them at its next epoch (4.3.1 and 4.4.0 runs recorded the epoch before as settled).
    wait_for_members(lab, [m1, m3], ["tasks"], after_epoch=before_deletion)

    m3.kill()  # idle: every record is done, so it dies holding no acquired record
    wait_for_members(lab, [m1], ["tasks"])
    produce_plans(lab, "tasks", 6)
    wait_done(lab, GROUP, ["tasks"])

    lab.add_partitions("tasks", TOPICS["tasks"] + 1)  # m1 is assigned the new partition once initialised
    wait_for_members(lab, [m1], ["tasks"])
    produce_plans(lab, "tasks", 8)
    wait_done(lab, GROUP, ["tasks"])

    doomed = Member(lab, DELETED_GROUP, "d1", ["tasks"], classes)
    wait_for_members(lab, [doomed], ["tasks"])
    wait_done(lab, DELETED_GROUP, ["tasks"])
    doomed.stop()
    wait_empty(lab, DELETED_GROUP)
    share_groups(broker, "--delete", "--group", DELETED_GROUP)
    lab.wait_for(f"{DELETED_GROUP} gone", lambda: DELETED_GROUP not in share_groups(broker, "--list").split())
    record.event("group_deleted", group=DELETED_GROUP, tool="kafka-share-groups --delete")
