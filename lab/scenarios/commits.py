"""Offset commits in their different shapes, topic `ledger` (3 partitions).

- `commit-metadata`: two members commit with metadata strings, one empty, one JSON with a non-ASCII
  character (metadata is a UTF-8 string of up to offset.metadata.max.bytes = 4096).
- `commit-standalone`: a consumer that assign()s partitions and commits without ever joining: offsets
  for a group that has no group record ("simple" group, as Spark, Flink and many tools use).
- `commit-retention`: an OffsetCommit v4 with retention_time_ms = one day, which makes the broker
  write OffsetCommitValue v1 (commit and expire timestamps) rather than v3/v4.
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from lab.broker import Broker
from lab.driver import Lab, ScenarioLog, commit_with_retention

VERSIONS = ("4", "3.9", "4.3", "4.4")
TOPICS = ("ledger",)
JSON_METADATA = '{"checkpoint":"λ-7","writer":"lab"}'


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    lab.create_topic("ledger", 3)
    lab.produce("ledger", 30)

    lab.start_member("m1", "commit-metadata", TOPICS, assignor="roundrobin", metadata="")
    lab.wait_for_group("commit-metadata", 1, TOPICS)
    lab.start_member("m2", "commit-metadata", TOPICS, assignor="roundrobin", metadata=JSON_METADATA)
    lab.wait_for_group("commit-metadata", 2, TOPICS)
    lab.produce("ledger", 12)
    lab.wait_caught_up("commit-metadata", TOPICS)

    standalone = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "commit-standalone", "log_level": 0}
    )
    try:
        offsets = [TopicPartition("ledger", 0, 4, metadata="manual"), TopicPartition("ledger", 2, 9, metadata="")]
        standalone.commit(offsets=offsets, asynchronous=False)
    finally:
        standalone.close()
    record.groups.add("commit-standalone")
    record.event("committed_standalone", group="commit-standalone", offsets={"ledger-0": 4, "ledger-2": 9})

    commit_with_retention(
        lab, "commit-retention", {("ledger", 0): 7, ("ledger", 1): 3}, retention_ms=86_400_000, metadata="kept a day"
    )
    lab.wait_for(
        "commit-retention offsets", lambda: lab.committed("commit-retention") == {"ledger-0": 7, "ledger-1": 3}
    )
