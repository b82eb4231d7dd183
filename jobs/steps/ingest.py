"""Ingest: segment files and landed raw records -> bronze `raw_records` (new rows only)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.config import Config
from jobs.runs import JobRun
from jobs.segment_files import as_source_file, discover_partitions, is_uri, read_partition_files
from jobs.tables import RAW_RECORDS, ensure_table, merge_new_rows
from schemas.bronze import raw_records_schema
from transforms.bronze import RECORDS_PER_BATCH, arrow_batches, raw_records_from_landed, raw_rows_schema, with_record_at
from transforms.decoder.record_batches import partition_from_path


def read_partition_directories(
    spark: SparkSession,
    partitions: Sequence[Sequence[str]],
    cluster: str,
    capture_run_id: str,
    records_per_batch: int = RECORDS_PER_BATCH,
) -> DataFrame:
    """Segment files, grouped by `__consumer_offsets-N` directory -> raw_records rows.

    One task per directory reads its files itself, in log order (so transaction markers apply across
    its segments), and streams its records out in bounded batches: file contents never pass through
    Spark rows or a shuffle, so neither the JVM nor Python holds more than one file and one batch.
    """
    partitions = [list(files) for files in partitions]

    def read_tasks(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for task_batch in tasks:
            for task in task_batch.column("id").to_pylist():
                records = read_partition_files(partitions[task])
                yield from arrow_batches(records, cluster, capture_run_id, records_per_batch)

    tasks = spark.range(0, len(partitions), 1, numPartitions=max(len(partitions), 1))
    return with_record_at(tasks.mapInArrow(read_tasks, raw_rows_schema))


def read_inputs(spark: SparkSession, config: Config, run_id: str) -> DataFrame | None:
    frames = []
    partitions = [[as_source_file(file) for file in files] for files in discover_partitions(config.segment_paths)]
    if partitions:
        frames.append(read_partition_directories(spark, partitions, config.cluster, run_id))
    for path in config.raw_table_paths:
        is_json = config.raw_table_format == "json"
        landed = spark.read.format(config.raw_table_format).load(path)
        frames.append(raw_records_from_landed(landed, config.cluster, run_id, path, is_base64=is_json))
    if not frames:
        return None
    combined = frames[0]
    for frame in frames[1:]:
        combined = combined.unionByName(frame)
    return combined


def inputs_may_repeat_records(config: Config) -> bool:
    """Whether this run's inputs can hold one record twice: a backup beside the live log (two directories
    of one `__consumer_offsets` partition), a landed raw table (at-least-once landing), or paths we cannot
    list. Within one partition directory a record is read once, so segments alone usually cannot."""
    if config.raw_table_paths or any(is_uri(path) for path in config.segment_paths):
        return True
    directories = {str(Path(files[0]).resolve().parent) for files in discover_partitions(config.segment_paths)}
    partitions = [partition_from_path(directory) for directory in directories]
    known = [partition for partition in partitions if partition is not None]
    return len(known) != len(set(known))


def ingest(spark: SparkSession, config: Config, run: JobRun) -> int:
    """Returns the number of raw records now held for the cluster."""
    table = config.table(RAW_RECORDS)
    ensure_table(spark, table, raw_records_schema, partition_by=("cluster",))
    rows = read_inputs(spark, config, run.run_id)
    run.inputs = [*config.segment_paths, *config.raw_table_paths]
    if rows is not None:
        # Two copies of one record (a backup and the live log) are one record. Finding them shuffles and
        # sorts every row, so it is done only where copies can exist.
        if inputs_may_repeat_records(config):
            rows = rows.dropDuplicates(["cluster", "record_id"])
        merge_new_rows(spark, table, rows, ["cluster", "record_id"])
    return run.count_rows(RAW_RECORDS)
