"""End offsets step: snapshots of the end offsets of the topics a cluster's groups consume -> ops `end_offsets`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.config import Config
from jobs.delta_tables import DeltaTable
from jobs.kafka_security import (
    KafkaConnection,
    KafkaSettingsError,
    KafkaUnavailable,
    admin_client,
    describe_partitions,
    future_result,
    kafka_connection,
)
from jobs.runs import JobRun
from jobs.tables import END_OFFSETS, ensure_table
from schemas.ops import end_offsets_schema

OFFSET_COMMITS = "offset_commits"
SECTION = "end_offsets"
END_OFFSET_FILE = "end_offsets.json"
ISOLATION_LEVELS = {"read_uncommitted": "READ_UNCOMMITTED", "read_committed": "READ_COMMITTED"}
KEY_COLUMNS = ("cluster", "topic", "partition", "observed_at")
# A snapshot's rows before they are stamped with the run's cluster.
snapshot_schema = StructType([field for field in end_offsets_schema.fields if field.name != "cluster"])


def load_end_offset_files(spark: SparkSession, paths: Iterable[Path | str]) -> DataFrame:
    """Lab captures' end offsets as snapshot rows (topic, partition, end_offset, observed_at). A directory
    is searched for end_offsets.json."""
    rows = [row for path in _end_offset_files(paths) for row in end_offset_file_rows(json.loads(path.read_text()))]
    return spark.createDataFrame(rows, snapshot_schema)


def end_offset_file_rows(document: dict) -> list[tuple]:
    """The snapshots of one end_offsets.json as (topic, partition, end_offset, observed_at) rows: the one
    at the top ({"observed_at_ms": ..., "offsets": {topic: {partition: offset}}}, all older captures
    hold) and those under "series" if present (the same shape, taken throughout the scenario; other keys
    such as "answered_at_ms" are not stored)."""
    return [
        (topic, int(partition), int(end_offset), datetime.fromtimestamp(snapshot["observed_at_ms"] / 1000, tz=UTC))
        for snapshot in [*document.get("series", []), document]
        for topic, partitions in snapshot["offsets"].items()
        for partition, end_offset in partitions.items()
    ]


def _end_offset_files(paths: Iterable[Path | str]) -> list[Path]:
    files = []
    for path in map(Path, paths):
        found = sorted(path.rglob(END_OFFSET_FILE)) if path.is_dir() else [path]
        if not found or not all(file.is_file() for file in found):
            raise FileNotFoundError(f"no {END_OFFSET_FILE} at {path}")
        files += found
    return files


def write_end_offsets(spark: SparkSession, config: Config, run: JobRun, rows: DataFrame) -> int:
    """Merges snapshot rows (topic, partition, end_offset, observed_at) into `end_offsets` for the run's
    cluster; returns how many were new. Only the target rows in the rows' observed_at window are read,
    so a frequent snapshot does not scan the table's history."""
    table = config.table(END_OFFSETS)
    ensure_table(spark, table, end_offsets_schema, partition_by=("cluster",), change_feed=True)
    # One file given twice in a call holds each row twice: the merge would insert both.
    stamped = (
        rows.select(F.lit(config.cluster).alias("cluster"), *snapshot_schema.fieldNames())
        .dropDuplicates(list(KEY_COLUMNS))
        .localCheckpoint()
    )
    window = stamped.agg(F.min("observed_at"), F.max("observed_at"), F.count(F.lit(1))).first()
    if not window[2]:
        run.counts["end_offsets_added"] = 0
        return 0
    before = _cluster_rows(spark, table, config.cluster).count()
    condition = (F.col("target.cluster") == F.lit(config.cluster)) & F.col("target.observed_at").between(
        F.lit(window[0]), F.lit(window[1])
    )
    for column in KEY_COLUMNS:
        condition &= F.col(f"target.{column}") == F.col(f"source.{column}")
    DeltaTable.forName(spark, table).alias("target").merge(
        stamped.alias("source"), condition
    ).whenNotMatchedInsertAll().execute()
    added = _cluster_rows(spark, table, config.cluster).count() - before
    run.counts["end_offsets_added"] = run.counts.get("end_offsets_added", 0) + added
    run.progress(END_OFFSETS, f"{added:,} new rows of {window[2]:,} for cluster {config.cluster!r}")
    return added


