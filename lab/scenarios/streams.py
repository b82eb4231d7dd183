"""A real Kafka Streams application on the streams rebalance protocol (KIP-1071, `group.protocol=streams`).

The application (lab/streams/LabStreamsApp.java, compiled here with javac against the kafka-streams
jars of the broker's line that scripts/bootstrap.sh fetched: 4.2.1 in jvm/kafka-streams/jars, 4.3.1 and
4.4.0 in jvm/kafka-streams-4.3/jars and jvm/kafka-streams-4.4/jars) counts words: `words` (3
partitions) -> groupBy -> count -> `word-counts`. The groupBy makes a repartition topic, so the topology
has two subtopologies (six tasks), and the count a changelogged store, so subtopology 1's tasks are
stateful and can have standby replicas. The broker assigns them and writes types 17, 19, 20, 21, 22, 23.

Standby replicas are a group config on the streams protocol (the client's num.standby.replicas is not
used): `streams.num.standby.replicas=1`, set with kafka-configs on the group before it exists, with a
6 s `streams.session.timeout.ms` (the broker-wide group.streams.session.timeout.ms did not apply).

s1, s2, s3 join one at a time; s2 leaves cleanly (KafkaStreams.close with LEAVE_GROUP); s3 is killed
and fenced when its 6 s session expires. s1 runs on. A second application, `streams-lab-grow`, is
stateless (`letters` -> upper case -> `letters-upper`: one subtopology, no repartition topic, so its tasks
follow its source topic): g1 and g2 join, then `letters` grows from 2 to 3 partitions and the coordinator
assigns the new task. A third, `streams-lab-deleted`, runs one instance, stops cleanly and its group is
deleted with kafka-streams-groups --delete. Each instance logs its own view (state transitions, active and
standby tasks) to member-<name>.jsonl; the driver waits on those views, never on a guessed time.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from lab.broker import REPO_ROOT, TOOL_JVM_OPTIONS, Broker
from lab.driver import Lab, ScenarioError, ScenarioLog
from lab.jvm_member import JvmMember, events_file

VERSIONS = ("4", "4.3", "4.4")
# Streams-group sessions as short as the KIP-848 ones (the minimums let the group config ask for 6 s),
# and no initial delay before the first assignment.
STREAMS_SETTINGS = {
    "group.streams.min.session.timeout.ms": 1000,
    "group.streams.session.timeout.ms": 6000,
    "group.streams.min.heartbeat.interval.ms": 500,
    "group.streams.heartbeat.interval.ms": 1000,
    "group.streams.initial.rebalance.delay.ms": 0,
}
BROKER_SETTINGS = {line: STREAMS_SETTINGS for line in VERSIONS}
GROUP = "streams-lab"
DELETED_GROUP = "streams-lab-deleted"
INPUT, OUTPUT, INPUT_PARTITIONS = "words", "word-counts", 3
# Subtopology 0 reads `words` and writes the repartition topic; subtopology 1 reads it and counts.
ACTIVE_TASKS = frozenset(f"{subtopology}_{partition}" for subtopology in (0, 1) for partition in range(3))
STATEFUL_TASKS = frozenset(f"1_{partition}" for partition in range(3))
STANDBY_REPLICAS = 1
GROW_GROUP, GROW_INPUT, GROW_OUTPUT, GROW_PARTITIONS = "streams-lab-grow", "letters", "letters-upper", 2
STATELESS_TOPOLOGY = f"stateless:{GROW_INPUT}:{GROW_OUTPUT}"
SESSION_CONFIG = "streams.session.timeout.ms=6000,streams.heartbeat.interval.ms=1000"
SOURCE = Path(__file__).resolve().parent.parent / "streams" / "LabStreamsApp.java"
# The app is of the broker's own line, like the share and Connect clients: what a line's Streams client
# sends (its topology, its heartbeat fields) is part of what that line's broker writes.
STREAMS_JARS = {
    "4": REPO_ROOT / "jvm" / "kafka-streams" / "jars",
    "4.3": REPO_ROOT / "jvm" / "kafka-streams-4.3" / "jars",
    "4.4": REPO_ROOT / "jvm" / "kafka-streams-4.4" / "jars",
}
STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"


def build_app(line: str, workdir: Path) -> Path:
    """javac LabStreamsApp.java against Kafka Streams of the broker's `line`; returns the classes directory."""
    jars = STREAMS_JARS[line]
    if not any(jars.glob("kafka-streams-*.jar")):
        raise ScenarioError(f"Kafka Streams jars are missing in {jars}: run scripts/bootstrap.sh lab")
    classes = workdir / "streams-classes"
    shutil.rmtree(classes, ignore_errors=True)
    command = ["javac", "-nowarn", "--release", "17", "-d", str(classes), "-cp", f"{jars}/*", str(SOURCE)]
    subprocess.run(command, check=True)
    return classes


class Instance(JvmMember):
    """One LabStreamsApp process; its own view of itself is read back from its events file. stop() =
    SIGTERM: the shutdown hook closes KafkaStreams with LEAVE_GROUP before the JVM exits."""

    def __init__(self, lab: Lab, group: str, name: str, classes: Path, topology: str | None = None):
        jars = STREAMS_JARS[lab.broker.version]
        command = ["java", *TOOL_JVM_OPTIONS, "-cp", f"{classes}:{jars}/*", "groupscope.lab.LabStreamsApp"]
        state = lab.record.workdir / f"state-{name}"
        command += [lab.broker.bootstrap_servers, group, name, str(state), str(events_file(lab, name))]
        command += [topology] if topology else []
        super().__init__(lab, group, name, "streams_instance", command)

    def view(self) -> dict:
        """The instance's latest report: {"state", "active", "standby"} (empty before the first one)."""
        return self.last("streams_tasks")


