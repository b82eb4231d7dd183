"""Classic group, eager `sticky` assignor. librdkafka has only the cooperative variant, so the members are
kafka-python consumers (StickyPartitionAssignor: userData carries each member's previous assignment).

See lab/scenarios/classic.py for the story and the expected generations.
"""

from __future__ import annotations

from lab.broker import Broker
from lab.driver import ScenarioLog
from lab.scenarios.classic import run_classic

VERSIONS = ("4", "3.9", "4.3", "4.4")


def run(broker: Broker, record: ScenarioLog) -> None:
    run_classic(broker, record, group="sticky", assignor="sticky", client="kafka-python")
