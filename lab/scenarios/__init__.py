"""Scenario drivers: each module has `run(broker, record)`, `VERSIONS` (the Kafka lines it runs on) and,
optionally, `BROKER_SETTINGS` ({line: server.properties overrides}) for the fresh broker it needs and
`describe(broker)` ({file name: text}) for what Kafka's tools say at the end beyond kafka-consumer-groups.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from lab.broker import KAFKA_VERSIONS

# name -> module under lab.scenarios; the order is the capture order.
SCENARIO_MODULES = {
    "range": "range",
    "roundrobin": "roundrobin",
    "sticky": "sticky",
    "cooperative-sticky": "cooperative_sticky",
    "static": "static_membership",
    "lifecycle": "lifecycle",
    "commits": "commits",
    "transactions": "transactions",
    "kip848": "kip848",
    "kip848-handover": "kip848_handover",
    "kip848-crash": "kip848_crash",
    "kip848-static": "kip848_static",
    "connect": "connect",
    "streams": "streams",
    "streams-topology": "streams_topology",
    "share": "share",
    "quickstart": "quickstart",
}


def scenario(name: str) -> ModuleType:
    return import_module(f"lab.scenarios.{SCENARIO_MODULES[name]}")


def capture_folders(name: str | None = None) -> set[str]:
    """The folders (`kafka-<release>` under tests/captures) that hold a capture of scenario `name`: one
    per Kafka line it declares in VERSIONS; every line's when no scenario is named."""
    lines = scenario(name).VERSIONS if name else KAFKA_VERSIONS
    return {f"kafka-{KAFKA_VERSIONS[line]}" for line in lines}
