"""Live capture (jobs/capture.py) and live end-offset snapshots (jobs/end_offsets.py) against one real
Kafka 4.2.1 broker from the lab, with a SASL/PLAIN listener, into a real Delta warehouse with real Spark.

What a user relies on, each checked against Kafka's own view: the decoded commits equal
`kafka-consumer-groups --describe`; a second run takes exactly the new records and a third nothing;
the SASL listener gives the same records with the secret from the environment, a wrong secret fails
clearly (through spark-submit.sh, exit code 1, no secret in any output) without moving the checkpoint;
missing offsets are classified exactly as Kafka's DumpLogSegments shows the log (removed by the cleaner,
transaction markers, aborted records); a stopped broker fails the run within the timeout and the run
after it catches up with nothing lost or doubled, and so does one stopped between two micro-batches
of a capture; end-offset snapshots equal the broker's. Through spark-submit.sh into a warehouse in an
s3proxy bucket (the one test that starts one: 3 s beside a broker's start), the checkpoint lands in the
bucket and the three runs take the broker's log once each, as DumpLogSegments reads it (docs/s3.md).

Tests run in file order on the shared broker (the outage tests, which restart it, come last). Each test
captures under its own cluster name, so each has its own checkpoint and its own rows.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from jobs.kafka_security import KafkaSettingsError, kafka_connection
from jobs.runs import JobRun
from jobs.steps.capture import capture, capture_settings
from jobs.steps.decode import decode
from jobs.steps.end_offsets import live_end_offsets, write_end_offsets
from lab.broker import Broker, plain_jaas_config
from lab.driver import Lab, ScenarioLog
from tests.conftest import REPO_ROOT
from tests.kafka_oracle import dump_records, kafka_classification, parse_describe, read_committed_offsets
from tests.s3_runs import BUCKET, SECRET_KEY_ENV, Run, S3Server, capture_environment_file, new_credentials

pytestmark = [pytest.mark.broker, pytest.mark.spark]

DATABASE = "groupscope_capture"
OFFSETS_TOPIC = "__consumer_offsets"
TOPIC, UNCONSUMED = "orders", "audit-trail"
GROUP = "capture-range"
SASL_USER = "capture"
JAAS_VARIABLE = "GROUPSCOPE_TEST_KAFKA_JAAS"
TIMEOUT_S = 10
SASL_OPTIONS = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
CLEANING_DEADLINE_S = 60
MIDWAY_COMMITS = 12


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """One broker for the module (its cleaner wakes every 100 ms), its SASL password and the lab's clients."""
    workdir = tmp_path_factory.mktemp("capture-kafka")
    password = secrets.token_urlsafe(18)
    broker = Broker("4", workdir / "broker", sasl_users={SASL_USER: password}, settings={"log.cleaner.backoff.ms": 100})
    record = ScenarioLog("capture", broker.kafka_version, workdir)
    broker.start()
    try:
        yield Lab(broker, record), password
    finally:
        try:
            broker.stop()
        finally:
            record.close()


@pytest.fixture(scope="module")
def capture_database(spark):
    if not spark.catalog.databaseExists(DATABASE):
        spark.sql(f"CREATE DATABASE {DATABASE}")
    return DATABASE


def capture_config(base, cluster: str, bootstrap_servers: str, options=None, secrets_from=None):
    sections = dict(base.sections)
    sections["capture"] = {
        **base.section("capture"),
        "bootstrap_servers": bootstrap_servers,
        "timeout_s": TIMEOUT_S,
        "kafka": dict(options or {}),
        "secrets": dict(secrets_from or {}),
    }
    return replace(base, database=DATABASE, cluster=cluster, sections=MappingProxyType(sections))


def run_capture(spark, config) -> JobRun:
    with JobRun(spark, config, "capture") as run:
        capture(spark, config, run)
    return run


def cluster_table(spark, config, table):
    return spark.table(config.table(table)).where(F.col("cluster") == F.lit(config.cluster))


def job_message(spark, config, run) -> str:
    return cluster_table(spark, config, "job_runs").where(F.col("run_id") == run.run_id).first()["message"]


def offsets_topic_ends(broker: Broker) -> dict[int, int]:
    return broker.end_offsets([OFFSETS_TOPIC])[OFFSETS_TOPIC]


