"""The merge of records read from segment files into raw_records plans no broadcast join.

Spark sizes the Python reader's read of segment files by its list of tasks (one row per partition directory), so it took
any such read for a few bytes and broadcast it: on a catch-up night of 46M records the merge filled the
driver's heap and the nightly failed (docs/bench-log.md). The plans are read from Spark's own record of
the executions the merge ran (its SQL status store, kept with the UI off too).
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import functions as F

from bench.batch_builder import COMMIT, TIMESTAMP_MS, Rec, batch_v2, control_batch
from bench.records import offset_commit_key, offset_commit_value
from jobs.segment_reader import READER_CONF
from jobs.steps.ingest import merge_raw_rows, read_partition_directories
from jobs.tables import RAW_RECORDS, ensure_table
from schemas.bronze import raw_records_schema


def _commit(producer_id: int, offset: int) -> bytes:
    record = Rec(offset_commit_key("app", "orders", 0), offset_commit_value(4, offset, 0, b"", TIMESTAMP_MS))
    return batch_v2(offset, [record], is_transactional=True, producer_id=producer_id, producer_epoch=0, base_sequence=0)


def _executions(spark) -> list[tuple[int, str]]:
    """(execution id, physical plan) of every SQL execution the session has run, once the events of those
    already run have reached the store (the listener bus is asynchronous)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    return [
        (executions.apply(index).executionId(), executions.apply(index).physicalPlanDescription())
        for index in range(executions.size())
    ]


def test_records_read_from_segments_are_merged_without_a_broadcast(spark, spark_config, tmp_path):
    directory = tmp_path / "__consumer_offsets-0"
    directory.mkdir()
    segment = directory / "00000000000000000000.log"
    segment.write_bytes(_commit(1, 0) + _commit(2, 1) + control_batch(2, 2, control_type=COMMIT))
    config = replace(spark_config, cluster="raw-merge-plans")
    table = config.table(RAW_RECORDS)
    ensure_table(spark, table, raw_records_schema, partition_by=("cluster",), change_feed=True)
    spark.conf.set(READER_CONF, "python")  # the JVM's source is sized unknown (too large to broadcast)
    try:
        rows = read_partition_directories(spark, [[str(segment)]], config.cluster, "run-1")
    finally:
        spark.conf.unset(READER_CONF)
    assert rows._jdf.queryExecution().optimizedPlan().stats().sizeInBytes() < 10 * 2**20  # taken for small
    before = max((execution_id for execution_id, _ in _executions(spark)), default=-1)

    merge_raw_rows(spark, table, rows, config.cluster)

    plans = [plan for execution_id, plan in _executions(spark) if execution_id > before]
    assert any("Join" in plan for plan in plans), "the merge's join was not among the executions recorded"
    assert [plan for plan in plans if "Broadcast" in plan] == []
    held = spark.table(table).where(F.col("cluster") == F.lit(config.cluster))
    assert sorted((row.source_offset, row.txn_state) for row in held.collect()) == [(0, "pending"), (1, "committed")]
    assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") != "-1"  # as it was, after the merge