def _cluster_rows(spark: SparkSession, table: str, cluster: str) -> DataFrame:
    return spark.table(table).where(F.col("cluster") == F.lit(cluster))


def consumed_topics(spark: SparkSession, config: Config) -> set[str]:
    """Topics the cluster's groups committed offsets for, as decoded into silver offset_commits."""
    table = config.table(OFFSET_COMMITS)
    if not spark.catalog.tableExists(table):
        return set()
    return {row["topic"] for row in _cluster_rows(spark, table, config.cluster).select("topic").distinct().collect()}


def snapshot_topics(configured: Sequence[str], consumed: set[str], existing: set[str]) -> list[str]:
    """Configured topics as given; else the consumed topics that still exist; else every existing topic."""
    if configured:
        return sorted(set(configured))
    if consumed:
        return sorted(consumed & existing)
    return sorted(existing)


def live_end_offsets(spark: SparkSession, config: Config, run: JobRun) -> DataFrame:
    """One snapshot of the cluster's end offsets as snapshot rows; partitions that fail are counted
    (`end_offsets_failed`) and left out."""
    connection = kafka_connection(config)
    section = config.section(SECTION)
    isolation = ISOLATION_LEVELS.get(str(section.get("isolation_level", "read_uncommitted")))
    if isolation is None:
        raise KafkaSettingsError(f"[end_offsets] isolation_level must be one of {', '.join(ISOLATION_LEVELS)}")
    run.inputs = [*run.inputs, f"kafka://{connection.bootstrap_servers}"]
    jvm = spark._jvm
    with admin_client(spark, connection, "groupscope-end-offsets") as admin:
        existing = future_result(spark, connection, "listing topics", admin.listTopics().names())
        topics = snapshot_topics(
            [str(topic) for topic in section.get("topics", [])], consumed_topics(spark, config), set(existing)
        )
        partitions = describe_partitions(spark, connection, admin, topics)
        requests = {
            (topic, partition): jvm.org.apache.kafka.common.TopicPartition(topic, partition)
            for topic, count in partitions.items()
            for partition in range(count)
        }
        observed_at = datetime.now(UTC)
        specs = jvm.java.util.HashMap()
        for partition_ref in requests.values():
            specs.put(partition_ref, jvm.org.apache.kafka.clients.admin.OffsetSpec.latest())
        options = jvm.org.apache.kafka.clients.admin.ListOffsetsOptions(
            jvm.org.apache.kafka.common.IsolationLevel.valueOf(isolation)
        ).timeoutMs(int(connection.timeout_s * 1000))
        result = admin.listOffsets(specs, options)
        rows = _snapshot_rows(spark, connection, run, result, requests, observed_at)
    run.progress(END_OFFSETS, f"{len(rows):,} partitions of {len(partitions):,} topics at {observed_at:%H:%M:%S}")
    return spark.createDataFrame(rows, snapshot_schema)


def _snapshot_rows(spark, connection: KafkaConnection, run: JobRun, result, requests, observed_at) -> list[tuple]:
    rows, failed = [], []
    for (topic, partition), partition_ref in sorted(requests.items()):
        future = result.partitionResult(partition_ref)
        try:
            end_offset = future_result(spark, connection, f"end offset of {topic}-{partition}", future).offset()
        except KafkaUnavailable as error:  # one partition without a leader must not lose the whole snapshot
            failed.append(f"{topic}-{partition}")
            run.progress("end offset failed", str(error))
            continue
        rows.append((topic, partition, end_offset, observed_at))
    run.counts["end_offsets_failed"] = len(failed)
    return rows


def end_offsets(spark: SparkSession, config: Config, run: JobRun, from_files: Sequence[Path] | None = None) -> None:
    """A live snapshot, or the snapshots held in lab captures' end_offsets.json files when given."""
    if from_files:
        run.inputs = [str(path) for path in from_files]
        rows = load_end_offset_files(spark, from_files)
    else:
        rows = live_end_offsets(spark, config, run)
    write_end_offsets(spark, config, run, rows)
