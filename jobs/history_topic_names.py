"""The topic id -> name pairs the cluster's offset commits carry, kept from one history run to the next.

KIP-848 groups name their partitions by topic id, and a v4 offset commit names one (transforms/gold/
topic_names.py ranks it among the other sources). A broker that writes ids writes one with every commit,
so finding the pairs read every commit the cluster ever had, each night: the one read of the history step
that grew with the table (docs/bench-log.md, fifteenth session). The pairs are few and kept here instead; a
night adds those of the commits it inserted. A night that deleted commits (a forget) reads all of them
again, since a pair may have lost its last commit.

The table's commits carry the history step's note, which says the offset_commits version the pairs
cover; it is read on its own, apart from the gold tables' notes: whatever run wrote it last, and however
far the gold tables got in a run that crashed, the pairs continue from the version they cover.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.tables import cluster_rows, ensure_table, materialized, table_location
from jobs.watermarks import (
    CHANGE_DELETE,
    ChangesUnavailable,
    changes_since,
    cluster_predicate,
    covered_versions,
    write_noted,
)
from schemas.ops import commit_topic_names_schema

TABLE = "commit_topic_names"
COMMITS = "offset_commits"
_PAIR = ("cluster", "topic_id", "topic")


def commit_topic_names(
    spark: SparkSession, config: Config, step: str, commits: DataFrame, until: int, commit_note: str
) -> tuple[DataFrame, bool]:
    """The pairs of `commits` (the cluster's offset_commits as of version `until`), stored with
    `commit_note` and returned as stored, and whether they continued from the table: read from it and the
    commits added since it was last written when it can be; from all of `commits` on `--full`, the first
    run, or a night that deleted some."""
    table = config.table(TABLE)
    ensure_table(spark, table, commit_topic_names_schema, partition_by=("cluster",))
    continued = None if config.full else _continued(spark, config, step, until)
    pairs = _pairs(commits) if continued is None else continued
    write_noted(materialized(pairs), table_location(spark, table), commit_note, cluster_predicate(config.cluster))
    return materialized(cluster_rows(spark, config, TABLE)), continued is not None


def _pairs(commits: DataFrame) -> DataFrame:
    return commits.where(F.col("topic_id").isNotNull() & F.col("topic").isNotNull()).select(*_PAIR).distinct()


def _continued(spark: SparkSession, config: Config, step: str, until: int) -> DataFrame | None:
    """The stored pairs and those of the commits inserted since; None when the table cannot answer."""
    noted = covered_versions(spark, config.table(TABLE), step, config.cluster)
    covered = None if noted is None else noted.get(COMMITS)
    if covered is None or covered > until:  # never written, or offset_commits was replaced since
        return None
    stored = cluster_rows(spark, config, TABLE)
    if covered == until:
        return stored
    try:
        changes = changes_since(spark, config.table(COMMITS), covered, until)
    except ChangesUnavailable:
        return None
    changed = materialized(
        changes.where(F.col("cluster") == F.lit(config.cluster))
        .select(*_PAIR, (F.col("_change_type") == F.lit(CHANGE_DELETE)).alias("is_deleted"))
        .where(F.col("topic_id").isNotNull() & F.col("topic").isNotNull())
        .distinct()
    )
    if not changed.where("is_deleted").isEmpty():
        return None
    return stored.unionByName(changed.select(*_PAIR)).distinct()
