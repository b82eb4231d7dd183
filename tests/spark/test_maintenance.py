"""The maintenance job on real tables: compaction leaves the same rows in fewer files, vacuum keeps
them readable, and raw records older than the retention are forgotten for this cluster only."""

from __future__ import annotations

from dataclasses import replace

from delta.tables import DeltaTable
from pyspark.sql import functions as F

from jobs.runs import JobRun
from jobs.steps.decode import decode
from jobs.steps.ingest import ingest
from jobs.steps.maintenance import maintenance
from tests.conftest import PUBLIC_FIXTURES

# Real segments written years ago: every record is older than any retention the test sets.
SEGMENTS = PUBLIC_FIXTURES / "DanielMorales9__kafkafun" / "677fd1af" / "data" / "kafka"
PARTITIONS = sorted(SEGMENTS.glob("__consumer_offsets-*"))
DECODED_TABLES = ("offset_commits", "group_metadata", "quarantine")


def rows(spark, config, table):
    return sorted(
        map(
            tuple,
            spark.table(config.table(table)).where(F.col("cluster") == config.cluster).drop("key", "value").collect(),
        )
    )


def cluster_files(spark, config, table):
    return spark.table(config.table(table)).where(F.col("cluster") == config.cluster).inputFiles()


def test_maintenance_compacts_vacuums_and_forgets_old_raw_records_of_its_cluster_only(spark, spark_config):
    config = replace(spark_config, cluster="maintenance", segment_paths=tuple(map(str, PARTITIONS)))
    other = replace(spark_config, cluster="maintenance-other", segment_paths=tuple(map(str, PARTITIONS)))
    # Two ingests, part of the segments then all, leave raw records in several files; read in small
    # splits and written in small ranges, as a large run reads and writes them, they leave the decoded
    # tables in several files too.
    with JobRun(spark, config, "ingest") as run:
        ingest(spark, replace(config, segment_paths=tuple(map(str, PARTITIONS[:4]))), run)
    assert run.exit_code == 0
    small = {
        "spark.sql.files.maxPartitionBytes": "16k",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    }
    before = {name: spark.conf.get(name) for name in small}
    for name, value in small.items():
        spark.conf.set(name, value)
    try:
        for cluster_config, stages in ((config, (ingest, decode)), (other, (ingest,))):
            with JobRun(spark, cluster_config, "nightly") as run:
                for stage in stages:
                    stage(spark, cluster_config, run)
            assert run.exit_code == 0
    finally:
        for name, value in before.items():
            spark.conf.set(name, value)
    assert len(cluster_files(spark, config, "offset_commits")) >= 2
    decoded = {table: rows(spark, config, table) for table in DECODED_TABLES}
    raw = spark.table(config.table("raw_records")).where(F.col("cluster") == config.cluster)
    raw_count = raw.count()
    last_batches = raw.groupBy("source_file").agg(F.max("batch_position").alias("batch_position"))
    kept = sorted(row.record_id for row in raw.join(last_batches, ["source_file", "batch_position"]).collect())

    # Every record of these segments is years old: a one-day retention forgets all of this cluster's
    # but each file's last batch, where the next ingest reads on from.
    weekly = replace(config, sections={**config.sections, "maintenance": {"vacuum_retain_hours": 200,
                                                                          "raw_retention_days": 1}})  # fmt: skip
    with JobRun(spark, weekly, "maintenance") as run:
        maintenance(spark, weekly, run)
    assert run.exit_code == 0
    assert run.counts["raw_records_deleted"] == raw_count - len(kept) > 0
    assert sorted(row[1] for row in rows(spark, config, "raw_records")) == kept
    assert len(rows(spark, other, "raw_records")) == raw_count, "another cluster's records stay"
    assert {table: rows(spark, config, table) for table in DECODED_TABLES} == decoded
    # The next night reads nothing again and keeps every decoded row: the history outlives raw records.
    with JobRun(spark, config, "nightly") as run:
        ingest(spark, config, run)
        decode(spark, config, run)
    assert run.exit_code == 0 and run.counts["records_decoded"] == 0
    assert {table: rows(spark, config, table) for table in DECODED_TABLES} == decoded
    assert len(cluster_files(spark, config, "offset_commits")) == 1
    commits = DeltaTable.forName(spark, config.table("offset_commits"))
    assert {"OPTIMIZE", "VACUUM START", "VACUUM END"} <= {r.operation for r in commits.history().collect()}
    assert commits.detail().first().properties["delta.deletedFileRetentionDuration"] == "interval 200 hours"
