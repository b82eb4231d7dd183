"""A night whose raw changes hold a few revisited records (a transaction resolved) passes its inserts
through a broadcast of those records' ids, not a shuffle: joined the usual way, the one resolved
transaction of the benchmark's third night shuffled all its payloads (a third of that night's decode).
The resolved and the deleted records are read from the revisited ones alone: asked of every change, a
night read all its payloads once for each to find none."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from jobs.raw_changes import latest_changes, revisited_records
from jobs.tables import broadcast_joins_off
from jobs.watermarks import CHANGE_INSERT


def _changes(spark, inserted: int, revisions=(("r0", "update_postimage", 2, "committed"),)):
    """A change feed of `inserted` records, the first of them inserted pending then updated committed (as
    jobs.watermarks.changes_since reads it: without pre-images)."""
    rows = [(f"r{index}", CHANGE_INSERT, 1, "pending" if index == 0 else "committed") for index in range(inserted)]
    rows += revisions
    frame = spark.createDataFrame(rows, "record_id string, _change_type string, _commit_version long, txn_state string")
    placed = {"source_partition": F.lit(0), "source_offset": F.expr("try_cast(substr(record_id, 2) AS BIGINT)")}
    return frame.repartition(4).withColumns({"_commit_timestamp": F.current_timestamp(), **placed})


def test_inserts_are_filtered_by_a_broadcast_of_the_revisited_records(spark):
    changes = _changes(spark, 500)
    revisited = revisited_records(changes, [])

    # Spark sizes a night's change feed by its files, far beyond what it broadcasts of itself: so here
    # it broadcasts nothing of itself either
    with broadcast_joins_off(spark):
        latest = latest_changes(changes, [], revisited).rows
        plan = latest._jdf.queryExecution().executedPlan().toString()
    assert "BroadcastHashJoin" in plan and "SortMergeJoin" not in plan, plan
    rows = {row["record_id"]: row for row in latest.collect()}
    assert len(rows) == 500
    assert (rows["r0"]["txn_state"], rows["r0"]["is_inserted"], rows["r0"]["is_deleted"]) == ("committed", True, False)
    assert all(rows[f"r{index}"]["is_inserted"] for index in range(1, 500))


def test_the_resolved_and_the_deleted_come_from_the_revisited_records_alone(spark):
    revisions = [("r0", "update_postimage", 2, "committed"), ("r1", "delete", 2, "committed")]
    held_before = spark.createDataFrame(
        [("old", "update_postimage", 2, "aborted"), ("gone", "delete", 3, "committed")],
        "record_id string, _change_type string, _commit_version long, txn_state string",
    ).withColumn("_commit_timestamp", F.current_timestamp())
    placed = {"source_partition": F.lit(0), "source_offset": F.lit(0), "record_at": F.current_timestamp()}
    changes = _changes(spark, 50, revisions).unionByName(held_before, allowMissingColumns=True).withColumns(placed)

    latest = latest_changes(changes, [], revisited_records(changes, []))

    assert latest.revised is not None
    assert {row["record_id"]: row["txn_state"] for row in latest.resolved().collect()} == {"old": "aborted"}
    assert {row["record_id"] for row in latest.deleted().collect()} == {"gone"}
    inserted = {row["record_id"]: row["txn_state"] for row in latest.inserted().collect()}
    assert len(inserted) == 49 and inserted["r0"] == "committed" and "r1" not in inserted


def test_a_feed_of_inserts_alone_has_nothing_revised_to_read(spark):
    changes = _changes(spark, 20, revisions=())

    latest = latest_changes(changes, [], revisited_records(changes, []))

    assert latest.revised is None
    assert latest.inserted().count() == 20
    with pytest.raises(ValueError, match="nothing resolved or deleted"):
        latest.resolved()


def test_inserts_pass_unjoined_when_no_revisited_record_was_inserted_in_the_range(spark):
    """A transaction inserted pending on an earlier night and resolved tonight (the usual revisit): none of
    tonight's inserts can be it, so they are not joined with anything."""
    resolved_now = spark.createDataFrame(
        [("old", "update_postimage", 2, "aborted")],
        "record_id string, _change_type string, _commit_version long, txn_state string",
    ).withColumn("_commit_timestamp", F.current_timestamp())
    placed = {"source_partition": F.lit(0), "source_offset": F.lit(0), "record_at": F.current_timestamp()}
    changes = _changes(spark, 50, revisions=()).unionByName(resolved_now, allowMissingColumns=True).withColumns(placed)

    latest = latest_changes(changes, [], revisited_records(changes, []))

    assert "LeftAnti" not in latest.rows._jdf.queryExecution().executedPlan().toString()
    assert {row["record_id"]: row["txn_state"] for row in latest.resolved().collect()} == {"old": "aborted"}
    assert sorted(row["record_id"] for row in latest.inserted().collect()) == sorted(f"r{i}" for i in range(50))


def test_the_revisited_records_changes_are_read_where_they_are_in_the_log(spark):
    """A record's changes all hold its log position, so the revisited ones are read from their positions'
    offset ranges (a night's appended files skipped by their statistics), not found among all the
    night's inserts: a row elsewhere, even under a revisited id, is not read."""
    revisions = [("r7", "update_postimage", 2, "committed")]
    elsewhere = spark.createDataFrame(
        [("r7", "update_postimage", 3, "aborted")],
        "record_id string, _change_type string, _commit_version long, txn_state string",
    ).withColumns(
        {"_commit_timestamp": F.current_timestamp(), "source_partition": F.lit(0), "source_offset": F.lit(99)}
    )
    changes = _changes(spark, 50, revisions).unionByName(elsewhere)

    latest = latest_changes(changes, [], revisited_records(changes.where(F.col("_commit_version") == 2), []))

    assert [(row["record_id"], row["txn_state"]) for row in latest.revised.collect()] == [("r7", "committed")]
