"""Rebalance frequency per group per hour and per day, and rebalance storms.

Grain: one (group, period, period_start) with at least one rebalance; `period` is 'hour' or 'day'
(UTC). An hour is a storm when it holds at least `storm_rebalances_per_hour` rebalances; a day is a
storm when any of its hours is.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from schemas import gold

PERIOD_HOUR, PERIOD_DAY = "hour", "day"


def rebalance_frequency(rebalances: DataFrame, storm_rebalances_per_hour: int) -> DataFrame:
    """gold rebalances -> gold rebalance_frequency."""
    hours = (
        rebalances.groupBy("cluster", "group_id", F.date_trunc("hour", "completed_at").alias("period_start"))
        .agg(
            F.count(F.lit(1)).cast("int").alias("rebalance_count"),
            F.sum("moved_partition_count").cast("int").alias("moved_partition_count"),
        )
        .withColumn("is_storm", F.col("rebalance_count") >= F.lit(storm_rebalances_per_hour))
        .withColumns({"period": F.lit(PERIOD_HOUR), "storm_hour_count": F.col("is_storm").cast("int")})
    )
    days = (
        hours.groupBy("cluster", "group_id", F.date_trunc("day", "period_start").alias("period_start"))
        .agg(
            F.sum("rebalance_count").cast("int").alias("rebalance_count"),
            F.sum("moved_partition_count").cast("int").alias("moved_partition_count"),
            F.sum("storm_hour_count").cast("int").alias("storm_hour_count"),
        )
        .withColumns({"period": F.lit(PERIOD_DAY), "is_storm": F.col("storm_hour_count") > 0})
    )
    columns = [field.name for field in gold.rebalance_frequency_schema.fields]
    return hours.select(*columns).unionByName(days.select(*columns))
