"""The classic-protocol story shared by the range, roundrobin, sticky and cooperative-sticky scenarios.

Topics `orders` (6 partitions) and `stock` (3). Members c1, c2, c3 join one at a time; c2 leaves cleanly
(LeaveGroup); c3 is killed (SIGKILL) and dropped when its 6 s session times out; c1 runs on. Every member
commits what it consumed with the metadata string "<member>:<assignor>".

Generations by construction: eager assignors rebalance once per membership change (1, 2, 3, 4, 5).
Cooperative-sticky (KIP-429) needs two generations when a member joins and partitions must move (the
first revokes, the second assigns) but one when a member leaves or dies (nothing to revoke): 1, 3, 5, 6, 7.
"""

from __future__ import annotations

from lab.broker import Broker
from lab.driver import SESSION_TIMEOUT_MS, Lab, ScenarioLog

TOPICS = ("orders", "stock")


def run_classic(broker: Broker, record: ScenarioLog, group: str, assignor: str, client: str = "confluent") -> None:
    lab = Lab(broker, record)
    cooperative = assignor == "cooperative-sticky"
    lab.create_topic("orders", 6)
    lab.create_topic("stock", 3)
    lab.produce("orders", 60)
    lab.produce("stock", 30)
    generation = 0
    for count, name in enumerate(("c1", "c2", "c3"), start=1):
        lab.start_member(
            name,
            group,
            TOPICS,
            client=client,
            assignor=assignor,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            metadata=f"{name}:{assignor}",
        )
        lab.wait_for_group(group, count, TOPICS)
        generation += 2 if cooperative and count > 1 else 1
        record.expect(group, f"{name} joined: {count} member(s)", generation=generation, members=count)
    lab.wait_caught_up(group, TOPICS)

    lab.stop_member("c2")
    lab.wait_for_group(group, 2, TOPICS)
    generation += 1
    record.expect(group, "c2 left cleanly (LeaveGroup)", generation=generation, members=2)
    lab.produce("orders", 30)
    lab.wait_caught_up(group, TOPICS)

    lab.kill_member("c3")
    lab.wait_for_group(group, 1, TOPICS)
    generation += 1
    record.expect(group, "c3 killed, removed at session timeout", generation=generation, members=1)
    lab.produce("orders", 12)
    lab.produce("stock", 6)
    lab.wait_caught_up(group, TOPICS)
