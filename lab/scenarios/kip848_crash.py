"""A KIP-848 member crashes while the others keep reconciling. Group `kip848-crash`, topic `crashes` (3).

k1, k2, k3 join one at a time (one partition each at the end). k2 is killed (SIGKILL: no leave heartbeat)
and, JOIN_AFTER_KILL_S into its 6 s session, k4 joins: a new group epoch and target assignment, written on
k4's heartbeat, which k1 and k3 then reconcile (their current assignments, type 8, at the new epoch) and
the dead k2 never does. The assignment is already balanced (1, 1, 1, 0), so k4 is targeted nothing and no
partition moves; the group stays Reconciling until k2 is fenced at its session timeout, 6 s after its
last heartbeat and only some 3 s after the group's last epoch records, which the others' heartbeats
made. k2's partition then goes to k4. Last, k3 leaves cleanly.

What this settles: whether the history reads k2's departure as a timeout from its own records (its
member metadata and current assignments, type 5 and 8, and its commits), or as a clean leave from the
group's latest epoch records, which any member's heartbeat writes.

4.2.1 and 4.4.0: the members are confluent-kafka (librdkafka's `consumer` protocol), as in kip848.
"""

from __future__ import annotations

import time

from lab.broker import Broker
from lab.driver import Lab, ScenarioLog

VERSIONS = ("4", "4.4")
GROUP = "kip848-crash"
TOPIC = "crashes"
TOPICS = (TOPIC,)
PARTITIONS = 3
# The construction, not a wait for a state: k4's join lands mid-session, its epoch records ~3 s before
# k2's fencing, inside session - heartbeat (5 s), the silence a clean leave would have.
JOIN_AFTER_KILL_S = 2.0


def _wait_for_join_beside_the_dead(lab: Lab, names: set[str]) -> None:
    """Lab.wait_for_group for the epoch k4 joined in: the group is Reconciling, not Stable, while a dead
    member is in it (it never reaches the epoch; confluent-kafka 2.16 names that state UNKNOWN), so this
    waits for exactly these members owning every partition. The dead member can be seen only before its
    fencing, which proves the epoch was written while it was dead but still a member."""
    wanted = [f"{TOPIC}-{partition}" for partition in range(PARTITIONS)]
    seen = {}

    def settled() -> bool:
        description = lab.describe(GROUP)
        owners = {
            member.client_id: sorted(f"{tp.topic}-{tp.partition}" for tp in member.assignment.topic_partitions)
            for member in description.members
        }
        seen.update(state=description.state.name, assignment=owners)
        return set(owners) == names and sorted(p for parts in owners.values() for p in parts) == wanted

    lab.wait_for(f"group {GROUP} with exactly {sorted(names)} owning {wanted}", settled)
    lab.record.event("group_stable", group=GROUP, members=len(names), **seen)


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    lab.create_topic(TOPIC, PARTITIONS)
    lab.produce(TOPIC, 12)
    first = None
    for count, name in enumerate(("k1", "k2", "k3"), start=1):
        lab.start_member(name, GROUP, TOPICS, protocol="consumer")
        lab.wait_for_group(GROUP, count, TOPICS)
        first = first or lab.group_epoch(GROUP)  # 1 on 4.2.1, 2 on 4.4.0
        record.expect(GROUP, f"{name} joined", epoch=first + count - 1)
    lab.wait_caught_up(GROUP, TOPICS)

    lab.kill_member("k2")
    time.sleep(JOIN_AFTER_KILL_S)
    lab.start_member("k4", GROUP, TOPICS, protocol="consumer")
    _wait_for_join_beside_the_dead(lab, {"k1", "k2", "k3", "k4"})
    record.expect(GROUP, "k4 joined while the killed k2 was still a member", epoch=first + 3)
    lab.wait_for_group(GROUP, 3, TOPICS)
    record.expect(GROUP, "k2 fenced at its session timeout", epoch=first + 4)

    lab.produce(TOPIC, 6)
    lab.wait_caught_up(GROUP, TOPICS)
    lab.stop_member("k3")
    lab.wait_for_group(GROUP, 2, TOPICS)
    record.expect(GROUP, "k3 left (heartbeat with epoch -1)", epoch=first + 5)
