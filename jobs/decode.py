"""Decode: bronze `raw_records` -> silver tables and `quarantine`, checking raw = decoded + quarantined.

    spark-submit.sh decode [--conf conf/<env>.toml] [--cluster NAME]

Each silver table's rows for the cluster are replaced atomically, so a re-run (or a run after a
crash) leaves the same tables.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config, parse_config
from jobs.ingest import RAW_RECORDS
from jobs.runs import InvariantViolation, JobRun
from jobs.session import build_session
from jobs.tables import ensure_table, replace_cluster_rows
from schemas import tables
from transforms import silver

TYPED_TABLES = ("offset_commits", "group_metadata", "consumer_group_records")
SILVER_SCHEMAS = {
    "offset_commits": tables.offset_commits_schema,
    "group_metadata": tables.group_metadata_schema,
    "group_members": tables.group_members_schema,
    "member_assignments": tables.member_assignments_schema,
    "consumer_group_records": tables.consumer_group_records_schema,
    "quarantine": tables.quarantine_schema,
}


def decode(spark: SparkSession, config: Config, run: JobRun) -> None:
    raw = spark.table(config.table(RAW_RECORDS)).where(F.col("cluster") == F.lit(config.cluster))
    # Two passes over raw_records: the common offset commits (nearly every record, decoded by Spark
    # expressions) go straight to their table; the few others are decoded once, kept, and fanned out.
    commits = silver.decode_raw_records(raw, silver.COMMON_OFFSET_COMMITS)
    others = silver.decode_raw_records(raw, silver.OTHER_RECORDS).persist(StorageLevel.MEMORY_AND_DISK)
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


def check_nothing_lost(spark: SparkSession, config: Config, run: JobRun) -> None:
    """raw = decoded + quarantined, counted from the tables as written, and no record in two places.

    Each table is counted on its own (Delta answers a count from its log); one distinct count over the
    record ids of the tables a record can land in shows that none landed twice.
    """

    def cluster_rows(name: str) -> DataFrame:
        return spark.table(config.table(name)).where(F.col("cluster") == F.lit(config.cluster))

    counts = {name: cluster_rows(name).count() for name in (*SILVER_SCHEMAS, RAW_RECORDS)}
    run.counts.update(counts)
    landed = [cluster_rows(name).select("record_id") for name in (*TYPED_TABLES, "quarantine")]
    distinct_landed = reduce(DataFrame.unionByName, landed).distinct().count()
    raw_count, quarantined = counts[RAW_RECORDS], counts["quarantine"]
    decoded_count = run.counts["decoded"] = sum(counts[name] for name in TYPED_TABLES)
    run.progress("check", f"raw {raw_count:,} = decoded {decoded_count:,} + quarantined {quarantined:,}")
    if raw_count != decoded_count + quarantined or distinct_landed != raw_count:
        raise InvariantViolation(
            f"raw records {raw_count} != decoded {decoded_count} + quarantined {quarantined} "
            f"(distinct record ids across silver tables: {distinct_landed})"
        )


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_config(argv, __doc__)
    spark = build_session(config, "groupscope-decode")
    try:
        with JobRun(spark, config, "decode") as run:
            decode(spark, config, run)
        return run.exit_code
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
