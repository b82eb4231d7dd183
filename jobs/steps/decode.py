"""Decode: bronze `raw_records` -> silver tables and `quarantine`, checking raw = decoded + quarantined."""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.runs import InvariantViolation, JobRun
from jobs.tables import RAW_RECORDS, cluster_rows, ensure_table, replace_cluster_rows
from schemas import silver as silver_tables
from transforms import silver

TYPED_TABLES = ("offset_commits", "group_metadata", "consumer_group_records")
LANDING_TABLES = (*TYPED_TABLES, "quarantine")  # every raw record lands in exactly one
SILVER_SCHEMAS = {
    "offset_commits": silver_tables.offset_commits_schema,
    "group_metadata": silver_tables.group_metadata_schema,
    "group_members": silver_tables.group_members_schema,
    "member_assignments": silver_tables.member_assignments_schema,
    "consumer_group_records": silver_tables.consumer_group_records_schema,
    "quarantine": silver_tables.quarantine_schema,
}


def decode(spark: SparkSession, config: Config, run: JobRun) -> None:
    raw = cluster_rows(spark, config, RAW_RECORDS)
    # Two passes over raw_records: the common offset commits (nearly every record, decoded by Spark
    # expressions) go straight to their table; the few others are decoded once, kept, and fanned out.
    commits = silver.decode_common_offset_commits(raw)
    others = silver.decode_other_records(raw).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        group_members = silver.explode_group_members(others)
        outputs = {
            "offset_commits": silver.filter_offset_commits(commits).unionByName(silver.filter_offset_commits(others)),
            "group_metadata": silver.filter_group_metadata(others),
            "group_members": group_members,
            "member_assignments": silver.explode_member_assignments(group_members),
            "consumer_group_records": silver.filter_consumer_group_records(others),
            "quarantine": silver.filter_quarantine(others),
        }
        for name, rows in outputs.items():
            table = config.table(name)
            ensure_table(spark, table, SILVER_SCHEMAS[name], partition_by=("cluster",))
            replace_cluster_rows(spark, table, rows, config.cluster)
            run.progress(name, "written")
    finally:
        others.unpersist()
    check_nothing_lost(spark, config, run)


def _count_and_id_sum(rows: DataFrame) -> tuple[int, int]:
    """Row count, and the sum of a 64-bit hash of each record id (exact, as a decimal): equal sums over
    two collections of ids mean the same ids, unless hashes collide, without a shuffle or a sort."""
    hashed = F.xxhash64("record_id").cast("decimal(38,0)")
    row = rows.select(F.count(F.lit(1)).alias("rows"), F.coalesce(F.sum(hashed), F.lit(0)).alias("ids")).first()
    return row["rows"], int(row["ids"])


def check_nothing_lost(spark: SparkSession, config: Config, run: JobRun) -> None:
    """raw = decoded + quarantined, counted from the tables as written, and every raw record id in
    exactly one of the tables a record can land in.

    Each table is read once, its record ids only (a column of its Parquet files): the counts add up,
    and the id sums show the ids are raw's own, none missing and none landed twice.
    """
    counts = {name: cluster_rows(spark, config, name).count() for name in SILVER_SCHEMAS if name not in LANDING_TABLES}
    landed = {name: _count_and_id_sum(cluster_rows(spark, config, name)) for name in (*LANDING_TABLES, RAW_RECORDS)}
    counts.update({name: count for name, (count, _) in landed.items()})
    run.counts.update(counts)
    raw_count, quarantined = counts[RAW_RECORDS], counts["quarantine"]
    decoded_count = run.counts["decoded"] = sum(counts[name] for name in TYPED_TABLES)
    raw_ids, landed_ids = landed[RAW_RECORDS][1], sum(landed[name][1] for name in LANDING_TABLES)
    run.progress("check", f"raw {raw_count:,} = decoded {decoded_count:,} + quarantined {quarantined:,}")
    if raw_count != decoded_count + quarantined:
        raise InvariantViolation(f"raw records {raw_count} != decoded {decoded_count} + quarantined {quarantined}")
    if raw_ids != landed_ids:
        raise InvariantViolation(
            "the record ids in the silver tables and quarantine are not those of raw_records: "
            "one record landed twice and another nowhere"
        )
