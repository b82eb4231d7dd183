"""A night whose raw changes hold a few revisited records (a transaction resolved) passes its inserts
through a broadcast of those records' ids, not a shuffle: joined the usual way, the one resolved
transaction of the benchmark's third night shuffled all its payloads (a third of that night's decode)."""

from __future__ import annotations

from pyspark.sql import functions as F

from jobs.raw_changes import latest_changes, revisited_records
from jobs.tables import broadcast_joins_off
from jobs.watermarks import CHANGE_INSERT


def _changes(spark, inserted: int):
    """A change feed of `inserted` records, the first of them inserted pending then updated committed (as
    jobs.watermarks.changes_since reads it: without pre-images)."""
    rows = [(f"r{index}", CHANGE_INSERT, 1, "pending" if index == 0 else "committed") for index in range(inserted)]
    rows.append(("r0", "update_postimage", 2, "committed"))
    frame = spark.createDataFrame(rows, "record_id string, _change_type string, _commit_version long, txn_state string")
    return frame.repartition(4).withColumn("_commit_timestamp", F.current_timestamp())


def test_inserts_are_filtered_by_a_broadcast_of_the_revisited_records(spark):
    changes = _changes(spark, 500)
    revisited = revisited_records(changes, [])

    # Spark sizes a night's change feed by its files, far beyond what it broadcasts of itself: so here
    # it broadcasts nothing of itself either
    with broadcast_joins_off(spark):
        latest = latest_changes(changes, [], revisited)
        plan = latest._jdf.queryExecution().executedPlan().toString()
    assert "BroadcastHashJoin" in plan and "SortMergeJoin" not in plan, plan
    rows = {row["record_id"]: row for row in latest.collect()}
    assert len(rows) == 500
    assert (rows["r0"]["txn_state"], rows["r0"]["is_inserted"], rows["r0"]["is_deleted"]) == ("committed", True, False)
    assert all(rows[f"r{index}"]["is_inserted"] for index in range(1, 500))
