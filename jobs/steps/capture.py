"""Capture: a live cluster's `__consumer_offsets` -> bronze `raw_records` (new records only), with
compaction loss counted.
Spark's Kafka source reads the topic with `read_committed` under Structured Streaming with
`Trigger.AvailableNow` and one checkpoint per cluster, so each run takes exactly what is new since the
last successful run; each micro-batch is MERGEd on (cluster, record_id), so a replayed batch adds
nothing twice. The cluster is described first, within `[capture] timeout_s`: a cluster that is down
or refuses the credentials fails the run at once with a clear message, before the checkpoint is touched.

`__consumer_offsets` is compacted: whatever the log cleaner removes before a capture reads it is gone.
Each micro-batch accounts for every offset of the span it covers (see `missing_offset_ranges`); the
offsets it did not get back are read again with read_uncommitted, one record batch at a time
(`jobs/compaction_gaps.py`), which tells transaction markers and aborted transactional records (never returned to a
read_committed reader, not loss) from records the cleaner removed (loss). See docs/capture.md.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.compaction_gaps import GAP_KINDS, GapAccount, GapProbe, account_for_gaps
from jobs.config import Config
from jobs.kafka_security import (
    CAPTURE_SECTION,
    KafkaConnection,
    KafkaSettingsError,
    KafkaUnavailable,
    admin_client,
    client_properties,
    describe_partitions,
    kafka_connection,
)
from jobs.runs import JobRun
from jobs.tables import RAW_RECORDS, cluster_rows, ensure_table, merge_new_rows
from schemas.bronze import raw_records_schema
from transforms.bronze import kafka_raw_rows

# Spark's admin-based offset reader drops internal topics (ConsumerStrategy.retrieveAllPartitions filters
# isInternal); the consumer-based one reads assigned partitions of any topic, with the consumer's isolation
# level (its end offset under read_committed is the last stable offset).
CONSUMER_OFFSET_FETCHING = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
STOP_TIMEOUT = "spark.sql.streaming.stopTimeout"
_SAFE_PATH_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class CaptureFailed(RuntimeError):
    """The streaming query stopped with an error; the message carries no secret."""


@dataclass(frozen=True)
class CaptureSettings:
    topic: str
    checkpoint_dir: str
    max_offsets_per_trigger: int
    gap_probe_max_batches: int


def capture_settings(config: Config) -> CaptureSettings:
    section = config.section(CAPTURE_SECTION)
    checkpoint = str(section.get("checkpoint_dir", "")).strip()
    if not checkpoint:
        if not _SAFE_PATH_PART.fullmatch(config.cluster):
            raise KafkaSettingsError(
                f"cluster name {config.cluster!r} names the capture checkpoint directory: use letters, digits, "
                "'.', '_' and '-' only, or set [capture] checkpoint_dir"
            )
        checkpoint = f"{config.warehouse}/_checkpoints/{config.cluster}/capture"
    return CaptureSettings(
        topic=str(section.get("topic", "__consumer_offsets")),
        checkpoint_dir=checkpoint,
        max_offsets_per_trigger=int(section.get("max_offsets_per_trigger", 0)),
        gap_probe_max_batches=int(section.get("gap_probe_max_batches", 10_000)),
    )


def kafka_source_options(connection: KafkaConnection, settings: CaptureSettings, partitions: int) -> dict[str, str]:
    options = {f"kafka.{key}": value for key, value in client_properties(connection, "groupscope-capture").items()}
    options |= {
        "kafka.isolation.level": "read_committed",
        # Assigned, not subscribed: subscribing would make the driver's consumer join a group on the
        # cluster it watches, writing records of its own into __consumer_offsets.
        "assign": json.dumps({settings.topic: list(range(partitions))}),
        "startingOffsets": "earliest",
        "failOnDataLoss": "true",
        "groupIdPrefix": "groupscope-capture",
        "includeHeaders": "false",
        "kafkaConsumer.pollTimeoutMs": str(int(connection.timeout_s * 1000)),
    }
    if settings.max_offsets_per_trigger > 0:
        options["maxOffsetsPerTrigger"] = str(settings.max_offsets_per_trigger)
    return options


def _start_stream(spark: SparkSession, options: dict[str, str], checkpoint: str, on_batch):
    previous = spark.conf.get(CONSUMER_OFFSET_FETCHING, None)
    spark.conf.set(CONSUMER_OFFSET_FETCHING, "true")
    try:  # the query copies the session's settings when it starts
        records = spark.readStream.format("kafka").options(**options).load()
        return (
            records.writeStream.trigger(availableNow=True)
            .option("checkpointLocation", checkpoint)
            .foreachBatch(on_batch)
            .start()
        )
    finally:
        if previous is None:
            spark.conf.unset(CONSUMER_OFFSET_FETCHING)
        else:
            spark.conf.set(CONSUMER_OFFSET_FETCHING, previous)


def _await_while_reachable(spark: SparkSession, connection: KafkaConnection, query, topic: str) -> None:
    """Waits for the query to end, asking the cluster for the topic every timeout_s meanwhile.

    Spark's Kafka source retries a cluster that went away during a capture without end (its offset
    reader polls with no deadline); a cluster that no longer answers fails the run instead. A slow
    micro-batch on a healthy cluster is never cut short: the question is answered.
    """
    with admin_client(spark, connection, "groupscope-capture-watch") as admin:
        while not query.awaitTermination(connection.timeout_s):
            try:
                describe_partitions(spark, connection, admin, [topic])
            except KafkaUnavailable as error:
                raise CaptureFailed(
                    connection.redact(f"capture stopped, checkpoint kept at the last batch: {error}")
                ) from None


def _stop(spark: SparkSession, query, timeout_s: float) -> None:
    """Stops the query, waiting at most a few timeouts for a stream thread stuck in a request: a stop
    left waiting on such a thread would hang the run it should end."""
    if not query.isActive:
        return
    previous = spark.conf.get(STOP_TIMEOUT, None)
    spark.conf.set(STOP_TIMEOUT, str(int(3 * timeout_s * 1000)))
    try:
        query.stop()
    except Exception as error:  # the run already fails, with the reason that matters
        print(f"capture: the streaming query did not stop cleanly ({type(error).__name__})", file=sys.stderr)
    finally:
        if previous is None:
            spark.conf.unset(STOP_TIMEOUT)
        else:
            spark.conf.set(STOP_TIMEOUT, previous)


def _stream_error(connection: KafkaConnection, error: StreamingQueryException) -> CaptureFailed:
    detail = getattr(error, "desc", None) or str(error)
    lines = [line.strip() for line in detail.splitlines() if line.strip()]
    reason = next((line for line in lines if "KafkaUnavailable:" in line), lines[0] if lines else "unknown error")
    return CaptureFailed(
        connection.redact(f"{connection.describe()}: capture stopped, checkpoint kept at the last batch: {reason}")
    )


def capture(spark: SparkSession, config: Config, run: JobRun) -> int:
    """Appends the records of [capture]'s cluster that raw_records does not hold yet; returns how many.

    run.counts gets `captured` and the offsets the capture did not get back: `compaction_gaps` (removed by
    the log cleaner since the previous capture: loss), `transaction_markers` and `aborted_records` (never
    returned under read_committed: not loss), `gaps_before_first_capture` (the cluster's first capture,
    not classified) and `gaps_unclassified` (past [capture] gap_probe_max_batches).
    """
    settings = capture_settings(config)
    connection = kafka_connection(config)
    source = f"kafka://{connection.bootstrap_servers}/{settings.topic}"
    run.inputs = [*run.inputs, source]
    run.progress("capture", f"{connection.describe()}, topic {settings.topic}")
    with admin_client(spark, connection, "groupscope-capture-check") as admin:
        partitions = describe_partitions(spark, connection, admin, [settings.topic])[settings.topic]
    table = config.table(RAW_RECORDS)
    ensure_table(spark, table, raw_records_schema, partition_by=("cluster",))
    probe = GapProbe(spark, connection, settings.topic, settings.gap_probe_max_batches)
    account = GapAccount(kinds=Counter())
    is_first_capture = cluster_rows(spark, config, RAW_RECORDS).limit(1).count() == 0

    def write_batch(records: DataFrame, batch_id: int) -> None:
        rows = kafka_raw_rows(records, config.cluster, run.run_id, source).localCheckpoint(eager=True)
        merge_new_rows(spark, table, rows, ["cluster", "record_id"])
        account_for_gaps(spark, table, config.cluster, rows, probe, account, is_first_capture)
        run.progress("capture", f"micro-batch {batch_id} written")

    options = kafka_source_options(connection, settings, partitions)
    query = _start_stream(spark, options, settings.checkpoint_dir, write_batch)
    try:
        _await_while_reachable(spark, connection, query, settings.topic)
    except StreamingQueryException as error:
        raise _stream_error(connection, error) from None
    finally:
        _stop(spark, query, connection.timeout_s)
        probe.close()
    captured = (cluster_rows(spark, config, RAW_RECORDS).where(F.col("capture_run_id") == run.run_id)).count()
    run.counts["captured"] = captured
    run.counts["gaps_before_first_capture"] = account.gaps_before_first_capture
    run.counts.update({kind: account.kinds[kind] for kind in GAP_KINDS})
    report(run, settings.topic, captured, account)
    return captured


def report(run: JobRun, topic: str, captured: int, account: GapAccount) -> None:
    """The run's findings on the console, with the advice that fixes compaction loss."""
    kinds = account.kinds
    run.progress("captured", f"{captured:,} new records of {topic}")
    if kinds["compaction_gaps"]:
        partitions = ", ".join(str(partition) for partition in sorted(account.compacted_partitions))
        run.progress(
            "COMPACTION LOSS",
            f"{kinds['compaction_gaps']:,} offsets of {topic} (partitions {partitions}) were removed by the log "
            "cleaner before this capture read them: that history is gone. To keep it, set min.compaction.lag.ms "
            f"on {topic} above the time between two captures (kafka-configs.sh --alter --entity-type topics "
            f"--entity-name {topic} --add-config min.compaction.lag.ms=<ms>), or capture more often",
        )
    if kinds["transaction_markers"] or kinds["aborted_records"]:
        run.progress(
            "not loss",
            f"{kinds['transaction_markers']:,} transaction markers and {kinds['aborted_records']:,} aborted "
            "transactional records (a read_committed reader never gets them; identified by reading the gaps "
            "back with read_uncommitted)",
        )
    if account.gaps_before_first_capture:
        run.progress(
            "before first capture",
            f"{account.gaps_before_first_capture:,} offsets were already gone (or were transaction markers or "
            "aborted records) when groupscope first read this cluster; not classified",
        )
    if kinds["gaps_unclassified"]:
        run.progress(
            "unclassified",
            f"{kinds['gaps_unclassified']:,} missing offsets past [capture] gap_probe_max_batches were not classified",
        )


def capture_and_count(spark: SparkSession, config: Config, run: JobRun) -> None:
    capture(spark, config, run)
    run.count_rows(RAW_RECORDS)
