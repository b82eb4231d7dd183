"""Ingest: segment files and landed raw records -> bronze `raw_records` (new rows only)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.delta_tables import DeltaTable
from jobs.file_states import file_states
from jobs.ingest_plan import FileRead, ReadPlan, holds_other_sources, plan_reads
from jobs.raw_changes import RESOLVED_COLUMNS, merge_resolved_transactions
from jobs.runs import JobRun
from jobs.segment_files import as_source_file, discover_partitions, is_uri, read_partition_files
from jobs.segment_reader import jvm_reads, jvm_rows
from jobs.tables import (
    RAW_RECORDS,
    broadcast_joins_off,
    ensure_table,
    held_on_disk,
    sql_string_literal,
    table_location,
)
from schemas.bronze import raw_records_schema
from transforms.bronze import RECORDS_PER_BATCH, arrow_batches, raw_records_from_landed, raw_rows_schema, with_record_at
from transforms.decoder.log_record import LogRecord
from transforms.decoder.log_transactions import TXN_ABORTED, TXN_COMMITTED, TXN_PENDING
from transforms.decoder.record_batches import topic_partition_from_path


def read_partition_directories(
    spark: SparkSession,
    partitions: Sequence[Sequence[str | FileRead]],
    cluster: str,
    capture_run_id: str,
    records_per_batch: int = RECORDS_PER_BATCH,
) -> DataFrame:
    """Segment files, grouped by partition directory (`__consumer_offsets-N`, `__share_group_state-N`)
    -> raw_records rows.

    One task per directory reads its files itself, in log order (so transaction markers apply across
    its segments), and streams its records out in bounded batches: file contents never pass through
    Spark rows or a shuffle, so neither the JVM nor Python holds more than one file and one batch.
    A clean partition is read by the JVM, any other by the Python reader (jobs.segment_reader).
    A `FileRead` reads a file on from where an earlier run left it: of the records it re-reads, only
    those whose transaction has resolved since come out again.
    """
    partitions = [[read if isinstance(read, FileRead) else FileRead(read) for read in files] for files in partitions]
    by_jvm = jvm_reads(spark, partitions)
    by_python = [reads for index, reads in enumerate(partitions) if index not in by_jvm]

    def read_tasks(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for task_batch in tasks:
            for task in task_batch.column("id").to_pylist():
                reads = {read.path: read for read in by_python[task]}
                records = read_partition_files(list(reads), {path: read.start for path, read in reads.items()})
                fresh = (record for record in records if _is_news(record, reads[record.source_file]))
                yield from arrow_batches(fresh, cluster, capture_run_id, records_per_batch)

    frames = [jvm_rows(spark, by_jvm, cluster, capture_run_id)] if by_jvm else []
    if by_python or not frames:
        tasks = spark.range(0, len(by_python), 1, numPartitions=max(len(by_python), 1))
        frames.append(tasks.mapInArrow(read_tasks, raw_rows_schema))
    return with_record_at(functools.reduce(DataFrame.unionByName, frames))


def _is_news(record: LogRecord, read: FileRead) -> bool:
    """A record raw_records lacks, or may hold as pending while its marker has now been read. A read on
    starts at the last batch held, which is often a transaction resolved before its marker ended the
    file (markers are no rows): held resolved already, it is no news."""
    is_known = record.batch_position is not None and record.batch_position <= read.known_through
    if not is_known:
        return True
    may_be_pending = read.pending_from is not None and record.batch_position >= read.pending_from
    return may_be_pending and record.txn_state in (TXN_COMMITTED, TXN_ABORTED)


def read_inputs(spark: SparkSession, config: Config, run_id: str, plan: ReadPlan | None = None) -> DataFrame | None:
    """Every input's raw_records rows; segment files as `plan` says (all of every file without one)."""
    frames = []
    if plan is None:
        partitions = [[as_source_file(file) for file in files] for files in discover_partitions(config.segment_paths)]
        plan = ReadPlan([[FileRead(path) for path in files] for files in partitions])
    if plan.partitions:
        frames.append(read_partition_directories(spark, plan.partitions, config.cluster, run_id))
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
    partitions = [topic_partition_from_path(directory) for directory in directories]
    known = [partition for partition in partitions if partition is not None]
    return len(known) != len(set(known))


