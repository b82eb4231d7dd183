"""What changed in raw_records since a version, as decode applies it to the silver tables.

A raw record is inserted once; later it may be updated (its transaction's marker was read: txn_state
goes from pending to committed or aborted) or deleted. Deletes by raw retention are not undone
downstream (the history outlives raw records, see `retire`); any other delete removes the record's
rows from silver. Retention commits carry a running total of the records they deleted and of their
ids' hashes, so that raw = decoded + quarantined can still be checked once raw has been trimmed.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.delta_tables import DeltaTable
from jobs.runs import InvariantViolation
from jobs.tables import RAW_RECORDS, cluster_rows, held_on_disk, sql_string_literal
from jobs.watermarks import CHANGE_DELETE, CHANGE_INSERT, note, notes, noting
from transforms.decoder.log_transactions import TXN_PENDING

RETENTION = "retention"
RETIRED_RECORDS, RETIRED_ID_SUM = "retired_records", "retired_id_sum"
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp", "is_inserted", "is_deleted")
# What merge_resolved_transactions reads of each resolved record.
# The tables a raw record lands in, exactly one each (jobs.steps.decode checks it).
LANDING_TABLES = ("offset_commits", "group_metadata", "consumer_group_records", "share_group_state", "quarantine")
RESOLVED_COLUMNS = ("record_id", "txn_state", "source_partition", "source_offset", "record_at")
# Up to this many revisited records (record ids) are broadcast; more (a large forget) are joined by a shuffle.
BROADCAST_REVISITED_MAX = 200_000


def record_id_hash_sum() -> Column:
    """The sum of a 64-bit hash of each record id, exact (decimal(38,0)): equal sums over two collections
    of ids mean the same ids, unless hashes collide, without a shuffle or a sort.

    Summed as four 16-bit slices in longs (exact up to 2^47 rows), then put together: a decimal sum of
    each hash took twice the CPU, a tenth of a night's decode check."""
    hashed = F.xxhash64("record_id")
    slices = [F.shiftright(hashed, 48)] + [F.shiftright(hashed, shift).bitwiseAND(0xFFFF) for shift in (32, 16, 0)]
    total = sum(
        (F.coalesce(F.sum(piece), F.lit(0)).cast("decimal(38,0)") * F.lit(2**shift).cast("decimal(38,0)"))
        for piece, shift in zip(slices, (48, 32, 16, 0), strict=True)
    )
    return total.cast("decimal(38,0)")


def retention_versions(spark: SparkSession, config: Config) -> list[int]:
    return [version for version, _ in notes(spark, config.table(RAW_RECORDS), RETENTION, config.cluster)]


def retired_so_far(spark: SparkSession, config: Config) -> dict[str, int]:
    """Running totals of the records raw retention has deleted for the cluster (none: zeros)."""
    found = notes(spark, config.table(RAW_RECORDS), RETENTION, config.cluster)
    return found[0][1] if found else {RETIRED_RECORDS: 0, RETIRED_ID_SUM: 0}


def retire(spark: SparkSession, config: Config, condition: Column) -> int:
    """Deletes the cluster's raw records matching `condition` (raw retention), noting the running totals
    in the same commit; returns how many were deleted.

    Kept whatever their age: each segment file's last batch (where the next ingest reads on from, see
    jobs.ingest_plan) and pending transactional records (their marker may come in a later read).
    """
    table = config.table(RAW_RECORDS)
    rows = spark.table(table).where(F.col("cluster") == F.lit(config.cluster))
    last_batches = rows.groupBy("source_file").agg(F.max("batch_position").alias("batch_position"))
    doomed = (
        rows.where(condition & ~F.coalesce(F.col("txn_state") == F.lit(TXN_PENDING), F.lit(False)))
        .join(last_batches, on=["source_file", "batch_position"], how="left_anti")
        .select("record_id")
        .localCheckpoint(eager=True)
    )
    row = doomed.select(F.count(F.lit(1)).alias("rows"), record_id_hash_sum().alias("ids")).first()
    if row["rows"] == 0:
        return 0
    before = retired_so_far(spark, config)
    totals = {
        RETIRED_RECORDS: before[RETIRED_RECORDS] + row["rows"],
        RETIRED_ID_SUM: before[RETIRED_ID_SUM] + int(row["ids"]),
    }
    with noting(spark, note(RETENTION, config.cluster, totals)):
        delete_records(spark, table, doomed, config.cluster)
    return row["rows"]