def commit(lab: Lab, group: str, topic: str, offset: int) -> None:
    """A standalone commit (no group membership): exactly one offset-commit record."""
    consumer = Consumer({"bootstrap.servers": lab.broker.bootstrap_servers, "group.id": group, "log_level": 0})

    def committed() -> bool:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        return True

    try:  # the coordinator may still be loading right after a start: wait_for retries Kafka's errors
        lab.wait_for(f"{group} to commit {offset}", committed)
    finally:
        consumer.close()


def checkpoint_files(directory: str) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes() for path in Path(directory).rglob("*") if path.is_file()
    }


@pytest.fixture(scope="module")
def history(kafka, spark, spark_config, capture_database):
    """Group `capture-range` (two range members) commits; capture, decode; more commits, capture; capture."""
    lab, _ = kafka
    config = capture_config(spark_config, "lab", lab.broker.bootstrap_servers)
    lab.create_topic(TOPIC, 3)
    lab.create_topic(UNCONSUMED, 2)
    lab.produce(TOPIC, 30)
    lab.produce(UNCONSUMED, 8)
    for member in ("c1", "c2"):
        lab.start_member(member, GROUP, [TOPIC], assignor="range")
    lab.wait_for_group(GROUP, 2, [TOPIC])
    lab.wait_caught_up(GROUP, [TOPIC])
    result = {"ends_first": sum(offsets_topic_ends(lab.broker).values())}
    result["first"] = run_capture(spark, config)
    with JobRun(spark, config, "decode") as decoded:
        decode(spark, config, decoded)
    result["describe"] = [row for row in parse_describe(lab.broker.describe_groups()) if row["GROUP"] == GROUP]
    lab.produce(TOPIC, 12)
    lab.wait_caught_up(GROUP, [TOPIC])
    result["ends_second"] = sum(offsets_topic_ends(lab.broker).values())
    result["second"] = run_capture(spark, config)
    result["third"] = run_capture(spark, config)
    result["raw"] = cluster_table(spark, config, "raw_records").select("record_id").collect()
    for member in ("c1", "c2"):
        lab.stop_member(member)
    return config, result


def test_first_capture_decodes_to_what_kafka_consumer_groups_describes(spark, history):
    config, result = history
    first = result["first"]
    assert first.exit_code == 0
    # A fresh broker, no transactions, nothing compacted: every offset of the topic is a record.
    assert first.counts["captured"] == result["ends_first"] > 0
    assert first.counts["gaps_before_first_capture"] == first.counts["compaction_gaps"] == 0
    newest_first = Window.partitionBy("topic", "partition").orderBy(F.desc("source_partition"), F.desc("source_offset"))
    latest = (
        cluster_table(spark, config, "offset_commits")
        .where((F.col("group_id") == GROUP) & ~F.col("is_tombstone"))
        .withColumn("newest", F.row_number().over(newest_first))
        .where(F.col("newest") == 1)
    )
    committed = {(row["topic"], row["partition"]): row["committed_offset"] for row in latest.collect()}
    described = {(row["TOPIC"], int(row["PARTITION"])): int(row["CURRENT-OFFSET"]) for row in result["describe"]}
    assert described and committed == described


def test_second_capture_takes_exactly_the_new_records_and_a_third_nothing(history):
    _, result = history
    second, third = result["second"], result["third"]
    assert second.exit_code == third.exit_code == 0
    assert second.counts["captured"] == result["ends_second"] - result["ends_first"] > 0
    assert third.counts["captured"] == 0
    ids = [row["record_id"] for row in result["raw"]]
    assert len(ids) == len(set(ids)) == result["ends_second"]


def test_secrets_come_from_the_environment_never_from_files(spark_config):
    config = capture_config(spark_config, "x", "127.0.0.1:1", SASL_OPTIONS, {"sasl.jaas.config": JAAS_VARIABLE})
    jaas = plain_jaas_config(SASL_USER, "s3cr3t-value")
    connection = kafka_connection(config, {JAAS_VARIABLE: jaas})
    assert connection.properties["sasl.jaas.config"] == jaas
    assert connection.redact(f"failed: {jaas} and s3cr3t-value") == "failed: *** and ***"
    with pytest.raises(KafkaSettingsError, match=JAAS_VARIABLE):
        kafka_connection(config, {})
    in_file = capture_config(spark_config, "x", "127.0.0.1:1", {"sasl.jaas.config": jaas})
    with pytest.raises(KafkaSettingsError, match=r"\[capture.secrets\]") as refused:
        kafka_connection(in_file, {})
    assert "s3cr3t" not in str(refused.value)


