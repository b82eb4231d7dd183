"""Decode: bronze `raw_records` -> silver tables and `quarantine`, checking raw = decoded + quarantined.

Both topics' records (`__consumer_offsets`, `__share_group_state`) are in raw_records; each lands in
its topic's tables. A table added by a groupscope update has no decode note yet, so the first run after
the update decodes every raw record again (into every table) and later runs go on incrementally."""

from __future__ import annotations

import functools

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import raw_changes
from jobs.config import Config
from jobs.raw_changes import LANDING_TABLES, RETIRED_ID_SUM, RETIRED_RECORDS, retention_versions
from jobs.runs import InvariantViolation, JobRun
from jobs.tables import RAW_RECORDS, cluster_rows, ensure_table, table_location
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
from schemas import silver as silver_tables
from schemas.bronze import raw_records_schema
from transforms import silver

TYPED_TABLES = tuple(name for name in LANDING_TABLES if name != "quarantine")
SILVER_SCHEMAS = {
    "offset_commits": silver_tables.offset_commits_schema,
    "group_metadata": silver_tables.group_metadata_schema,
    "group_members": silver_tables.group_members_schema,
    "member_assignments": silver_tables.member_assignments_schema,
    "consumer_group_records": silver_tables.consumer_group_records_schema,
    "share_group_state": silver_tables.share_group_state_schema,
    "quarantine": silver_tables.quarantine_schema,
}


DECODE = "decode"


def decode(spark: SparkSession, config: Config, run: JobRun) -> None:
    """Decodes the raw records no earlier run decoded (every one with --full, or for tables that have
    never been decoded into) and checks that nothing was lost."""
    raw_table = config.table(RAW_RECORDS)
    # A raw_records table of an earlier groupscope gains the columns decoding reads (source_topic).
    ensure_table(spark, raw_table, raw_records_schema, partition_by=("cluster",), change_feed=True)
    until = current_version(spark, raw_table)
    for name, schema in SILVER_SCHEMAS.items():
        ensure_table(spark, config.table(name), schema, partition_by=("cluster",), change_feed=True)
    covered = {name: covered_versions(spark, config.table(name), DECODE, config.cluster) for name in SILVER_SCHEMAS}
    if config.full or any(versions is None for versions in covered.values()):
        _decode_all(spark, config, run, until)
        return check_nothing_lost(spark, config, run)
    # Records retired from raw before the last decode from scratch are in no silver table.
    baseline = {key: covered["offset_commits"].get(key, 0) for key in (RETIRED_RECORDS, RETIRED_ID_SUM)}
    commit_note = note(DECODE, config.cluster, {RAW_RECORDS: until, **baseline})
    landed_before = {name: current_version(spark, config.table(name)) for name in LANDING_TABLES}
    try:
        own = _decode_changes(
            spark, config, run, {name: versions[RAW_RECORDS] for name, versions in covered.items()}, until, commit_note
        )
    except ChangesUnavailable as error:
        run.progress("decode", f"{error}: decoding every raw record again")
        _decode_all(spark, config, run, until, keeping_retired_since=baseline)
        own = None
    if own is None:
        check_nothing_lost(spark, config, run)
    else:
        check_nothing_lost(spark, config, run, own_records=own, landed_before=landed_before)


def _decode_all(
    spark: SparkSession, config: Config, run: JobRun, until: int, keeping_retired_since: dict[str, int] | None = None
) -> None:
    """Every raw record decoded into the silver tables, replacing the cluster's rows. `keeping_retired_since`
    (the retention totals silver was last decoded from scratch at): silver keeps its rows of the records
    raw retention has deleted since (a run whose change feed no longer reaches back), else they are lost."""
    raw = spark.read.format("delta").option("versionAsOf", until).table(config.table(RAW_RECORDS))
    raw = raw.where(F.col("cluster") == F.lit(config.cluster))
    kept = None
    if keeping_retired_since is not None:
        kept = raw_changes.retired_rows(spark, config, raw, keeping_retired_since, list(SILVER_SCHEMAS))
    if kept is not None:
        baseline = keeping_retired_since
        run.progress("decode", "silver keeps the rows of the records raw retention deleted")
    else:
        baseline = raw_changes.retired_so_far(spark, config)
        if baseline[RETIRED_RECORDS]:
            run.progress(
                "decode", f"from scratch: {baseline[RETIRED_RECORDS]:,} record(s) raw retention deleted are not in it"
            )
    commit_note = note(DECODE, config.cluster, {RAW_RECORDS: until, **baseline})
    _write_decoded(spark, config, run, raw, SILVER_SCHEMAS, commit_note, replace=True, kept=kept)
    run.counts["records_decoded"] = raw.count()


