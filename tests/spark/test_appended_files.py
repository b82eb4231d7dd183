"""jobs.watermarks.changes_since reads a table's blind appends as their Parquet files (jobs/appended_files.py)
and the other versions through Delta's change feed: for every range of a table's history it gives exactly
the change feed's rows, and it reads the feed only for the versions that are not blind appends.

The table meets what the jobs' tables meet: appends to one and to two partitions, an empty commit (a
step's note), a MERGE that updates and inserts, a DELETE, a schema change, and a table with deletion
vectors (whose appends are still read as their files). jobs.watermarks.net_changes, the feed netted
to what differs between two versions, is checked on the same table."""

from __future__ import annotations

import collections
import itertools
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F

from jobs.appended_files import range_files
from jobs.delta_tables import DeltaTable
from jobs.watermarks import ChangesUnavailable, changes_since, current_version, net_changes, write_noted

SCHEMA = "cluster string, record_id string, offset long, payload binary"


def rows(spark, cluster: str, ids: range):
    return spark.createDataFrame(
        [(cluster, f"r{index}", index, bytes([index % 256]) * 3) for index in ids], SCHEMA
    ).repartition(2)


def feed_rows(spark, table: str, covered: int, until: int) -> list:
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", covered + 1)
        .option("endingVersion", until)
        .table(table)
        .where(F.col("_change_type") != "update_preimage")
        .drop("_commit_timestamp")
    )
    return sorted(feed.collect())


def local(path: str) -> Path:
    return Path(urlparse(path).path)


def blind_appends(spark, table: str, first: int, last: int) -> dict:
    return range_files(spark, table, first, last).appended


def reads_change_feed(frame) -> bool:
    return "DeltaCDFRelation" in frame._jdf.queryExecution().executedPlan().toString()


@pytest.fixture(scope="module", params=[False, True], ids=["rewriting files", "deletion vectors"])
def history(spark, request):
    """The table and the kind of each version after its creation; its MERGE, DELETE and UPDATE rewrite
    the files they touch, or (the tables with deletion vectors) mark the rows they remove."""
    table = "default.appended_files_history"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(
        f"CREATE TABLE {table} ({SCHEMA}) USING delta PARTITIONED BY (cluster)"
        " TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true',"
        f" 'delta.enableDeletionVectors' = '{str(request.param).lower()}')"
    )
    location = spark.sql(f"DESCRIBE DETAIL {table}").first()["location"]
    kinds = {}

    def committed(kind: str) -> None:
        kinds[current_version(spark, table)] = kind

    rows(spark, "a", range(0, 10)).write.format("delta").mode("append").saveAsTable(table)
    committed("append")
    rows(spark, "a", range(10, 20)).unionByName(rows(spark, "b", range(0, 5))).write.format("delta").mode(
        "append"
    ).saveAsTable(table)
    committed("append to two partitions")
    write_noted(rows(spark, "a", range(0, 0)), location, '{"note": 1}')
    committed("empty commit")
    (
        DeltaTable.forName(spark, table)
        .alias("target")
        .merge(rows(spark, "a", range(15, 25)).alias("source"), "target.record_id = source.record_id")
        .whenMatchedUpdate(set={"offset": "source.offset + 1000"})
        .whenNotMatchedInsertAll()
        .execute()
    )
    committed("merge")
    rows(spark, "b", range(5, 9)).write.format("delta").mode("append").saveAsTable(table)
    committed("append")
    spark.sql(f"DELETE FROM {table} WHERE record_id IN ('r1', 'r2')")
    committed("delete")
    rows(spark, "a", range(30, 33)).write.format("delta").mode("append").saveAsTable(table)
    committed("append")
    return table, kinds


def feed_by_version(spark, table: str, covered: int, until: int) -> dict[int, list]:
    """feed_rows of versions `covered` + 1 to `until`, read once and split by version: a range's feed rows
    are its versions' (Delta keeps each version's changes apart), so each range's expected rows need no read."""
    found: dict[int, list] = {version: [] for version in range(covered + 1, until + 1)}
    for row in feed_rows(spark, table, covered, until):
        found[row["_commit_version"]].append(row)
    return found


def range_rows(feed: dict[int, list], covered: int, until: int) -> list:
    """What feed_rows gives for the range, from feed_by_version's split."""
    return sorted(row for version in range(covered + 1, until + 1) for row in feed[version])


def ranges(points: list[int]) -> list[tuple[int, int]]:
    """(covered, until) pairs of `points` that meet every kind of version and every pair of neighbouring
    kinds: each version alone, each two neighbours, and each range up to the last version (what a night
    reads: from what it covered to now). The others are these laid end to end, each one Spark read more."""
    last = len(points) - 1
    return sorted(
        (points[start], points[end])
        for start, end in itertools.combinations(range(len(points)), 2)
        if end - start <= 2 or end == last
    )