@pytest.fixture(scope="module")
def sasl_capture(kafka, spark, spark_config, history):
    lab, password = kafka
    os.environ[JAAS_VARIABLE] = plain_jaas_config(SASL_USER, password)
    try:
        config = capture_config(
            spark_config,
            "lab-sasl",
            lab.broker.sasl_bootstrap_servers,
            SASL_OPTIONS,
            {"sasl.jaas.config": JAAS_VARIABLE},
        )
        secured = run_capture(spark, config)
        plain_config = history[0]
        plain = run_capture(spark, plain_config)  # nothing was written since: both read the same log
        yield config, secured, plain
    finally:
        os.environ.pop(JAAS_VARIABLE, None)


def test_sasl_capture_reads_the_same_records_with_the_secret_from_the_environment(spark, history, sasl_capture):
    config, secured, plain = sasl_capture
    assert secured.exit_code == plain.exit_code == 0
    columns = ["source_partition", "source_offset", "key", "value"]
    secured_rows = cluster_table(spark, config, "raw_records").select(*columns).collect()
    plain_rows = cluster_table(spark, history[0], "raw_records").select(*columns).collect()
    assert secured.counts["captured"] == len(secured_rows) == len(plain_rows) > 0
    assert sorted(map(tuple, secured_rows)) == sorted(map(tuple, plain_rows))


