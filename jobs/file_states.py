"""What raw_records holds from each segment file (jobs/ingest_plan.py reads on from it), kept up to date
from one ingest to the next instead of computed from every raw row each night.

Computing the states aggregates the file position of every segment row the cluster ever ingested: a
scan that grows with every night before. So they are kept in `ingest_file_states`, whose commit notes
the raw_records version they describe (jobs/watermarks.py), and an ingest brings them to the table's
current version through raw_records' Change Data Feed since then, at its start and again after its own
commits (so the next run's start finds them current). A file that only gained batches after
its last one (how a log grows) combines its state with the new rows; a file with rows updated (a
pending transaction resolved), deleted (raw retention, forget) or new rows at or before its last batch
(a torn batch read again) is computed again from the table's rows of that file. Without a note, with a
note ahead of the table (replaced) or a feed that no longer reaches back, every file is computed from
the table. The states are a function of raw_records at the noted version, written in one commit with
that note: a run killed anywhere leaves states of some earlier version, brought up to date like any.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.ingest_plan import FileState
from jobs.tables import RAW_RECORDS, ensure_table, table_location
from jobs.watermarks import (
    CHANGE_INSERT,
    ChangesUnavailable,
    changes_since,
    cluster_predicate,
    covered_versions,
    current_version,
    note,
    write_noted,
)
from schemas.ops import file_states_schema
from transforms.bronze import SOURCE_KIND_SEGMENT
from transforms.decoder.log_transactions import TXN_PENDING

FILE_STATES = "ingest_file_states"
STEP = "ingest"
STATE_COLUMNS = [
    "last_batch_position",
    "last_batch_base_offset",
    "is_last_batch_readable",
    "first_pending_position",
    "max_offset",
]


def _segment_rows(rows: DataFrame, config: Config) -> DataFrame:
    return rows.where(
        (F.col("cluster") == F.lit(config.cluster))
        & (F.col("source_kind") == F.lit(SOURCE_KIND_SEGMENT))
        & F.col("batch_position").isNotNull()
    )


def _state_aggregates() -> list[Column]:
    position, is_readable = F.col("batch_position"), F.col("read_error").isNull()
    return [
        F.max(position).alias("last_batch_position"),
        F.max_by("batch_base_offset", position).alias("last_batch_base_offset"),
        F.max_by(is_readable, position).alias("is_last_batch_readable"),
        F.min(F.when(F.col("txn_state") == F.lit(TXN_PENDING), position)).alias("first_pending_position"),
        F.max("source_offset").alias("max_offset"),
    ]


def _states_of(rows: DataFrame) -> dict[str, FileState]:
    collected = rows.groupBy("source_file").agg(*_state_aggregates()).collect()
    return {row["source_file"]: FileState(*(row[name] for name in STATE_COLUMNS)) for row in collected}


def _raw_at(spark: SparkSession, config: Config, version: int) -> DataFrame:
    rows = spark.read.format("delta").option("versionAsOf", version).table(config.table(RAW_RECORDS))
    return _segment_rows(rows, config)


def states_computed_at(spark: SparkSession, config: Config, version: int) -> dict[str, FileState]:
    """Every file's state computed from all of raw_records' rows at `version`: what carrying must equal."""
    return _states_of(_raw_at(spark, config, version))


@dataclass(frozen=True)
class KnownFiles:
    states: dict[str, FileState]
    computed: int  # files whose state this call computed from raw_records' rows (not carried)
    how: str  # for the run's progress line
    version: int | None = None  # the raw_records version the states describe, as noted


def file_states(spark: SparkSession, config: Config, known: KnownFiles | None = None) -> KnownFiles:
    """What raw_records holds now from each segment file of the cluster, noted in `ingest_file_states`.
    `known`: what this run's earlier call returned (noted since), so the table need not be read again."""
    raw = config.table(RAW_RECORDS)
    if not spark.catalog.tableExists(raw):
        return KnownFiles({}, 0, "no raw_records yet")
    now = current_version(spark, raw)
    if known is not None and known.version is not None:
        version, held = known.version, dict(known.states)
    else:
        covered = covered_versions(spark, config.table(FILE_STATES), STEP, config.cluster)
        version, held = (None if covered is None else covered.get(RAW_RECORDS)), None
    how = "computed from all of raw_records (none noted for its current version)"
    if version is not None and version <= now:
        try:
            states, computed = _brought_up_to_date(spark, config, version, now, held)
        except ChangesUnavailable as unavailable:
            how = f"computed from all of raw_records ({unavailable})"
        else:
            if version < now:
                _write(spark, config, states, note(STEP, config.cluster, {RAW_RECORDS: now}))
            how = f"carried from raw_records version {version}, {computed} file(s) computed again"
            return KnownFiles(states, computed, how, now)
    states = states_computed_at(spark, config, now)
    _write(spark, config, states, note(STEP, config.cluster, {RAW_RECORDS: now}))
    return KnownFiles(states, len(states), how if states else "no segment file read yet", now)


