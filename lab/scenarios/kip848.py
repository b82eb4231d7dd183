"""A KIP-848 group (`group.protocol=consumer`): the broker assigns (server-side `uniform` assignor) and
writes epoch records (types 3, 5, 6, 7, 8) instead of classic group records. Topic `payments`.

k1, k2, k3 join (group epochs 1, 2, 3; 2, 3, 4 on 4.3.1, whose first epoch is 2, and so on); k2 leaves
cleanly (epoch 4: tombstones of its types 8, 7, 5);
`payments` grows from 4 to 6 partitions while the group runs (new topic metadata: epoch 5 and a new
target assignment); k3 is killed and fenced when its 6 s session (broker-side
group.consumer.session.timeout.ms) expires (epoch 6). A second group, `kip848-regex`, subscribes with a
regular expression (`^pay.*`), which the broker resolves (type 16 on 4.x).

On Kafka 3.9 the protocol is a preview; the broker needs group.coordinator.rebalance.protocols=
classic,consumer, which also switches every group to the new (Java) group coordinator. librdkafka 2.16
speaks only ConsumerGroupHeartbeat v1 (Kafka 4.0+), so on 3.9 the members are Kafka 3.9's own Java
client (kafka-console-consumer, auto-commit), and the regex is resolved client-side (no type 16).
"""

from __future__ import annotations

from lab.broker import Broker
from lab.driver import Lab, ScenarioLog

VERSIONS = ("4", "3.9", "4.3", "4.4")
BROKER_SETTINGS = {"3.9": {"group.coordinator.rebalance.protocols": "classic,consumer"}}
GROUP = "kip848"
TOPICS = ("payments",)


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    client = "java" if broker.version == "3.9" else "confluent"
    lab.create_topic("payments", 4)
    lab.produce("payments", 40)
    first = None
    for count, name in enumerate(("k1", "k2", "k3"), start=1):
        lab.start_member(name, GROUP, TOPICS, client=client, protocol="consumer")
        lab.wait_for_group(GROUP, count, TOPICS)
        # Each step below bumps the epoch by one; where it starts is the line's (4.3.1: 2, 4.2.1: 1). 3.9.2's
        # tool prints no epoch, and its new coordinator starts at 1.
        first = first or lab.group_epoch(GROUP) or 1
        record.expect(GROUP, f"{name} joined", epoch=first + count - 1)
    lab.wait_caught_up(GROUP, TOPICS)

    lab.stop_member("k2")
    lab.wait_for_group(GROUP, 2, TOPICS)
    record.expect(GROUP, "k2 left (heartbeat with epoch -1)", epoch=first + 3)

    lab.add_partitions("payments", 6)
    lab.wait_for_group(GROUP, 2, TOPICS)
    record.expect(GROUP, "payments grew to 6 partitions: new metadata, new target assignment", epoch=first + 4)
    lab.produce("payments", 30)
    lab.wait_caught_up(GROUP, TOPICS)

    lab.kill_member("k3")
    lab.wait_for_group(GROUP, 1, TOPICS)
    record.expect(GROUP, "k3 killed, fenced at session timeout", epoch=first + 5)
    lab.produce("payments", 12)
    lab.wait_caught_up(GROUP, TOPICS)

    lab.start_member("r1", "kip848-regex", ["^pay.*"], client=client, protocol="consumer")
    lab.wait_for_group("kip848-regex", 1, TOPICS)
    lab.wait_caught_up("kip848-regex", TOPICS)
