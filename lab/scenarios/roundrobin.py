"""Classic group, `roundrobin` assignor (librdkafka): three members join, one leaves, one dies.

See lab/scenarios/classic.py for the story and the expected generations.
"""

from __future__ import annotations

from lab.broker import Broker
from lab.driver import ScenarioLog
from lab.scenarios.classic import run_classic

VERSIONS = ("4", "3.9", "4.3", "4.4")


def run(broker: Broker, record: ScenarioLog) -> None:
    run_classic(broker, record, group="roundrobin", assignor="roundrobin")
