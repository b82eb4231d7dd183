"""The maintenance job on real tables: compaction leaves the same rows in fewer files, vacuum keeps
them readable, and raw records older than the retention are forgotten for this cluster only."""

from __future__ import annotations

from dataclasses import replace

from delta.tables import DeltaTable
from pyspark.sql import functions as F

from jobs.decode import decode
from jobs.ingest import ingest
from jobs.maintenance import maintenance
from jobs.runs import JobRun
from tests.conftest import PUBLIC_FIXTURES

# Real segments written years ago: every record is older than any retention the test sets.
SEGMENTS = PUBLIC_FIXTURES / "DanielMorales9__kafkafun" / "677fd1af" / "data" / "kafka"
PARTITIONS = sorted(SEGMENTS.glob("__consumer_offsets-*"))
TABLES = ("raw_records", "offset_commits", "quarantine")


def rows(spark, config, table):
    return sorted(
        map(
            tuple,
            spark.table(config.table(table)).where(F.col("cluster") == config.cluster).drop("key", "value").collect(),
        )
    )


def cluster_files(spark, config, table):
    return spark.table(config.table(table)).where(F.col("cluster") == config.cluster).inputFiles()


def test_maintenance_compacts_without_changing_rows_and_applies_raw_retention(spark, spark_config):
    config = replace(spark_config, cluster="maintenance", segment_paths=tuple(map(str, PARTITIONS)))
    other = replace(spark_config, cluster="maintenance-other", segment_paths=tuple(map(str, PARTITIONS)))
    # Two ingests, half the partitions each, leave this cluster's raw records in two files.
    for paths in (PARTITIONS[:4], PARTITIONS):
        with JobRun(spark, config, "ingest") as run:
            ingest(spark, replace(config, segment_paths=tuple(map(str, paths))), run)
        assert run.exit_code == 0
    for cluster_config, stages in ((config, (decode,)), (other, (ingest, decode))):
        with JobRun(spark, cluster_config, "nightly") as run:
            for stage in stages:
                stage(spark, cluster_config, run)
        assert run.exit_code == 0
    assert len(cluster_files(spark, config, "raw_records")) >= 2
    before = {table: rows(spark, config, table) for table in TABLES}

    weekly = replace(config, sections={**config.sections, "maintenance": {"vacuum_retain_hours": 200}})
    with JobRun(spark, weekly, "maintenance") as run:
        maintenance(spark, weekly, run)
    assert run.exit_code == 0
    assert {table: rows(spark, config, table) for table in TABLES} == before
    assert len(cluster_files(spark, config, "raw_records")) == 1
    raw = DeltaTable.forName(spark, config.table("raw_records"))
    assert {"OPTIMIZE", "VACUUM START", "VACUUM END"} <= {r.operation for r in raw.history().collect()}
    assert raw.detail().first().properties["delta.deletedFileRetentionDuration"] == "interval 200 hours"

    # A one-day retention forgets all of this cluster's.
    retained = replace(config, sections={**config.sections, "maintenance": {"raw_retention_days": 1}})
    with JobRun(spark, retained, "maintenance") as run:
        maintenance(spark, retained, run)
    assert run.exit_code == 0
    assert run.counts["raw_records_deleted"] == len(before["raw_records"])
    assert rows(spark, config, "raw_records") == []
    assert len(rows(spark, other, "raw_records")) == len(before["raw_records"]), "another cluster's records stay"