def retired_rows(
    spark: SparkSession, config: Config, raw: DataFrame, baseline: Mapping[str, int], tables: Sequence[str]
) -> dict[str, DataFrame] | None:
    """Each of `tables`' rows of the records raw retention deleted since `baseline` (the running totals
    when silver was last decoded from scratch), so that silver decoded from `raw` again keeps them: the
    records the landing tables hold and raw does not. None when retention deleted none since.

    Raises InvariantViolation when those are not exactly the records retention deleted (their count and
    id sum): a forget's records whose decode never ran are among them, and which to keep cannot be told."""
    now = retired_so_far(spark, config)
    retired = {key: now[key] - baseline.get(key, 0) for key in (RETIRED_RECORDS, RETIRED_ID_SUM)}
    if retired[RETIRED_RECORDS] == 0:
        return None
    raw_ids = raw.select("record_id")
    held = functools.reduce(
        DataFrame.unionByName, [cluster_rows(spark, config, name).select("record_id") for name in LANDING_TABLES]
    )
    gone = held.join(raw_ids, on="record_id", how="left_anti")
    found = gone.agg(F.count(F.lit(1)).alias("rows"), record_id_hash_sum().alias("ids")).first()
    if (found["rows"], int(found["ids"])) != (retired[RETIRED_RECORDS], retired[RETIRED_ID_SUM]):
        raise InvariantViolation(
            f"silver holds {found['rows']:,} record(s) raw_records no longer does, not the"
            f" {retired[RETIRED_RECORDS]:,} raw retention deleted since silver was decoded from scratch (a forget"
            " whose decode never ran?), and raw's change feed no longer tells them apart: `nightly --full`"
            " decodes silver from what raw holds, without the history of the records retention deleted"
        )
    return {name: cluster_rows(spark, config, name).join(raw_ids, on="record_id", how="left_anti") for name in tables}


def _kept(changes: DataFrame, retired_versions: list[int]) -> DataFrame:
    return changes.where(
        ~((F.col("_change_type") == F.lit(CHANGE_DELETE)) & F.col("_commit_version").isin(retired_versions))
    )


def revisited_records(changes: DataFrame, retired_versions: list[int]) -> DataFrame:
    """(record_id, source_partition, source_offset) of the records with a change other than their insert
    in this range (a transaction resolved, a delete other than by retention), materialised: nearly always
    none, or a few."""
    kept = _kept(changes, retired_versions)
    revised = kept.where(F.col("_change_type") != F.lit(CHANGE_INSERT))
    return revised.select("record_id", "source_partition", "source_offset").distinct().localCheckpoint()


def _positions_of(records: DataFrame) -> Column:
    """A condition every change of `records` meets (a record's changes all hold its log position): each
    source partition's offset range, which the night's appended files' statistics can skip by."""
    spans = (
        records.groupBy("source_partition")
        .agg(
            F.min("source_offset").alias("low"),
            F.max("source_offset").alias("high"),
            F.max(F.col("source_offset").isNull()).alias("has_unplaced"),
        )
        .collect()
    )
    if any(span["source_partition"] is None or span["has_unplaced"] for span in spans):
        return F.lit(True)
    in_span = [
        (F.col("source_partition") == F.lit(span["source_partition"]))
        & F.col("source_offset").between(F.lit(span["low"]), F.lit(span["high"]))
        for span in spans
    ]
    return functools.reduce(operator.or_, in_span, F.lit(False))


@dataclass(frozen=True)
class LatestChanges:
    """Each changed record's newest image in a range of raw changes (`rows`, with `is_inserted`: first
    inserted in this range, and `is_deleted`: its newest change is a delete other than by retention).
    `revised`: the rows of the records with a change besides their insert, held on disk; None when there
    are none, so that nothing is read to find the resolved and the deleted."""

    rows: DataFrame
    revised: DataFrame | None

    def inserted(self) -> DataFrame:
        """The records first inserted in the range and still held (one deleted again in it is not)."""
        return self.rows.where(F.col("is_inserted") & ~F.col("is_deleted")).drop(*CHANGE_COLUMNS)

    def resolved(self) -> DataFrame:
        """Held records whose transaction resolved (RESOLVED_COLUMNS); only `revised` can hold one."""
        return self._revised().where(~F.col("is_inserted") & ~F.col("is_deleted")).select(*RESOLVED_COLUMNS)

    def deleted(self) -> DataFrame:
        """The record ids of held records deleted (other than by retention); only `revised` can hold one."""
        return self._revised().where(F.col("is_deleted") & ~F.col("is_inserted")).select("record_id")

    def _revised(self) -> DataFrame:
        if self.revised is None:
            raise ValueError("no record changed besides its insert: there is nothing resolved or deleted to read")
        return self.revised