def test_every_range_gives_the_change_feeds_rows(spark, history):
    table, kinds = history
    versions = sorted(kinds)
    feed = feed_by_version(spark, table, versions[0] - 1, versions[-1])
    for covered, until in ranges([versions[0] - 1, *versions]):
        assert sorted(changes_since(spark, table, covered, until).collect()) == range_rows(feed, covered, until), (
            f"versions {covered + 1}..{until}"
        )
    some_range = (versions[1], versions[-2])  # the split feed is the feed of the range read by itself
    assert feed_rows(spark, table, *some_range) == range_rows(feed, *some_range)


def version_difference(before: list, after: list, columns: list[str]) -> list:
    """The rows of version `before` and not of `after` (is_removed true) and the other way round, as
    multisets: EXCEPT ALL of the two versions, computed here from their rows."""
    left, right = collections.Counter(before), collections.Counter(after)
    removed, added = left - right, right - left
    return sorted(
        Row(**dict(zip(columns, values, strict=True)), is_removed=is_removed)
        for is_removed, rows in ((True, removed), (False, added))
        for values in rows.elements()
    )


def test_net_changes_are_the_difference_of_the_two_versions(spark, history):
    """What the metrics step reads of the history tables: the feed netted, for every range, equals the
    two versions compared whole; rows deleted and written again unchanged (as a history run rewrites a
    group) are no change, an update is its old row removed and its new one added."""
    table, kinds = history
    location = spark.sql(f"DESCRIBE DETAIL {table}").first()["location"]
    write_noted(rows(spark, "b", range(3, 5)), location, '{"note": 2}', "cluster = 'b' AND offset IN (3, 4)")
    kinds[current_version(spark, table)] = "rows written again unchanged"
    spark.sql(f"UPDATE {table} SET offset = offset + 1 WHERE record_id = 'r31'")
    kinds[current_version(spark, table)] = "update"
    columns = ["cluster", "record_id", "offset"]
    versions = sorted(kinds)
    rows_at = {
        version: [
            tuple(row)
            for row in spark.read.format("delta").option("versionAsOf", version).table(table).select(*columns).collect()
        ]
        for version in versions
    }
    for covered, until in ranges(versions):
        assert sorted(net_changes(spark, table, covered, until, columns).collect()) == version_difference(
            rows_at[covered], rows_at[until], columns
        ), f"versions {covered + 1}..{until}"
    rewritten = max(version for version, kind in kinds.items() if kind == "rows written again unchanged")
    assert net_changes(spark, table, rewritten - 1, rewritten, columns).isEmpty()
    assert changes_since(spark, table, rewritten - 1, rewritten).count() == 4  # deleted and inserted: the feed has them


def test_a_range_before_the_feed_was_turned_on_is_unavailable(spark):
    """A table an earlier version made without the feed: Delta finds it only as it plans the read, which
    changes_since and net_changes do before they return (a step then starts over, before it writes)."""
    table = "default.appended_files_no_feed"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} ({SCHEMA}) USING delta PARTITIONED BY (cluster)")
    rows(spark, "a", range(0, 3)).write.format("delta").mode("append").saveAsTable(table)
    spark.sql(f"DELETE FROM {table} WHERE record_id = 'r1'")
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    turned_on = current_version(spark, table)
    spark.sql(f"DELETE FROM {table} WHERE record_id = 'r2'")
    now = current_version(spark, table)
    with pytest.raises(ChangesUnavailable, match="no change data feed"):
        changes_since(spark, table, 0, now)
    with pytest.raises(ChangesUnavailable, match="no change data feed"):
        net_changes(spark, table, 0, now, ["record_id"])
    assert [row["record_id"] for row in changes_since(spark, table, turned_on, now).collect()] == ["r2"]


