"""Maintenance: compact the cluster's Delta tables, drop files no version needs, and forget old raw records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.delta_tables import DeltaTable, is_connect
from jobs.file_states import file_states
from jobs.raw_changes import retire
from jobs.runs import JobRun
from jobs.tables import RAW_RECORDS, database_tables, sql_string_literal

RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"


def _tables(spark: SparkSession, config: Config) -> list[str]:
    return [config.table(name) for name in database_tables(spark, config.database)]


def maintenance(spark: SparkSession, config: Config, run: JobRun) -> None:
    settings = config.section("maintenance")
    retain_hours = settings.get("vacuum_retain_hours")
    # Spark lists a table's directories with up to 10,000 tasks by default, which costs a small
    # table tens of seconds; a few tasks per core list even large tables just as fast locally. A Spark
    # Connect client cannot see the server's cores: it asks for as many as a 4-core server would get.
    cores = 4 if is_connect(spark) else spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", str(4 * cores))
    raw_retention_days = int(settings.get("raw_retention_days", 0))
    if raw_retention_days > 0:
        cutoff = datetime.now(UTC) - timedelta(days=raw_retention_days)
        # Silver and gold keep what was derived from the deleted records: the history outlives raw.
        run.counts["raw_records_deleted"] = retire(spark, config, F.col("record_at") < F.lit(cutoff))
        file_states(spark, config)  # what raw_records holds of each file, as the next ingest reads on from it
        run.count_rows(RAW_RECORDS)
    for table in _tables(spark, config):
        delta = DeltaTable.forName(spark, table)
        detail = delta.detail().first()
        if (
            retain_hours is not None
            and detail.properties.get(RETENTION_PROPERTY) != f"interval {int(retain_hours)} hours"
        ):
            spark.sql(
                f"ALTER TABLE {table} SET TBLPROPERTIES ('{RETENTION_PROPERTY}' = 'interval {int(retain_hours)} hours')"
            )
        partitioned = "cluster" in detail.partitionColumns
        optimizer = delta.optimize()
        if partitioned:
            optimizer = optimizer.where(f"cluster = {sql_string_literal(config.cluster)}")
        files = optimizer.executeCompaction().first().metrics
        delta.vacuum()
        run.counts[f"optimize_removed_files.{table.split('.')[-1]}"] = files.numFilesRemoved
        run.progress(table, f"compacted {files.numFilesRemoved} file(s) into {files.numFilesAdded}; vacuumed")