def _decode_changes(
    spark: SparkSession, config: Config, run: JobRun, covered: dict[str, int], until: int, commit_note: str
) -> tuple[int, int] | None:
    """Each silver table gets the raw records added since the version it covers, the new state of held
    records whose transaction resolved, and loses records deleted from raw (other than by retention).
    Returns the count and id sum of the raw records decoded, when every table covered the same version
    (else None: a run killed between tables; the check then reads every id)."""
    start = min(covered.values())
    if start >= until:
        run.counts["records_decoded"] = 0
        return (0, 0) if len(set(covered.values())) == 1 else None
    own = None
    changes = changes_since(spark, config.table(RAW_RECORDS), start, until).where(
        F.col("cluster") == F.lit(config.cluster)
    )
    retired = retention_versions(spark, config)
    for version in sorted(set(covered.values())):
        tables = [name for name, covered_version in covered.items() if covered_version == version]
        scoped = changes.where(F.col("_commit_version") > F.lit(version))
        revisited = raw_changes.revisited_records(scoped, retired)
        latest = raw_changes.latest_changes(scoped, retired, revisited)
        # Inserts are read again by each pass over them (as a first run reads raw), not held: a night's
        # records held took the memory the sorts after them needed (about 9M at the size).
        inserted = latest.inserted()
        if latest.revised is not None:
            resolved, deleted = latest.resolved(), latest.deleted()
            if "offset_commits" in tables and not resolved.isEmpty():
                raw_changes.merge_resolved_transactions(spark, config.table("offset_commits"), resolved, config.cluster)
            if not deleted.isEmpty():
                for name in tables:
                    raw_changes.delete_records(spark, config.table(name), deleted, config.cluster)
        _write_decoded(spark, config, run, inserted, tables, commit_note, replace=False)
        if version == start:
            own = _count_and_id_sum(inserted)
            run.counts["records_decoded"] = own[0]
    return own if len(set(covered.values())) == 1 else None


def _write_decoded(
    spark: SparkSession,
    config: Config,
    run: JobRun,
    raw: DataFrame,
    tables,
    commit_note: str,
    replace: bool,
    kept: dict[str, DataFrame] | None = None,
) -> None:
    """`raw` decoded into `tables`, appended or replacing the cluster's rows; with `kept` rows of each table
    written beside them."""
    # Two passes over the raw rows: the common offset commits (nearly every record, decoded by Spark
    # expressions) go straight to their table; the few others are decoded once, kept, and fanned out.
    commits = silver.decode_common_offset_commits(raw)
    others = silver.decode_other_records(raw).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        group_members = silver.explode_group_members(others)
        outputs = {
            "offset_commits": silver.filter_offset_commits(commits),
            "group_metadata": silver.filter_group_metadata(others),
            "group_members": group_members,
            "member_assignments": silver.explode_member_assignments(group_members),
            "consumer_group_records": silver.filter_consumer_group_records(others),
            "share_group_state": silver.filter_share_group_state(others),
            "quarantine": silver.filter_quarantine(others),
        }
        for name, rows in (kept or {}).items():
            outputs[name] = outputs[name].unionByName(rows.select(*outputs[name].columns))
        # Commits in files by partition, then time: the later steps read the commits from a time on, and
        # Delta skips every earlier night's file that ends before it; history reads one partition from
        # a time days back, and then skips the files of that night that hold other partitions. The few
        # others' commits (a pending transaction's among them) in a file of their own: the marker that
        # resolves a pending one rewrites that small file, not a large one.
        outputs["offset_commits"] = (
            outputs["offset_commits"]
            .repartitionByRange(F.col("source_partition"), F.col("record_at"))
            .unionByName(silver.filter_offset_commits(others).coalesce(1))
        )
        for name in tables:
            replace_where = cluster_predicate(config.cluster) if replace else None
            write_noted(outputs[name], table_location(spark, config.table(name)), commit_note, replace_where)
            run.progress(name, "written")
    finally:
        others.unpersist()


def _count_and_id_sum(rows: DataFrame) -> tuple[int, int]:
    row = rows.select(F.count(F.lit(1)).alias("rows"), raw_changes.record_id_hash_sum().alias("ids")).first()
    return row["rows"], int(row["ids"])