def test_wrong_secret_fails_clearly_through_spark_submit_and_keeps_the_checkpoint(kafka, spark, sasl_capture, tmp_path):
    lab, password = kafka
    config, _, _ = sasl_capture
    checkpoint = capture_settings(config).checkpoint_dir
    before = checkpoint_files(checkpoint)
    assert before, "the secured capture left no checkpoint"
    wrong = secrets.token_urlsafe(18)
    settings = {
        "catalog": {"database": "groupscope_denied"},
        "storage": {"warehouse_dir": str(tmp_path / "warehouse")},
        "input": {"cluster": config.cluster, "segment_paths": []},
        "capture": {"bootstrap_servers": lab.broker.sasl_bootstrap_servers, "timeout_s": TIMEOUT_S},
        "capture.kafka": SASL_OPTIONS,
        "capture.secrets": {"sasl.jaas.config": JAAS_VARIABLE},
    }
    settings["capture"]["checkpoint_dir"] = checkpoint
    conf = tmp_path / "denied.toml"
    conf.write_text(
        "".join(
            f"[{section}]\n" + "".join(f"{json.dumps(key)} = {json.dumps(value)}\n" for key, value in values.items())
            for section, values in settings.items()
        )
    )
    environment = os.environ | {JAAS_VARIABLE: plain_jaas_config(SASL_USER, wrong)}
    result = subprocess.run(
        [str(REPO_ROOT / "spark-submit.sh"), "capture", "--conf", str(conf)],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "refused the credentials" in output
    assert wrong not in output and password not in output
    assert checkpoint_files(checkpoint) == before
    job_runs = spark.read.format("delta").load(str(tmp_path / "warehouse" / "groupscope_denied.db" / "job_runs"))
    [row] = job_runs.collect()
    assert row["outcome"] == "failed" and "refused the credentials" in row["message"]
    assert wrong not in row["message"]


@pytest.fixture
def s3_store(tmp_path):
    """A real s3proxy (tests/s3_runs.py, started by scripts/s3proxy.sh), for the one test that needs it."""
    store = S3Server(tmp_path / "store", new_credentials()).start()
    try:
        yield store
    finally:
        store.stop()


CAPTURED = re.compile(r"captured: ([\d,]+) new records")
S3_CLUSTER, S3_COMMITS = "lab-s3", 3


def files_under(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}


def capture_through_spark_submit(store: S3Server, conf: Path, output: Path) -> tuple[int, str, str]:
    """One `spark-submit.sh capture`, with the store's key pair in its environment only: records captured,
    its output and its Spark log."""
    run = Run.start("capture", conf, output, store.credentials)
    code, printed, seconds = run.finish()
    assert code == 0, printed[-3000:]
    print(f"{output.stem} capture into s3proxy: {seconds:.0f} s")  # shown with pytest -rP
    return int(CAPTURED.search(printed)[1].replace(",", "")), printed, run.spark_logs()


def test_capture_into_an_s3_warehouse_checkpoints_in_the_bucket_and_takes_each_record_once(
    kafka, spark, s3_store, tmp_path
):
    lab, _ = kafka
    broker = lab.broker
    lab.create_topic("s3-orders", 1)
    commit(lab, "capture-s3", "s3-orders", 0)  # run alone, this test still finds a record to capture first
    warehouse = s3_store.bucket_folder / "warehouse"  # s3proxy's files: what the bucket holds
    checkpoint = warehouse / "_checkpoints" / S3_CLUSTER / "capture"
    capture = {"bootstrap_servers": broker.bootstrap_servers, "timeout_s": TIMEOUT_S}
    conf = capture_environment_file(
        tmp_path / "s3.toml",
        s3_store.endpoint,
        f"s3a://{BUCKET}/warehouse",
        tmp_path / "metastore",
        S3_CLUSTER,
        capture,
    )
    first = capture_through_spark_submit(s3_store, conf, tmp_path / "first.out")
    after_first = files_under(checkpoint)
    ends_first = offsets_topic_ends(broker)
    for offset in range(1, 1 + S3_COMMITS):
        commit(lab, "capture-s3", "s3-orders", offset)
    second = capture_through_spark_submit(s3_store, conf, tmp_path / "second.out")
    after_second = files_under(checkpoint)
    ends = offsets_topic_ends(broker)
    third = capture_through_spark_submit(s3_store, conf, tmp_path / "third.out")
    # Spark's checkpoint, written through S3A: an offsets and a commits entry per run that read something.
    assert {"metadata", "sources/0/0", "offsets/0", "commits/0"} <= after_first
    assert {"offsets/1", "commits/1"} <= after_second == files_under(checkpoint)
    assert second[0] == sum(ends.values()) - sum(ends_first.values()) >= S3_COMMITS
    assert third[0] == 0
    # Each run made the S3 run lock (docs/s3.md) in the bucket and removed it at its end.
    assert (warehouse / "_groupscope" / "locks").is_dir() and not files_under(warehouse / "_groupscope")
    # What the broker's log holds, as Kafka's DumpLogSegments reads it, is what raw_records holds: once each.
    visible = read_committed_offsets(dump_records(broker, set(ends), CLEANING_DEADLINE_S))
    rows = spark.read.format("delta").load(str(warehouse / "groupscope.db" / "raw_records")).collect()
    captured = [(row["source_partition"], row["source_offset"]) for row in rows if row["cluster"] == S3_CLUSTER]
    assert len(captured) == first[0] + second[0] and sorted(captured) == sorted(visible)
    secret = s3_store.credentials[SECRET_KEY_ENV]
    for _, output, logs in (first, second, third):
        assert logs and secret not in output and secret not in logs
    stored = [path for path in [*s3_store.folder.rglob("*"), *(tmp_path / "metastore").rglob("*")] if path.is_file()]
    assert all(secret.encode() not in path.read_bytes() for path in stored)


def set_offsets_topic_config(lab: Lab, settings: dict[str, str | None]) -> None:
    """Sets (or, for None, removes) topic configs of __consumer_offsets, as an operator would."""
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        if value is not None
        else ConfigEntry(name, "", incremental_operation=AlterConfigOpType.DELETE)
        for name, value in settings.items()
    ]
    resource = ConfigResource("topic", OFFSETS_TOPIC, incremental_configs=entries)
    for future in lab.admin.incremental_alter_configs([resource]).values():
        future.result(30)


def cleaned_up_to(broker: Broker, partition: int) -> int:
    """The log cleaner's checkpoint for one __consumer_offsets partition (-1 before any cleaning)."""
    checkpoint = broker.log_dir / "cleaner-offset-checkpoint"
    lines = checkpoint.read_text().splitlines()[2:] if checkpoint.exists() else []
    offsets = {
        int(part): int(offset) for topic, part, offset in (line.split() for line in lines) if topic == OFFSETS_TOPIC
    }
    return offsets.get(partition, -1)