def wait_for_placement(
    lab: Lab,
    instances: list[Instance],
    active_tasks: frozenset[str] = ACTIVE_TASKS,
    stateful_tasks: frozenset[str] = STATEFUL_TASKS,
) -> dict[str, dict[str, list[str]]]:
    """Waits until every live instance says it is RUNNING and, together, they run each task once as an
    active task, as evenly as the tasks divide (a newcomer reports RUNNING with nothing while the task it
    is to take is still being revoked elsewhere), and each stateful task on `STANDBY_REPLICAS` other
    instances (when there are that many); records and returns {member: {"active": [...], "standby": [...]}}."""
    wanted_standbys = min(STANDBY_REPLICAS, len(instances) - 1)

    def placed() -> bool:
        views = [instance.view() for instance in instances]
        if any(view.get("state") != "RUNNING" for view in views):
            return False
        active = [task for view in views for task in view["active"]]
        if sorted(active) != sorted(active_tasks):
            return False
        held = [len(view["active"]) for view in views]
        if max(held) - min(held) > 1:
            return False
        for task in stateful_tasks:
            holders = [view for view in views if task in view["standby"]]
            if len(holders) != wanted_standbys or any(task in view["active"] for view in holders):
                return False
        return all(set(view["standby"]) <= stateful_tasks for view in views)

    names = [instance.name for instance in instances]
    lab.wait_for(f"{names} running every task with {wanted_standbys} standby(s)", placed, deadline_s=90)
    placement = {instance.name: {key: instance.view()[key] for key in ("active", "standby")} for instance in instances}
    lab.record.event("streams_placement", group=instances[0].group, placement=placement)
    return placement


def set_group_config(lab: Lab, group: str) -> None:
    """The streams protocol takes standby replicas from the group's config (KIP-1071), set here before
    the group exists, through the GROUP config resource (IncrementalAlterConfigs). The session timeout
    too: a first 4.2.1 capture fenced the killed instance after Kafka's default 45 s although the
    broker's group.streams.session.timeout.ms was 6000."""
    lab.set_group_config(group, f"streams.num.standby.replicas={STANDBY_REPLICAS},{SESSION_CONFIG}")


def streams_groups(lab: Lab, *args: str) -> str:
    return lab.broker.run_tool(STREAMS_GROUP_COMMAND, "--bootstrap-server", lab.broker.bootstrap_servers, *args)


def delete_group(lab: Lab, group: str) -> None:
    """kafka-streams-groups --delete, once the group has no member left (the tool deletes only an empty group)."""

    def empty() -> bool:
        return "EMPTY" in streams_groups(lab, "--describe", "--state", "--group", group).upper()

    lab.wait_for(f"{group} empty", empty)
    streams_groups(lab, "--delete", "--group", group)
    # Not an expectation: lab.dump checks deletions on type 2/3 history only; the tests read the tombstones.
    lab.record.event("group_deleted", group=group, tool="kafka-streams-groups --delete")


def grow_source(lab: Lab, classes: Path) -> None:
    """The stateless app's source topic grows under its two instances: a new task, no move."""
    lab.create_topic(GROW_INPUT, GROW_PARTITIONS)
    lab.create_topic(GROW_OUTPUT, GROW_PARTITIONS + 1)
    lab.produce(GROW_INPUT, 20)
    set_group_config(lab, GROW_GROUP)
    instances: list[Instance] = []
    for name in ("g1", "g2"):
        instances.append(Instance(lab, GROW_GROUP, name, classes, STATELESS_TOPOLOGY))
        wait_for_placement(lab, instances, frozenset(f"0_{p}" for p in range(GROW_PARTITIONS)), frozenset())
    lab.add_partitions(GROW_INPUT, GROW_PARTITIONS + 1)
    lab.record.event("source_topic_grown", group=GROW_GROUP, topic=GROW_INPUT, partitions=GROW_PARTITIONS + 1)
    wait_for_placement(lab, instances, frozenset(f"0_{p}" for p in range(GROW_PARTITIONS + 1)), frozenset())
    lab.produce(GROW_INPUT, 30)
    lab.wait_caught_up(GROW_GROUP, (GROW_INPUT,))


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    lab.create_topic(INPUT, INPUT_PARTITIONS)
    lab.create_topic(OUTPUT, INPUT_PARTITIONS)
    lab.produce(INPUT, 60)
    set_group_config(lab, GROUP)
    classes = build_app(broker.version, record.workdir)

    instances: list[Instance] = []
    for name in ("s1", "s2", "s3"):
        instances.append(Instance(lab, GROUP, name, classes))
        wait_for_placement(lab, instances)
    lab.wait_caught_up(GROUP, (INPUT,))

    s1, s2, s3 = instances
    s2.stop()
    wait_for_placement(lab, [s1, s3])
    lab.produce(INPUT, 30)
    lab.wait_caught_up(GROUP, (INPUT,))

    s3.kill()
    wait_for_placement(lab, [s1])
    lab.produce(INPUT, 12)
    lab.wait_caught_up(GROUP, (INPUT,))

    grow_source(lab, classes)

    set_group_config(lab, DELETED_GROUP)
    doomed = Instance(lab, DELETED_GROUP, "d1", classes)
    wait_for_placement(lab, [doomed])
    lab.wait_caught_up(DELETED_GROUP, (INPUT,))
    doomed.stop()
    delete_group(lab, DELETED_GROUP)

    members = streams_groups(lab, "--describe", "--members", "--verbose", "--all-groups")
    record.event("streams_groups_described", tool="kafka-streams-groups --describe --members --verbose", output=members)
