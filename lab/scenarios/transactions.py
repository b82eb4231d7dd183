"""Transactional offset commits (exactly-once consume-transform-produce), topic `refunds` (2 partitions).

A consumer in group `txn-app` is assigned both partitions; a producer with transactional.id
`txn-app-1` writes to `refunds-out` and, in the same transaction, commits the group's offsets
(send_offsets_to_transaction: TxnOffsetCommit, carrying the member id and generation):
  1. offsets 5  -> COMMIT   (a COMMIT marker follows the transactional batch in __consumer_offsets)
  2. offsets 10 -> ABORT    (an ABORT marker: these offsets never happened)
  3. offsets 15 -> COMMIT
  4. offsets 20 -> left open when the capture is taken (pending: no marker at all)
The consumer then closes, so the group ends Empty; kafka-consumer-groups shows 15.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from lab.broker import Broker
from lab.driver import Lab, ScenarioLog

VERSIONS = ("4", "3.9", "4.3", "4.4")
GROUP = "txn-app"
TRANSACTIONAL_ID = "txn-app-1"
STEPS = ((5, "commit"), (10, "abort"), (15, "commit"), (20, "open"))


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    lab.create_topic("refunds", 2)
    lab.create_topic("refunds-out", 1)
    lab.produce("refunds", 40)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": GROUP,
            "client.id": "txn-consumer",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": TRANSACTIONAL_ID, "log_level": 0}
    )
    record.groups.add(GROUP)
    consumer.subscribe(["refunds"])
    deadline = time.monotonic() + 60
    while len(consumer.assignment()) < 2:  # polling drives the join; the deadline bounds it
        consumer.poll(0.2)
        if time.monotonic() > deadline:
            raise TimeoutError("txn-consumer got no assignment")
    record.event("member_assigned", member="txn-consumer", group=GROUP, partitions=["refunds-0", "refunds-1"])
    producer.init_transactions(30)
    for offset, outcome in STEPS:
        producer.begin_transaction()
        producer.produce("refunds-out", key=f"refund-{offset}".encode(), value=b"processed")
        offsets = [TopicPartition("refunds", 0, offset), TopicPartition("refunds", 1, offset)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        if outcome == "commit":
            producer.commit_transaction(30)
        elif outcome == "abort":
            producer.abort_transaction(30)
        record.event(f"transaction_{outcome}", group=GROUP, transactional_id=TRANSACTIONAL_ID, offset=offset)
    lab.wait_for("committed offsets 15", lambda: lab.committed(GROUP) == {"refunds-0": 15, "refunds-1": 15})
    consumer.close()
    record.event("member_stopped", member="txn-consumer", group=GROUP)
    lab.wait_for_state(GROUP, "Empty")
    # The open transaction stays open until the broker is stopped; its offsets are pending in the capture.
    record.keep_running(lambda: record.event("open_transaction_dropped", producer=repr(producer)))
