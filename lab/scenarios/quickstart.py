"""The quick-start sample: several scenarios in a row on one Kafka 4.2.1 broker, so one small capture
holds every kind of history groupscope rebuilds: cooperative rebalances (cooperative-sticky), static
membership, how groups and offsets end (lifecycle), transactional commits, and a KIP-848 group.
Copied to samples/kafka-4.2.1/.
"""

from __future__ import annotations

from lab.broker import Broker
from lab.driver import ScenarioLog
from lab.scenarios import cooperative_sticky, kip848, lifecycle, static_membership, transactions

VERSIONS = ("4",)
PARTS = (cooperative_sticky, static_membership, lifecycle, transactions, kip848)


def run(broker: Broker, record: ScenarioLog) -> None:
    for part in PARTS:
        record.event("part_started", part=part.__name__.rsplit(".", 1)[1])
        part.run(broker, record)
