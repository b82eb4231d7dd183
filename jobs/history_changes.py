"""What a history night starts from: the silver versions the gold tables cover, the silver rows changed
since then (Change Data Feed), and the groups those changes can alter (transforms/gold/touched.py)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.tables import HISTORY_TABLES, SILVER_INPUTS
from jobs.watermarks import changes_since, covered_versions
from transforms.gold import touched

STEP = "history"
GROUP_RECORD_TABLES = ("group_metadata", "group_members", "consumer_group_records")


def silver_at(spark: SparkSession, config: Config, name: str, version: int) -> DataFrame:
    """One cluster's rows of a silver table as of `version` (what the run's note will say it covers)."""
    rows = spark.read.format("delta").option("versionAsOf", version).table(config.table(name))
    return rows.where(F.col("cluster") == F.lit(config.cluster))


def covered_silver_versions(spark: SparkSession, config: Config, until: Mapping[str, int]) -> dict[str, int] | None:
    """The silver versions every gold table covers (the oldest note of each input: a crash may have left
    some tables a run ahead); None when a table has no note or a note is ahead of silver (replaced)."""
    covered: dict[str, int] = {}
    for name in HISTORY_TABLES:
        noted = covered_versions(spark, config.table(name), STEP, config.cluster)
        if noted is None or set(noted) != set(SILVER_INPUTS):
            return None
        for table, version in noted.items():
            covered[table] = min(covered.get(table, version), version)
    if any(covered[name] > until[name] for name in SILVER_INPUTS):
        return None
    return covered


def silver_changes(
    spark: SparkSession, config: Config, covered: Mapping[str, int], until: Mapping[str, int]
) -> dict[str, DataFrame]:
    """Each silver input's rows changed since `covered` (raises ChangesUnavailable)."""
    return {
        name: changes_since(spark, config.table(name), covered[name], until[name]).where(
            F.col("cluster") == F.lit(config.cluster)
        )
        for name in SILVER_INPUTS
        if until[name] > covered[name]
    }


def touched_groups(changes: Mapping[str, DataFrame], history: Mapping[str, DataFrame], names: DataFrame) -> DataFrame:
    """The groups whose history the changes can alter (see transforms/gold/touched.py); the commits' changes
    as touched.commit_change_summary."""
    found = [touched.groups_of(changes[name]) for name in GROUP_RECORD_TABLES if name in changes]
    if "offset_commits" in changes:
        found.append(touched.groups_with_commits_seen_by_rebalances(changes["offset_commits"], history["rebalances"]))
    found.append(touched.groups_with_renamed_topics(history["generations"], names))
    result = found[0]
    for more in found[1:]:
        result = result.unionByName(more)
    return result.distinct()
