"""What a capture needs to check time lag against the topics themselves: a series of end-offset snapshots
taken throughout the scenario (`EndOffsetSeries`, as an operator's snapshot job would take them), and
every record's timestamp (`record_timestamps`), read from the topics.

A snapshot is {"observed_at_ms", "answered_at_ms", "offsets": {topic: {partition: end offset}}}:
observed_at is when the ListOffsets request was sent (what groupscope's live snapshot stamps its rows
with), answered_at when the answer came back; the broker read the end offsets somewhere in between.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

SNAPSHOT_INTERVAL_S = 1.0
# An hour of snapshots at one a second: far more than any scenario takes, so memory stays bounded
# even if a driver hangs until its own deadlines fire.
MAX_SNAPSHOTS = 3600
# The fewest a series holds: the time-lag truth test takes the clock slack from the slowest answer of the
# series, which a scenario of a few seconds (commits) would otherwise sample only three or four times.
MIN_SNAPSHOTS = 5
REQUEST_TIMEOUT_S = 10
READ_DEADLINE_S = 60


def now_ms() -> int:
    return int(time.time() * 1000)


class EndOffsetSeries:
    """A background thread that snapshots the end offsets of `topics()` (read again at every tick, so
    topics created, grown or deleted during the scenario are followed) about every second until
    `stop()`. A tick that fails (a partition without a leader yet, a topic deleted mid-request) is
    counted in `failed` and left out: a snapshot job misses a poll, it does not invent one.
    """

    def __init__(self, bootstrap_servers: str, topics: Callable[[], Iterable[str]]):
        self._admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
        self._topics = topics
        self._stopped = threading.Event()
        self._enough = threading.Event()
        self._thread = threading.Thread(target=self._run, name="end-offset-series", daemon=True)
        self.snapshots: list[dict] = []
        self.failed = 0
        self.errors: list[str] = []

    def start(self) -> EndOffsetSeries:
        self._thread.start()
        return self

    def stop(self) -> list[dict]:
        """Stops the thread once the series holds MIN_SNAPSHOTS (a short scenario's series runs on at its
        cadence until then) and after its current request; returns the series."""
        self._enough.wait(MIN_SNAPSHOTS * SNAPSHOT_INTERVAL_S + REQUEST_TIMEOUT_S * 3)
        self._stopped.set()
        self._thread.join(REQUEST_TIMEOUT_S * 3)
        if self._thread.is_alive():
            raise RuntimeError("the end-offset snapshot thread did not stop")
        # Destroyed now, while the broker is up: librdkafka's destroy can wait on a broker that is gone.
        self._admin = None
        return self.snapshots

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stopped.is_set() and len(self.snapshots) < MAX_SNAPSHOTS:
            try:
                snapshot = self.snapshot()
            except KafkaException as error:
                self.failed += 1
                self.errors = [*self.errors[-4:], str(error)]
            else:
                if snapshot["offsets"]:
                    self.snapshots.append(snapshot)
                    if len(self.snapshots) >= MIN_SNAPSHOTS:
                        self._enough.set()
            # A fixed rate, not a fixed pause: a slow request does not stretch the cadence.
            next_tick += SNAPSHOT_INTERVAL_S
            self._stopped.wait(max(0.0, next_tick - time.monotonic()))

    def snapshot(self) -> dict:
        wanted = set(self._topics())  # the driver adds topics from its own thread: copied at once
        metadata = self._admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics
        request = {
            TopicPartition(topic, partition): OffsetSpec.latest()
            for topic in sorted(wanted & metadata.keys())
            for partition in metadata[topic].partitions
        }
        observed_at_ms = now_ms()
        futures = self._admin.list_offsets(request, request_timeout=REQUEST_TIMEOUT_S) if request else {}
        ends = {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}
        offsets: dict[str, dict[str, int]] = {}
        for (topic, partition), end in sorted(ends.items()):
            offsets.setdefault(topic, {})[str(partition)] = end
        return {"observed_at_ms": observed_at_ms, "answered_at_ms": now_ms(), "offsets": offsets}


def record_timestamps(bootstrap_servers: str, topics: Iterable[str]) -> dict[str, dict[str, list[list[int]]]]:
    """{topic: {partition: [[offset, timestamp_ms], ...]}}: every record of `topics` from the beginning to
    the end offset at the time of the call, read by a consumer that joins no group and commits nothing
    (so nothing reaches __consumer_offsets). read_uncommitted: every data record, as the end offset
    counts them. Offsets without a record (transaction markers, compacted) are absent.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "lab-record-timestamps",  # librdkafka wants one; never joined, never committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_uncommitted",
            # The end of a partition is reported, not inferred from the last record's offset: a
            # transaction marker can be the last offset, and markers are never delivered.
            "enable.partition.eof": True,
            "log_level": 0,
        }
    )
    try:
        metadata = consumer.list_topics(timeout=REQUEST_TIMEOUT_S).topics
        ends = {}
        for topic in sorted(topics):
            for partition in metadata[topic].partitions:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=REQUEST_TIMEOUT_S)
                ends[(topic, partition)] = high
        result: dict[str, dict[str, list[list[int]]]] = {
            topic: {str(partition): [] for (name, partition) in ends if name == topic} for topic, _ in ends
        }
        pending = {key for key, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, partition, 0) for topic, partition in sorted(pending)])
        deadline = time.monotonic() + READ_DEADLINE_S
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"records of {sorted(pending)} not read within {READ_DEADLINE_S}s")
            for message in consumer.consume(500, timeout=0.5):
                key = (message.topic(), message.partition())
                if message.error() and message.error().code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= ends[key]:
                        pending.discard(key)
                elif message.error():
                    raise KafkaException(message.error())
                elif message.offset() < ends[key]:
                    result[key[0]][str(key[1])].append([message.offset(), message.timestamp()[1]])
        return result
    finally:
        consumer.close()
