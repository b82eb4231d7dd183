"""KIP-848 static members (`group.instance.id` on `group.protocol=consumer`) under the broker's default
assignor (uniform). Group `kip848-static`, topic `statics` (7 partitions: an odd count leaves remainders,
and which member gets one more is the assignor's tie-break, made on member ids).

s1, s2, s3 (instances static-1..3) join one at a time. s2 closes (a static member's leave heartbeat has
epoch -2: it stays a member, its partitions kept for it) and restarts at once under the same instance id:
the coordinator hands the new member id the old one's assignment. The dynamic n1 joins (4 members, a new
target). s1 is killed and fenced at its 6 s session (3 members), then restarts under a new member id and
joins as a newcomer would (4 members again).

What this settles: the what-if replay of `uniform` must hand out each epoch's target assignment (type 7)
exactly, which it does only if the assignor sees each member under its member id, as the coordinator does.

4.2.1 and 4.4.0: the members are confluent-kafka (librdkafka sends the instance id on
ConsumerGroupHeartbeat and leaves a static member with epoch -2).
"""

from __future__ import annotations

from lab.broker import Broker
from lab.driver import Lab, ScenarioLog

VERSIONS = ("4", "4.4")
GROUP = "kip848-static"
TOPIC = "statics"
TOPICS = (TOPIC,)
PARTITIONS = 7


def _start(lab: Lab, name: str, instance: str | None = None) -> None:
    options = {"instance_id": instance} if instance else {}
    lab.start_member(name, GROUP, TOPICS, protocol="consumer", **options)


def _wait_for_new_member_id(lab: Lab, instance: str, old_member_id: str | None) -> str:
    lab.wait_for(
        f"{instance} to join under a new member id",
        lambda: lab.member_ids(GROUP).get(instance) not in (None, old_member_id),
    )
    return lab.member_ids(GROUP)[instance]


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    lab.create_topic(TOPIC, PARTITIONS)
    lab.produce(TOPIC, 28)
    first = None
    for count, name in enumerate(("s1", "s2", "s3"), start=1):
        _start(lab, name, f"static-{count}")
        lab.wait_for_group(GROUP, count, TOPICS)
        first = first or lab.group_epoch(GROUP)  # 1 on 4.2.1, 2 on 4.4.0
        record.expect(GROUP, f"static-{count} joined", epoch=first + count - 1)
    lab.wait_caught_up(GROUP, TOPICS)

    old_member_id = lab.member_ids(GROUP)["static-2"]
    lab.stop_member("s2")
    _start(lab, "s2-restarted", "static-2")
    # No group_stable event: the coordinator swaps the member ids under the same epoch, no rebalance.
    new_member_id = _wait_for_new_member_id(lab, "static-2", old_member_id)
    record.event(
        "static_member_replaced", group=GROUP, instance="static-2", old_member_id=old_member_id, member_id=new_member_id
    )

    _start(lab, "n1")
    lab.wait_for_group(GROUP, 4, TOPICS)
    epoch = lab.group_epoch(GROUP)
    record.expect(GROUP, "n1 (dynamic) joined beside the replaced static-2", epoch=epoch)
    lab.produce(TOPIC, 14)
    lab.wait_caught_up(GROUP, TOPICS)

    old_member_id = lab.member_ids(GROUP)["static-1"]
    lab.kill_member("s1")
    lab.wait_for_group(GROUP, 3, TOPICS)
    record.expect(GROUP, "static-1 killed, fenced at its session timeout", epoch=epoch + 1)
    _start(lab, "s1-back", "static-1")
    _wait_for_new_member_id(lab, "static-1", old_member_id)
    lab.wait_for_group(GROUP, 4, TOPICS)
    record.expect(GROUP, "static-1 back under a new member id", epoch=epoch + 2)
    lab.produce(TOPIC, 14)
    lab.wait_caught_up(GROUP, TOPICS)