def check_nothing_lost(
    spark: SparkSession,
    config: Config,
    run: JobRun,
    own_records: tuple[int, int] | None = None,
    landed_before: dict[str, int] | None = None,
) -> None:
    """raw = decoded + quarantined, counted from the tables as written, and every raw record id in
    exactly one of the tables a record can land in. Records raw retention deleted since silver was
    last decoded from scratch count on raw's side (their running totals are in its retention commits).

    Counts read only the Parquet footers. Ids are summed (a column of the files): the counts add up, and
    the id sums show the ids are raw's own, none missing and none landed twice. With `own_records` (the
    count and id sum of the raw records this run decoded) and `landed_before` (each landing table's
    version before the run wrote), only this run's: the rows the run added to the landing tables
    (their change feed) must be exactly those records, so a night's check reads the night's rows.
    """
    own_check = own_records is not None and landed_before is not None
    counts, id_sums = _counts_and_id_sums(
        spark, config, (*SILVER_SCHEMAS, RAW_RECORDS), () if own_check else (RAW_RECORDS, *LANDING_TABLES)
    )
    run.counts.update(counts)
    retired_now = raw_changes.retired_so_far(spark, config)
    baseline = covered_versions(spark, config.table("offset_commits"), DECODE, config.cluster) or {}
    retired = {key: value - baseline.get(key, 0) for key, value in retired_now.items()}
    raw_count, quarantined = counts[RAW_RECORDS], counts["quarantine"]
    decoded_count = run.counts["decoded"] = sum(counts[name] for name in TYPED_TABLES)
    retired_count = retired[raw_changes.RETIRED_RECORDS]
    kept_apart = f" (+ {retired_count:,} retired from raw)" if retired_count else ""
    run.progress("check", f"raw {raw_count:,}{kept_apart} = decoded {decoded_count:,} + quarantined {quarantined:,}")
    if raw_count + retired_count != decoded_count + quarantined:
        raise InvariantViolation(
            f"raw records {raw_count}{kept_apart} != decoded {decoded_count} + quarantined {quarantined}"
        )
    if own_check:
        if _count_and_id_sum(_added_since(spark, config, landed_before)) != own_records:
            raise InvariantViolation(
                f"the rows this run added to the silver tables and quarantine are not the {own_records[0]:,} raw "
                "records it decoded: one landed twice or in two tables, or another nowhere"
            )
        return
    raw_ids = id_sums[RAW_RECORDS] + retired[raw_changes.RETIRED_ID_SUM]
    if raw_ids != sum(id_sums[name] for name in LANDING_TABLES):
        raise InvariantViolation(
            "the record ids in the silver tables and quarantine are not those of raw_records: "
            "one record landed twice and another nowhere"
        )


def _counts_and_id_sums(
    spark: SparkSession, config: Config, counted: tuple[str, ...], summed: tuple[str, ...]
) -> tuple[dict[str, int], dict[str, int]]:
    """The cluster's rows of each `counted` table, and the record id sum of each `summed` one, in one Spark
    job (a job per table costs about a second)."""
    no_sum = F.lit(0).cast("decimal(38,0)")
    aggregated = functools.reduce(
        DataFrame.unionByName,
        [
            cluster_rows(spark, config, name)
            .agg(
                F.count(F.lit(1)).alias("rows"),
                (raw_changes.record_id_hash_sum() if name in summed else no_sum).alias("ids"),
            )
            .select(F.lit(name).alias("table"), "rows", "ids")
            for name in dict.fromkeys((*counted, *summed))
        ],
    ).collect()
    return (
        {row["table"]: row["rows"] for row in aggregated if row["table"] in counted},
        {row["table"]: int(row["ids"]) for row in aggregated if row["table"] in summed},
    )


def _added_since(spark: SparkSession, config: Config, versions: dict[str, int]) -> DataFrame:
    """The record ids of the cluster's rows inserted into each table after its version in `versions`."""
    added = spark.createDataFrame([], "record_id string")
    for name, version in versions.items():
        table = config.table(name)
        now = current_version(spark, table)
        if now > version:
            changes = changes_since(spark, table, version, now).where(
                (F.col("cluster") == F.lit(config.cluster)) & (F.col("_change_type") == F.lit(CHANGE_INSERT))
            )
            added = added.unionByName(changes.select("record_id"))
    return added
