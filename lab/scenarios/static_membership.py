"""Static membership (KIP-345, `group.instance.id`), range assignor, topic `shipments` (4 partitions).

static-1 and static-2 join (generations 1, 2). static-1 is killed and restarted with the same instance id
well within its 10 s session timeout: the coordinator swaps in the new member id and hands it the old
assignment. That is a group record with the same generation (2) and a new member id, not a rebalance.
Then static-2 is killed and stays away past its session timeout: the coordinator removes it and
rebalances (3); when it comes back, another rebalance (4). A static member that closes sends no
LeaveGroup, so only the session timeout ever removes one.
"""

from __future__ import annotations

from lab.broker import Broker
from lab.driver import Lab, ScenarioLog

VERSIONS = ("4", "3.9", "4.3", "4.4")
GROUP = "static"
TOPICS = ("shipments",)
SESSION_TIMEOUT_MS = 10_000


def start(lab: Lab, name: str, instance: str) -> None:
    lab.start_member(name, GROUP, TOPICS, assignor="range", instance_id=instance, session_timeout_ms=SESSION_TIMEOUT_MS)


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    lab.create_topic("shipments", 4)
    lab.produce("shipments", 40)
    start(lab, "s1", "static-1")
    lab.wait_for_group(GROUP, 1, TOPICS)
    record.expect(GROUP, "static-1 joined", generation=1, members=1)
    start(lab, "s2", "static-2")
    lab.wait_for_group(GROUP, 2, TOPICS)
    record.expect(GROUP, "static-2 joined", generation=2, members=2)
    lab.wait_caught_up(GROUP, TOPICS)

    old_member_id = lab.member_ids(GROUP)["static-1"]
    lab.kill_member("s1")
    start(lab, "s1-restarted", "static-1")
    lab.wait_for(
        "static-1 to come back under a new member id",
        lambda: lab.member_ids(GROUP).get("static-1") not in (None, old_member_id),
    )
    lab.wait_for_group(GROUP, 2, TOPICS)
    record.event("static_member_replaced", group=GROUP, instance="static-1", old_member_id=old_member_id)
    record.expect(
        GROUP,
        "static-1 restarted within its session timeout: same generation, new member id, no rebalance",
        generation=2,
        members=2,
        replaced_instance="static-1",
    )
    lab.produce("shipments", 20)
    lab.wait_caught_up(GROUP, TOPICS)

    lab.kill_member("s2")
    lab.wait_for_group(GROUP, 1, TOPICS)
    record.expect(GROUP, "static-2 away past its session timeout: removed, rebalance", generation=3, members=1)
    start(lab, "s2-back", "static-2")
    lab.wait_for_group(GROUP, 2, TOPICS)
    record.expect(GROUP, "static-2 back: rebalance", generation=4, members=2)
    lab.produce("shipments", 8)
    lab.wait_caught_up(GROUP, TOPICS)