def _brought_up_to_date(
    spark: SparkSession, config: Config, version: int, now: int, held: dict[str, FileState] | None
) -> tuple[dict[str, FileState], int]:
    """The states at `version` (`held`, else as the table holds them) + raw_records' changes up to `now`,
    and how many files' states were computed again from the table (raises ChangesUnavailable)."""
    if held is None:
        rows = spark.table(config.table(FILE_STATES)).where(F.col("cluster") == F.lit(config.cluster)).collect()
        held = {row["source_file"]: FileState(*(row[name] for name in STATE_COLUMNS)) for row in rows}
    states = held
    if version == now:
        return states, 0
    changes = _segment_rows(changes_since(spark, config.table(RAW_RECORDS), version, now), config)
    is_insert = F.col("_change_type") == F.lit(CHANGE_INSERT)
    inserted = changes.withColumn("batch_position", F.when(is_insert, F.col("batch_position")))
    # One pass over the changes: each file's state from its inserted rows (used only when every change
    # of the file is an insert) and whether any of its rows changed otherwise.
    changed = (
        inserted.groupBy("source_file")
        .agg(
            *_state_aggregates(),
            F.min("batch_position").alias("first_inserted_position"),
            F.max(~is_insert).alias("has_other_changes"),
        )
        .collect()
    )
    computed_again = []
    for row in changed:
        path, before = row["source_file"], states.get(row["source_file"])
        appended = FileState(*(row[name] for name in STATE_COLUMNS))
        if row["has_other_changes"]:
            computed_again.append(path)
        elif before is None:
            states[path] = appended
        elif _first_inserted_after(before, row):
            states[path] = _combined(before, appended)
        else:
            computed_again.append(path)
    if computed_again:
        for path in computed_again:
            states.pop(path, None)
        states.update(_states_of(_raw_at(spark, config, now).where(F.col("source_file").isin(computed_again))))
    return states, len(computed_again)


def _first_inserted_after(before: FileState, change) -> bool:
    """Whether the file only gained batches after its last one: how a log grows (else: a torn batch read again)."""
    return change["first_inserted_position"] > before.last_batch_position


def _combined(before: FileState, after: FileState) -> FileState:
    """A file's state from its rows up to its last batch (`before`) and rows after it (`after`)."""
    first_pending = before.first_pending_position
    offsets = [offset for offset in (before.max_offset, after.max_offset) if offset is not None]
    return FileState(
        last_batch_position=after.last_batch_position,
        last_batch_base_offset=after.last_batch_base_offset,
        is_last_batch_readable=after.is_last_batch_readable,
        first_pending_position=after.first_pending_position if first_pending is None else first_pending,
        max_offset=max(offsets, default=None),
    )


def _write(spark: SparkSession, config: Config, states: dict[str, FileState], commit_note: str) -> None:
    table = config.table(FILE_STATES)
    ensure_table(spark, table, file_states_schema, partition_by=("cluster",))
    rows = [(config.cluster, path, *(getattr(state, name) for name in STATE_COLUMNS)) for path, state in states.items()]
    frame = spark.createDataFrame(rows, file_states_schema)
    write_noted(frame, table_location(spark, table), commit_note, cluster_predicate(config.cluster))
