"""Settings of the session every job builds (conf/defaults.toml [spark.conf]) that the plans depend on."""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.config import load_config
from tests.small_data import SHORT_JVM_OPTIONS, SUBMIT_OPTIONS_VARIABLE

RUNTIME_BLOOM_FILTER = "spark.sql.optimizer.runtime.bloomFilter.enabled"
CONCURRENT_WRITERS = "spark.sql.maxConcurrentOutputFileWriters"


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


def _write_stages_peak_memory(spark, path) -> list[int]:
    """The peak execution memory of each stage a partitioned Delta write of 1,000 rows runs."""
    context = spark.sparkContext

    def stages() -> dict:
        context._jsc.sc().listenerBus().waitUntilEmpty()
        jvm = context._jvm
        found = (
            context._jsc.sc()
            .statusStore()
            .stageList(
                jvm.java.util.ArrayList(),
                False,
                False,
                context._gateway.new_array(jvm.double, 0),
                jvm.java.util.ArrayList(),
            )
        )
        return {found.apply(index).stageId(): found.apply(index) for index in range(found.size())}

    before = set(stages())
    rows = spark.range(1000).select(F.lit("a-cluster").alias("cluster"), "id")
    rows.write.format("delta").partitionBy("cluster").save(str(path))
    peaks = [stage.peakExecutionMemory() for stage_id, stage in stages().items() if stage_id not in before]
    assert spark.read.format("delta").load(str(path)).count() == 1000
    return peaks


def test_a_partitioned_write_does_not_sort_its_rows(spark, tmp_path):
    """Every table is partitioned by cluster and a run writes one cluster: a sort by the partition column
    before writing orders nothing, and at a night's size spilled the night's commits (conf/defaults.toml)."""
    writers = spark.conf.get(CONCURRENT_WRITERS)
    assert int(writers) > 0
    assert _write_stages_peak_memory(spark, tmp_path / "unsorted") == [0]
    spark.conf.set(CONCURRENT_WRITERS, "0")  # what the setting keeps out: the sorter's memory
    try:
        assert max(_write_stages_peak_memory(spark, tmp_path / "sorted")) > 0
    finally:
        spark.conf.set(CONCURRENT_WRITERS, writers)


def _rows_scanned(rows: DataFrame) -> int:
    """Rows the (single) file scan of `rows`'s plan handed on, once its results are collected."""
    rows.collect()
    return (
        rows._jdf.queryExecution().executedPlan().collectLeaves().apply(0).metrics().get("numOutputRows").get().value()
    )


def test_a_read_of_a_partition_from_a_time_skips_the_pages_before(spark, tmp_path):
    """offset_commits' files hold their partitions in order, then time (decode), and history and metrics
    read a few partitions from a time on, untimed records too: with INT96 times (no statistics, not even
    null counts) that filter could skip nothing, and every night read whole files (conf/defaults.toml)."""
    rows = spark.range(400_000).select(
        F.floor(F.col("id") / 100_000).cast("int").alias("source_partition"),
        F.timestamp_micros(F.col("id") * 1_000_000).alias("record_at"),
        F.sha2(F.col("id").cast("string"), 256).alias("group_id"),
    )
    path = str(tmp_path / "commits")
    rows.coalesce(1).write.format("delta").save(path)
    late_in_partition_2 = (F.col("source_partition") == 2) & (
        F.col("record_at") >= F.timestamp_micros(F.lit(250 * 10**9))
    )
    read = spark.read.format("delta").load(path).where(late_in_partition_2 | F.col("record_at").isNull())
    assert read.count() == 50_000
    assert _rows_scanned(read.select("group_id")) < 100_000


def vm_option(spark, name: str) -> str:
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    return jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean).getVMOption(name).getValue()


def test_jvms_the_suite_launches_compile_less_and_its_own_session_keeps_the_defaults(spark):
    """tests/small_data.py: SHORT_JVM_OPTIONS reach every JVM started through a Spark launcher, and only those."""
    inherited = os.environ[SUBMIT_OPTIONS_VARIABLE]
    assert SHORT_JVM_OPTIONS in inherited
    flags = subprocess.run(
        ["java", *shlex.split(inherited), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    launched = dict(re.findall(r"(Tier4\w+Threshold)\s+=\s+(\d+)", flags))
    assert launched["Tier4InvocationThreshold"] == "80000" and launched["Tier4BackEdgeThreshold"] == "640000"
    assert vm_option(spark, "Tier4InvocationThreshold") == "5000"
    assert vm_option(spark, "Tier4BackEdgeThreshold") == "40000"


def test_heartbeats_ask_no_accumulator_whether_it_is_zero(spark):
    """conf/defaults.toml: a heartbeat that asks a half-deserialized accumulator `isZero` kills the executor's
    heartbeat thread (SPARK-59451); the race is too rare to provoke in a test (one in about 16,000 tasks with a
    heartbeat every millisecond), so this holds the setting that keeps it from being asked, in the shipped
    defaults and in the executor's configuration of a session the jobs' own factory built."""
    setting = "spark.executor.heartbeat.dropZeroAccumulatorUpdates"
    assert load_config().spark_conf[setting] == "false"
    assert spark.sparkContext._jsc.sc().env().conf().get(setting) == "false"
