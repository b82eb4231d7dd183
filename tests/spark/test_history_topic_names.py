"""The topic id -> name pairs of the offset commits, kept night to night (jobs/history_topic_names.py):
a night adds its inserted commits' pairs; a night that deleted a commit with a topic id reads them all."""

from __future__ import annotations

from dataclasses import replace

from delta.tables import DeltaTable
from pyspark.sql import functions as F

from jobs.history_topic_names import commit_topic_names
from jobs.steps.decode import SILVER_SCHEMAS
from jobs.tables import ensure_table, table_location
from jobs.watermarks import current_version, note
from tests.gold_rows import CLUSTER, commit, commits

DATABASE = "commit_topic_names"
STEP = "history"


def night(spark, config, full: bool = False) -> tuple[set[tuple], bool]:
    """One run over the table as it stands: the pairs it returns, whether it continued."""
    table = config.table("offset_commits")
    until = current_version(spark, table)
    rows = spark.read.format("delta").option("versionAsOf", until).table(table)
    pairs, continued = commit_topic_names(
        spark, replace(config, full=full), STEP, rows, until, note(STEP, CLUSTER, {"offset_commits": until})
    )
    return {tuple(row) for row in pairs.collect()}, continued


def test_pairs_continue_from_the_table_until_a_commit_with_a_topic_id_is_deleted(spark, spark_config):
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    config = replace(spark_config, database=DATABASE, cluster=CLUSTER)
    table = config.table("offset_commits")
    ensure_table(spark, table, SILVER_SCHEMAS["offset_commits"], partition_by=("cluster",), change_feed=True)

    def append(*rows):
        commits(spark, list(rows)).write.format("delta").mode("append").save(table_location(spark, table))

    append(commit(1, 1, "g", "orders", 0, 5, topic_id="id-orders"), commit(2, 2, "classic", "orders", 0, 6))
    assert night(spark, config) == ({(CLUSTER, "id-orders", "orders")}, False)  # the first run reads all

    append(commit(3, 3, "g", "payments", 0, 1, topic_id="id-payments"), commit(4, 4, "g2", "orders", 1, 2))
    both = {(CLUSTER, "id-orders", "orders"), (CLUSTER, "id-payments", "payments")}
    assert night(spark, config) == (both, True)
    assert night(spark, config) == (both, True)  # nothing new

    # A commit without a topic id deleted: no pair can be gone.
    DeltaTable.forName(spark, table).delete(F.col("source_offset") == 2)
    assert night(spark, config) == (both, True)

    # The only commit naming id-payments deleted: the pairs are read from every commit again.
    DeltaTable.forName(spark, table).delete(F.col("source_offset") == 3)
    assert night(spark, config) == ({(CLUSTER, "id-orders", "orders")}, False)

    append(commit(5, 5, "g", "audit", 0, 1, topic_id="id-audit"))
    assert night(spark, config, full=True) == (
        {(CLUSTER, "id-orders", "orders"), (CLUSTER, "id-audit", "audit")},
        False,
    )
