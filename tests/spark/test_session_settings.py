"""Settings of the session every job builds (conf/defaults.toml [spark.conf]) that the plans depend on."""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame

RUNTIME_BLOOM_FILTER = "spark.sql.optimizer.runtime.bloomFilter.enabled"


def executed_plan(rows: DataFrame) -> str:
    return rows._jdf.queryExecution().executedPlan().toString()


def test_a_checkpointed_join_gets_no_runtime_bloom_filter(spark):
    """Ten rows joined six times and checkpointed, as the history step checkpoints its joins: Spark without
    statistics estimates the product of the sides (tens of GB), which made it filter the next shuffle join
    with a bloom filter of a million items, a subquery result carried in every task (conf/defaults.toml)."""
    wide = functools.reduce(lambda left, right: left.join(right, "id"), [spark.range(10)] * 6).localCheckpoint()
    assert wide._jdf.queryExecution().optimizedPlan().stats().sizeInBytes() > 10 * 2**30

    def joined() -> DataFrame:  # planned anew each time: a DataFrame keeps its first plan
        return wide.join(spark.range(100).where("id % 7 = 0"), "id")

    broadcast_threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # a shuffle join, as the history's are
    try:
        assert spark.conf.get(RUNTIME_BLOOM_FILTER) == "false"
        assert "might_contain" not in executed_plan(joined())
        assert sorted(row.id for row in joined().collect()) == [0, 7]
        spark.conf.set(RUNTIME_BLOOM_FILTER, "true")  # what the setting keeps out
        assert "might_contain" in executed_plan(joined())
    finally:
        spark.conf.set(RUNTIME_BLOOM_FILTER, "false")
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", broadcast_threshold)