def latest_changes(changes: DataFrame, retired_versions: list[int], revisited: DataFrame) -> LatestChanges:
    """Each changed record's newest image (see LatestChanges). `revisited`: revisited_records.

    Nearly every change is a plain insert of a record that changed no more in the range: those pass as
    they are, and only the records with another change are ranked, so that a night's payloads are not
    shuffled and sorted by record id (nor, on a night of nothing but inserts, joined at all). The ranked
    rows are held on disk: decode reads them for the resolved, the deleted and the inserted records,
    and only them for the first two (asked of every row, a 50M-record night read its payloads twice to
    find none). A few revisited records are sent whole to each task, so the inserts are filtered where
    they are read: joined the usual way, a night with one resolved transaction shuffled all its payloads
    (a third of its decode at 10M records); and only those inserted in the range filter them."""
    kept = _kept(changes, retired_versions)
    is_insert = F.col("_change_type") == F.lit(CHANGE_INSERT)
    inserts = kept.where(is_insert).withColumns({"is_inserted": F.lit(True), "is_deleted": F.lit(False)})
    if revisited.isEmpty():
        return LatestChanges(inserts, None)
    ids = revisited.select("record_id")
    ids = F.broadcast(ids) if revisited.count() <= BROADCAST_REVISITED_MAX else ids
    newest_first = Window.partitionBy("record_id").orderBy(
        F.col("_commit_version").desc(), (F.col("_change_type") == F.lit(CHANGE_DELETE)).asc()
    )
    whole = Window.partitionBy("record_id").rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    ranked = held_on_disk(
        kept.where(_positions_of(revisited))
        .join(ids, on="record_id", how="left_semi")
        .withColumns(
            {
                "is_inserted": F.max(is_insert).over(whole),
                "is_deleted": F.col("_change_type") == F.lit(CHANGE_DELETE),
                "_rank": F.row_number().over(newest_first),
            }
        )
        .where(F.col("_rank") == 1)
        .drop("_rank")
    )
    # Only a revisited record first inserted in this range has an insert among `inserts` (one inserted on an
    # earlier night and resolved now has none): nearly always none, and then no insert is joined at all.
    inserted_again = ranked.where(F.col("is_inserted")).select("record_id")
    if inserted_again.isEmpty():
        return LatestChanges(inserts.unionByName(ranked), ranked)
    again = F.broadcast(inserted_again) if inserted_again.count() <= BROADCAST_REVISITED_MAX else inserted_again
    return LatestChanges(inserts.join(again, on="record_id", how="left_anti").unionByName(ranked), ranked)


def merge_resolved_transactions(spark: SparkSession, table: str, resolved: DataFrame, cluster: str) -> None:
    """Held pending records (raw_records, offset_commits) take the state their transaction's marker gave them.

    `resolved` (record_id, txn_state, source_partition, source_offset, record_at): the merge names the
    offsets and times the resolved records hold, so that Delta reads only the files whose statistics
    reach them (txn_state has none: without this every night's merge read the whole table)."""
    resolved = resolved.localCheckpoint()
    (
        DeltaTable.forName(spark, table)
        .alias("target")
        .merge(
            resolved.select("record_id", "txn_state").alias("source"),
            f"target.cluster = {sql_string_literal(cluster)} AND {_held_where(resolved)}"
            f" AND target.txn_state = '{TXN_PENDING}' AND target.record_id = source.record_id",
        )
        .whenMatchedUpdate(set={"txn_state": "source.txn_state"})
        .execute()
    )


def _held_where(records: DataFrame) -> str:
    """A condition on the target's indexed columns that every row of `records` meets: each source
    partition's offset range, and the time range when every record has a time."""
    spans = (
        records.groupBy("source_partition")
        .agg(
            F.min("source_offset").alias("low"),
            F.max("source_offset").alias("high"),
            F.min("record_at").cast("string").alias("first_at"),  # in the session's time zone, as literals are read
            F.max("record_at").cast("string").alias("last_at"),
            F.max(F.col("record_at").isNull()).alias("has_untimed"),
        )
        .collect()
    )
    by_partition = " OR ".join(
        f"(target.source_partition = {span['source_partition']}"
        f" AND target.source_offset BETWEEN {span['low']} AND {span['high']})"
        for span in spans
        if span["source_partition"] is not None
    )
    if not spans or any(span["source_partition"] is None for span in spans):
        return "true"
    if any(span["has_untimed"] for span in spans):
        return f"({by_partition})"
    first = min(span["first_at"] for span in spans)
    last = max(span["last_at"] for span in spans)
    return f"({by_partition}) AND target.record_at BETWEEN TIMESTAMP '{first}' AND TIMESTAMP '{last}'"


def delete_records(spark: SparkSession, table: str, deleted: DataFrame, cluster: str) -> None:
    (
        DeltaTable.forName(spark, table)
        .alias("target")
        .merge(
            deleted.alias("source"),
            f"target.cluster = {sql_string_literal(cluster)} AND target.record_id = source.record_id",
        )
        .whenMatchedDelete()
        .execute()
    )
