"""A Kafka Streams application redeployed with a changed topology, on the streams protocol (KIP-1071).

What the broker does with a changed topology (GroupMetadataManager.maybeUpdateTopology, the same in
4.2.1, 4.3.1 and 4.4.0): a streams group keeps the topology its first member sent (type 23,
StreamsGroupTopology: each subtopology's source, repartition and changelog topics, and a topology epoch)
until the group is deleted. Kafka Streams always sends topology epoch 0 (StreamsRebalanceData), and a
member whose topology differs from the group's at that epoch is refused with INVALID_REQUEST "Topology
updates are not supported yet." Kafka's own guide says it: a changed topology needs a new streams group.
The processing inside a subtopology is not part of what the broker is sent.

So the application `streams-lab-topology` (lab/streams/LabStreamsApp.java) goes through all three:
- t1 and t2 run `stateless` (`events` -> upper case -> `events-upper`: one subtopology);
- t1 is replaced by t1-lower, which writes lower case instead: changed processing, the same topology to
  the broker, so it joins as any instance would;
- t3 starts with `counting` (`events` -> groupBy -> count -> `event-counts`: two subtopologies) beside
  them: refused, its uncaught-exception callback reports the broker's error and the client shuts down;
- the redeploy Kafka prescribes: the instances stop, the group is deleted with kafka-streams-groups
  --delete, and r1 and r2 start with `counting`: the same group id, a new group whose topology has two
  subtopologies, at topology epoch 0 again.
`kafka-streams-groups --describe --members --verbose` is recorded after each step (event
streams_group_described, with the step's name); every instance logs its own topology, tasks, states and
errors to member-<name>.jsonl, and the driver waits on those views, never on a guessed time.
"""

from __future__ import annotations

from pathlib import Path

from lab.broker import Broker
from lab.driver import Lab, ScenarioLog
from lab.scenarios.streams import (
    STREAMS_SETTINGS,
    Instance,
    build_app,
    delete_group,
    set_group_config,
    streams_groups,
    wait_for_placement,
)

VERSIONS = ("4", "4.3", "4.4")
BROKER_SETTINGS = {line: STREAMS_SETTINGS for line in VERSIONS}
GROUP, INPUT, PARTITIONS = "streams-lab-topology", "events", 3
UPPER = f"stateless:{INPUT}:events-upper"
LOWER = f"stateless-lower:{INPUT}:events-lower"  # processing changed, the broker's topology not
COUNTING = f"counting:{INPUT}:event-counts"  # a second subtopology behind a repartition topic
STATELESS_TASKS = frozenset(f"0_{p}" for p in range(PARTITIONS))
COUNTING_TASKS = frozenset(f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS))
STATEFUL_TASKS = frozenset(f"1_{p}" for p in range(PARTITIONS))
REFUSED = "Topology updates are not supported yet."


def describe_group(lab: Lab, step: str) -> None:
    output = streams_groups(lab, "--describe", "--members", "--verbose", "--group", GROUP)
    lab.record.event("streams_group_described", group=GROUP, step=step, output=output)


def start(lab: Lab, name: str, classes: Path, topology: str) -> Instance:
    instance = Instance(lab, GROUP, name, classes, topology)
    lab.record.event("streams_topology_deployed", group=GROUP, member=name, topology=topology)
    return instance


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    lab.create_topic(INPUT, PARTITIONS)
    for output in ("events-upper", "events-lower", "event-counts"):
        lab.create_topic(output, PARTITIONS)
    lab.produce(INPUT, 30)
    set_group_config(lab, GROUP)
    classes = build_app(broker.version, record.workdir)

    t1 = start(lab, "t1", classes, UPPER)
    wait_for_placement(lab, [t1], STATELESS_TASKS, frozenset())
    t2 = start(lab, "t2", classes, UPPER)
    wait_for_placement(lab, [t1, t2], STATELESS_TASKS, frozenset())
    lab.wait_caught_up(GROUP, (INPUT,))
    describe_group(lab, "stateless")

    t1.stop()
    wait_for_placement(lab, [t2], STATELESS_TASKS, frozenset())
    t1_lower = start(lab, "t1-lower", classes, LOWER)
    wait_for_placement(lab, [t2, t1_lower], STATELESS_TASKS, frozenset())
    lab.produce(INPUT, 30)
    lab.wait_caught_up(GROUP, (INPUT,))
    describe_group(lab, "processing_changed")

    t3 = start(lab, "t3", classes, COUNTING)

    def refused() -> bool:
        errors = [event for event in t3.events() if event["event"] == "streams_uncaught_error"]
        return any(REFUSED in cause["message"] for error in errors for cause in error["causes"])

    lab.wait_for("t3 refused with a changed topology", refused)
    # Shut down by its callback's answer, the client is in ERROR; the process waits for its close.
    lab.wait_for("t3 in ERROR", lambda: t3.last("streams_state").get("to") == "ERROR")
    t3.stop()
    # Refused before it was a member: the group is as it was (no placement to wait for, no epoch written).
    describe_group(lab, "topology_refused")

    t2.stop()
    wait_for_placement(lab, [t1_lower], STATELESS_TASKS, frozenset())
    t1_lower.stop()
    delete_group(lab, GROUP)

    r1 = start(lab, "r1", classes, COUNTING)
    wait_for_placement(lab, [r1], COUNTING_TASKS, STATEFUL_TASKS)
    r2 = start(lab, "r2", classes, COUNTING)
    wait_for_placement(lab, [r1, r2], COUNTING_TASKS, STATEFUL_TASKS)
    lab.produce(INPUT, 30)
    lab.wait_caught_up(GROUP, (INPUT,))
    describe_group(lab, "redeployed")