def ingest(spark: SparkSession, config: Config, run: JobRun) -> int:
    """Adds what the inputs hold that raw_records does not; returns the number of raw records now held
    for the cluster. (--full rebuilds what is derived from raw_records; raw_records itself only grows.)"""
    table = config.table(RAW_RECORDS)
    ensure_table(spark, table, raw_records_schema, partition_by=("cluster",), change_feed=True)
    partitions = [[as_source_file(file) for file in files] for files in discover_partitions(config.segment_paths)]
    known = file_states(spark, config)
    plan = plan_reads(partitions, known.states)
    if partitions:
        run.progress("ingest", f"{plan.summary()}; what raw_records holds of each file: {known.how}")
    rows = read_inputs(spark, config, run.run_id, plan)
    run.inputs = [*config.segment_paths, *config.raw_table_paths]
    computed = known.computed
    if rows is not None:
        add_rows(spark, config, rows, plan, run.run_id)
        computed += file_states(spark, config, known).computed  # noted as the table now stands: the next run's start
    run.counts["ingest_file_states_computed"] = computed
    return run.count_rows(RAW_RECORDS)


def add_rows(spark: SparkSession, config: Config, rows: DataFrame, plan: ReadPlan, run_id: str) -> None:
    """Adds to raw_records the records of `rows` it does not hold, and the resolved state of pending ones."""
    table = config.table(RAW_RECORDS)
    # Two copies of one record (a backup and the live log, a file read again) are one record. Finding
    # them joins the rows with the whole table, so it is done only where copies can exist; otherwise
    # the only records held already are pending ones whose transaction has resolved, or none.
    if plan.repeats_records or inputs_may_repeat_records(config) or holds_other_sources(spark, config):
        merge_raw_rows(spark, table, one_copy_per_record(rows), config.cluster)
    elif plan.has_pending:
        # Only a record at a position the table holds can be one it holds pending, now resolved: those few
        # are merged, every other record appended (a merge joins its whole source with the table: a
        # catch-up night's 46M records took it 14 minutes). The partitions holding a pending transaction
        # are read once, held on disk for both. Two commits, the merge first: a run killed between them
        # leaves the resolved states in and the new records out, and the next run reads each file on
        # from the last batch the table holds.
        waiting = [reads for reads in plan.partitions if _holds_pending(reads)]
        others = [reads for reads in plan.partitions if not _holds_pending(reads)]
        known = {read.path: read.known_through for reads in waiting for read in reads if read.known_through >= 0}
        waiting_rows = held_on_disk(read_partition_directories(spark, waiting, config.cluster, run_id))
        is_held = _is_held(known)
        resolved = waiting_rows.where(is_held).select(*RESOLVED_COLUMNS)
        if not resolved.isEmpty():
            merge_resolved_transactions(spark, table, resolved, config.cluster)
        new_rows = waiting_rows.where(~is_held)
        if others:
            new_rows = new_rows.unionByName(read_partition_directories(spark, others, config.cluster, run_id))
        new_rows.write.format("delta").mode("append").save(table_location(spark, table))
    else:
        rows.write.format("delta").mode("append").save(table_location(spark, table))


def _is_held(known_through: Mapping[str, int]) -> Column:
    """A raw row at a position the table holds of its file (file -> the last batch position held)."""
    held = [
        (F.col("source_file") == F.lit(path)) & F.coalesce(F.col("batch_position") <= F.lit(position), F.lit(False))
        for path, position in sorted(known_through.items())
    ]
    return functools.reduce(operator.or_, held, F.lit(False))


def _holds_pending(reads: Sequence[FileRead]) -> bool:
    return any(read.pending_from is not None for read in reads)


def one_copy_per_record(rows: DataFrame) -> DataFrame:
    """One row per record id: a copy whose transaction has resolved over a pending one (a backup cut
    before the marker beside the live log), otherwise the first by file, so that any run keeps the same."""
    preference = Window.partitionBy("cluster", "record_id").orderBy(
        F.coalesce(F.col("txn_state") == F.lit(TXN_PENDING), F.lit(False)).asc(),
        F.col("source_file").asc_nulls_last(),
        F.col("batch_position").asc_nulls_last(),
    )
    return rows.withColumn("_copy", F.row_number().over(preference)).where(F.col("_copy") == 1).drop("_copy")


def merge_raw_rows(spark: SparkSession, table: str, rows: DataFrame, cluster: str) -> None:
    """Inserts the records the table lacks and stamps held pending ones with their resolved state."""
    scope = f"target.cluster = {sql_string_literal(cluster)} AND target.record_id = source.record_id"
    resolved = f"target.txn_state = '{TXN_PENDING}' AND source.txn_state IN ('{TXN_COMMITTED}', '{TXN_ABORTED}')"
    merge = (
        DeltaTable.forName(spark, table)
        .alias("target")
        .merge(rows.alias("source"), scope)
        .whenMatchedUpdate(condition=resolved, set={"txn_state": "source.txn_state"})
        .whenNotMatchedInsertAll()
    )
    # Spark sizes a read of segment files by its list of tasks (a few rows), so it would broadcast the
    # records read: a catch-up night's 46M records filled the driver's heap. The table's side is sized
    # by its files, too large to broadcast anyway.
    with broadcast_joins_off(spark):
        merge.execute()