def test_a_range_whose_files_were_vacuumed_is_unavailable(spark):
    """VACUUM deletes the change files and the removed files of versions older than its retention; Delta
    fails only as it reads them (halfway through a step), so changes_since checks they exist first."""
    table = "default.appended_files_vacuumed"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(
        f"CREATE TABLE {table} ({SCHEMA}) USING delta PARTITIONED BY (cluster)"
        " TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')"
    )
    rows(spark, "a", range(0, 10)).unionByName(rows(spark, "b", range(0, 3))).write.format("delta").mode(
        "append"
    ).saveAsTable(table)
    covered = current_version(spark, table)
    spark.sql(f"DELETE FROM {table} WHERE record_id = 'r1'")  # writes a change file
    spark.sql(f"DELETE FROM {table} WHERE cluster = 'b'")  # whole files: the feed reads the files removed
    rows(spark, "a", range(10, 12)).write.format("delta").mode("append").saveAsTable(table)
    appended = current_version(spark, table)
    spark.sql(f"OPTIMIZE {table}")  # the appended files removed, in one of no data change
    now = current_version(spark, table)
    files = range_files(spark, table, covered + 1, now)
    assert [path for path in files.read if "/_change_data/" in path], "the first DELETE wrote a change file"
    assert [path for path in files.read if "/cluster=b/" in path], "the second DELETE's removed files"
    assert all(local(path).exists() for path in files.read)
    before = sorted(changes_since(spark, table, covered, now).collect())
    assert before == feed_rows(spark, table, covered, now) and len(before) == 1 + 3 + 2
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM {table} RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert not any(local(path).exists() for path in files.read)
    for first in range(covered, appended):
        with pytest.raises(ChangesUnavailable, match=r"file\(s\) of versions .* were deleted \(VACUUM\)"):
            changes_since(spark, table, first, now)
        with pytest.raises(ChangesUnavailable, match=r"were deleted \(VACUUM\)"):
            net_changes(spark, table, first, now, ["record_id"])
    assert changes_since(spark, table, appended, now).isEmpty()  # OPTIMIZE changed no row


def test_blind_appends_are_the_appends_and_the_empty_commit(spark, history):
    table, kinds = history
    found = blind_appends(spark, table, min(kinds), max(kinds))
    assert sorted(found) == sorted(version for version, kind in kinds.items() if "append" in kind or "empty" in kind)
    two_partitions = next(version for version, kind in kinds.items() if kind == "append to two partitions")
    assert sorted(dict(files.partition_values)["cluster"] for files in found[two_partitions]) == ["a", "b"]
    empty = next(version for version, kind in kinds.items() if kind == "empty commit")
    assert found[empty] == []


def test_the_change_feed_is_read_only_for_the_other_versions(spark, history):
    table, kinds = history
    first_merge = next(version for version, kind in kinds.items() if kind == "merge")
    assert not reads_change_feed(changes_since(spark, table, min(kinds) - 1, first_merge - 1))
    assert reads_change_feed(changes_since(spark, table, min(kinds) - 1, first_merge))


def test_a_schema_change_in_the_range_reads_it_all_through_the_feed(spark, history):
    table, _ = history
    before = current_version(spark, table)
    spark.sql(f"ALTER TABLE {table} ADD COLUMNS (note string)")
    spark.createDataFrame([("a", "r99", 99, b"x", "late")], f"{SCHEMA}, note string").write.format("delta").mode(
        "append"
    ).saveAsTable(table)
    now = current_version(spark, table)
    assert blind_appends(spark, table, before + 1, now) == {}
    assert blind_appends(spark, table, now, now) != {}  # after the change, appends are read as files again
    assert sorted(changes_since(spark, table, before, now).collect()) == feed_rows(spark, table, before, now)


def test_a_table_with_deletion_vectors_reads_its_appends_as_files(spark):
    """Deletion vectors (a platform's default for new tables, or turned on by hand): a DELETE and a MERGE
    mark rows of files appended before, and a MERGE's updated rows are written anew; the appends' own
    changes are still every row their files were written with, the marking versions' come from the feed."""
    table = "default.appended_files_deletion_vectors"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(
        f"CREATE TABLE {table} ({SCHEMA}) USING delta PARTITIONED BY (cluster) TBLPROPERTIES"
        " ('delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'true')"
    )
    rows(spark, "a", range(0, 10)).write.format("delta").mode("append").saveAsTable(table)
    spark.sql(f"DELETE FROM {table} WHERE record_id = 'r3'")
    marked = current_version(spark, table)
    (
        DeltaTable.forName(spark, table)
        .alias("target")
        .merge(
            rows(spark, "a", range(5, 6)).withColumn("offset", F.lit(-5)).alias("source"),
            "target.record_id = source.record_id",
        )
        .whenMatchedUpdateAll()
        .execute()
    )
    merged = current_version(spark, table)
    rows(spark, "a", range(10, 12)).write.format("delta").mode("append").saveAsTable(table)
    now = current_version(spark, table)
    deletion_vectors = spark.sql(f"DESCRIBE DETAIL {table}").first()["tableFeatures"]
    assert "deletionVectors" in deletion_vectors
    history = spark.sql(f"DESCRIBE HISTORY {table}").collect()
    assert any(int((row.operationMetrics or {}).get("numDeletionVectorsAdded", "0")) > 0 for row in history)
    assert sorted(blind_appends(spark, table, 1, now)) == [1, now]
    feed = feed_by_version(spark, table, 0, now)
    for first, last in itertools.combinations_with_replacement(range(1, now + 1), 2):
        changes = changes_since(spark, table, first - 1, last)
        assert sorted(changes.collect()) == range_rows(feed, first - 1, last), (first, last)
        assert reads_change_feed(changes) == any(version in (marked, merged) for version in range(first, last + 1))
