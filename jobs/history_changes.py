"""What a history night reads of silver: each table as of the version its note will cover, and the rows
changed since the versions the history tables cover (Change Data Feed)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.tables import SILVER_INPUTS
from jobs.watermarks import changes_since

STEP = "history"
GROUP_RECORD_TABLES = ("group_metadata", "group_members", "consumer_group_records")


def silver_at(spark: SparkSession, config: Config, name: str, version: int) -> DataFrame:
    """One cluster's rows of a silver table as of `version` (what the run's note will say it covers)."""
    rows = spark.read.format("delta").option("versionAsOf", version).table(config.table(name))
    return rows.where(F.col("cluster") == F.lit(config.cluster))


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