def commit_and_clean(lab: Lab, group: str, superseded: int) -> None:
    """`superseded` commits of one key, then two more, each in a new segment; waits until the cleaner has
    removed the superseded ones (the second-to-last commit supersedes them; the last keeps it out of the
    active segment)."""
    broker = lab.broker
    set_offsets_topic_config(lab, {"segment.ms": "300", "min.cleanable.dirty.ratio": "0.01"})
    for offset in range(superseded):
        commit(lab, group, TOPIC, offset)
    for offset in (superseded, superseded + 1):
        ends = offsets_topic_ends(broker)
        time.sleep(0.4)  # older than segment.ms: this commit starts a new segment
        commit(lab, group, TOPIC, offset)
    [partition] = [part for part, end in offsets_topic_ends(broker).items() if end != ends[part]]
    lab.wait_for("the log cleaner", lambda: cleaned_up_to(broker, partition) >= ends[partition], CLEANING_DEADLINE_S)
    set_offsets_topic_config(lab, {"segment.ms": None, "min.cleanable.dirty.ratio": None})


def transactions(lab: Lab, group: str) -> None:
    """A consumer of `group` and a transactional producer commit its offsets: commit, abort, commit; then
    a plain commit, so every partition's last record is a visible one."""
    lab.create_topic("refunds", 2)
    lab.create_topic("refunds-out", 1)
    consumer = Consumer({"bootstrap.servers": lab.broker.bootstrap_servers, "group.id": group, "log_level": 0})
    producer = Producer({"bootstrap.servers": lab.broker.bootstrap_servers, "transactional.id": group, "log_level": 0})
    consumer.subscribe(["refunds"])
    lab.wait_for(f"{group} assigned", lambda: consumer.poll(0.2) is None and len(consumer.assignment()) == 2)
    producer.init_transactions(30)
    for offset, outcome in ((5, "commit"), (10, "abort"), (15, "commit")):
        producer.begin_transaction()
        producer.produce("refunds-out", value=b"processed")
        offsets = [TopicPartition("refunds", 0, offset), TopicPartition("refunds", 1, offset)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    consumer.close()
    lab.wait_for_state(group, "Empty")
    commit(lab, group, "refunds", 20)


def test_missing_offsets_are_classified_as_kafkas_own_log_shows(kafka, spark, spark_config, sasl_capture):
    lab, _ = kafka
    broker = lab.broker
    config = capture_config(spark_config, "lab-gaps", broker.bootstrap_servers)
    baseline = run_capture(spark, config)
    assert baseline.exit_code == 0 and baseline.counts["gaps_before_first_capture"] == 0
    ends_before = offsets_topic_ends(broker)
    superseded = 5
    commit_and_clean(lab, "capture-history", superseded)
    transactions(lab, "capture-txn")
    ends_after = {part: end for part, end in offsets_topic_ends(broker).items() if end != ends_before[part]}
    classified = run_capture(spark, config)
    assert classified.exit_code == 0
    kafka_view = kafka_classification(
        dump_records(broker, set(ends_after), CLEANING_DEADLINE_S), ends_before, ends_after
    )
    # By construction: the cleaner removed the superseded commits; three transactions, one aborted, two offsets each.
    assert kafka_view["removed"] == superseded
    assert (kafka_view["markers"], kafka_view["aborted"]) == (3, 2)
    counts = classified.counts
    assert counts["compaction_gaps"] == kafka_view["removed"]
    assert counts["transaction_markers"] == kafka_view["markers"]
    assert counts["aborted_records"] == kafka_view["aborted"]
    assert counts["captured"] == kafka_view["visible"]
    assert counts["gaps_unclassified"] == counts["gaps_before_first_capture"] == 0


def test_end_offsets_snapshot_equals_the_brokers_through_the_secured_listener(kafka, spark, history, monkeypatch):
    lab, password = kafka
    monkeypatch.setenv(JAAS_VARIABLE, plain_jaas_config(SASL_USER, password))
    plain_config = history[0]
    config = capture_config(
        plain_config, "lab", lab.broker.sasl_bootstrap_servers, SASL_OPTIONS, {"sasl.jaas.config": JAAS_VARIABLE}
    )
    snapshots = {}
    for name, topics in (("consumed", []), ("configured", [UNCONSUMED])):
        sections = dict(config.sections) | {"end_offsets": {"topics": topics, "isolation_level": "read_uncommitted"}}
        snapshot_config = replace(config, sections=MappingProxyType(sections))
        with JobRun(spark, snapshot_config, "end_offsets") as run:
            write_end_offsets(spark, snapshot_config, run, live_end_offsets(spark, snapshot_config, run))
        assert run.exit_code == 0
        newest = cluster_table(spark, config, "end_offsets").agg(F.max("observed_at")).first()[0]
        rows = cluster_table(spark, config, "end_offsets").where(F.col("observed_at") == newest).collect()
        snapshots[name] = {(row["topic"], row["partition"]): row["end_offset"] for row in rows}
    # The group consumed only TOPIC (decoded offset_commits); UNCONSUMED is taken when configured.
    for name, topic in (("consumed", TOPIC), ("configured", UNCONSUMED)):
        broker_view = {(topic, part): end for part, end in lab.broker.end_offsets([topic])[topic].items()}
        assert snapshots[name] == broker_view


def test_broker_down_fails_fast_keeps_the_checkpoint_and_the_next_run_catches_up(kafka, spark, spark_config):
    lab, _ = kafka
    broker = lab.broker
    config = capture_config(spark_config, "lab-outage", broker.bootstrap_servers)
    assert run_capture(spark, config).exit_code == 0
    ends_before = sum(offsets_topic_ends(broker).values())
    for offset in range(4):
        commit(lab, "capture-outage", TOPIC, offset)
    broker.stop()
    checkpoint = capture_settings(config).checkpoint_dir
    before = checkpoint_files(checkpoint)
    started = time.monotonic()
    failed = run_capture(spark, config)
    took = time.monotonic() - started
    assert failed.exit_code == 1
    assert took < 6 * TIMEOUT_S, f"a stopped broker took {took:.0f}s to fail the run"
    message = job_message(spark, config, failed)
    assert "'lab-outage'" in message and "no answer within" in message
    assert checkpoint_files(checkpoint) == before
    broker.restart()
    ends_after = sum(offsets_topic_ends(broker).values())
    caught_up = run_capture(spark, config)
    assert caught_up.exit_code == 0
    assert caught_up.counts["captured"] == ends_after - ends_before >= 4
    ids = [row["record_id"] for row in cluster_table(spark, config, "raw_records").select("record_id").collect()]
    assert len(ids) == len(set(ids))


class _BatchWritten(StreamingQueryListener):
    """Sets `written` once a micro-batch with records has been written and its checkpoint committed."""

    def __init__(self) -> None:
        self.written = threading.Event()

    def onQueryStarted(self, event) -> None:  # Spark's listener interface names these
        pass

    def onQueryProgress(self, event) -> None:
        if event.progress.numInputRows > 0:
            self.written.set()

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


def test_broker_stopped_in_the_middle_of_a_capture_fails_it_and_the_next_run_completes_it(kafka, spark, spark_config):
    lab, _ = kafka
    broker = lab.broker
    config = capture_config(spark_config, "lab-midway", broker.bootstrap_servers)
    assert run_capture(spark, config).exit_code == 0
    ends_before = sum(offsets_topic_ends(broker).values())
    for offset in range(MIDWAY_COMMITS):
        commit(lab, "capture-midway", TOPIC, offset)
    # One record per micro-batch: the capture is still going when the broker stops after the first.
    batched = replace(config, sections=MappingProxyType({**config.sections, "capture": {
        **config.section("capture"), "max_offsets_per_trigger": 1}}))  # fmt: skip
    listener, outcome = _BatchWritten(), {}
    spark.streams.addListener(listener)
    capturing = threading.Thread(target=lambda: outcome.update(run=run_capture(spark, batched)))
    capturing.start()
    try:
        assert listener.written.wait(timeout=300), "no micro-batch was written"
        broker.stop()
        capturing.join(timeout=600)
    finally:
        spark.streams.removeListener(listener)
    failed = outcome["run"]
    assert failed.exit_code == 1
    assert "capture stopped, checkpoint kept at the last batch" in job_message(spark, config, failed)
    partial = cluster_table(spark, config, "raw_records").where(F.col("capture_run_id") == failed.run_id).count()
    assert 0 < partial < MIDWAY_COMMITS, "the broker must stop between the first and the last micro-batch"

    broker.restart()
    caught_up = run_capture(spark, config)
    assert caught_up.exit_code == 0
    assert partial + caught_up.counts["captured"] == sum(offsets_topic_ends(broker).values()) - ends_before
    ids = [row["record_id"] for row in cluster_table(spark, config, "raw_records").select("record_id").collect()]
    assert len(ids) == len(set(ids))
