"""The history fold run by Spark (transforms/gold/history_fold.py) on the lab's groups: one mapInArrow pass
over every commit gives the lab's tables (folded from scratch over the commit summary: tests/lab_tables.py);
two passes, a first night and a continuing one started from the states the first stored, equal one; a
record below a group's state asks for that group to be refolded; a group the fold does not take is named.
"""

from __future__ import annotations

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from jobs.config import GoldSettings
from jobs.steps.history import collected_names
from lab.broker import CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS, CONSUMER_GROUP_SESSION_TIMEOUT_MS
from tests.delta_compare import canonical
from transforms.gold import commit_summary, offsets, topic_names
from transforms.gold.history_fold import (
    GROUP,
    classic_records_frame,
    folded_groups,
    folded_rows,
    history_log,
)
from transforms.history.fold import TABLES, Rows

NO_STATES = "cluster string, group_id string, state_json string"
# The lab tables' settings (tests/lab_tables.py).
SETTINGS = GoldSettings(
    consumer_session_timeout_ms=CONSUMER_GROUP_SESSION_TIMEOUT_MS,
    consumer_heartbeat_interval_ms=CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS,
).history_settings()


def table_rows(tables) -> dict[str, list]:
    """Each table's rows in a canonical, order-free form, whether collected from Spark or folded."""
    return {name: sorted((canonical(row) for row in tables[name]), key=repr) for name in TABLES}


def _classic_groups(lab) -> list[tuple]:
    """Groups of classic records only (consumer protocol and Connect's)."""
    groups = lab["group_metadata"].select(*GROUP).distinct()
    return sorted(tuple(row) for row in groups.join(lab["consumer_group_records"], list(GROUP), "left_anti").collect())


def _epoch_groups(lab) -> list[tuple]:
    """Groups of KIP-848, share and streams records only."""
    groups = lab["consumer_group_records"].select(*GROUP).distinct()
    return sorted(tuple(row) for row in groups.join(lab["group_metadata"], list(GROUP), "left_anti").collect())


def _cluster_topic_names(lab) -> dict:
    spark = lab["consumer_group_records"].sparkSession
    no_topic_ids = spark.createDataFrame([], "cluster string, topic_id string, topic string, source string")
    return collected_names(topic_names.topic_names(lab["consumer_group_records"], lab["offset_commits"], no_topic_ids))


@pytest.fixture(scope="module")
def classic(lab):
    """The lab's classic groups' records and counted commits."""
    spark = lab["group_metadata"].sparkSession
    groups = F.broadcast(spark.createDataFrame(_classic_groups(lab), "cluster string, group_id string"))
    metadata = lab["group_metadata"].join(groups, on=list(GROUP), how="left_semi")
    records = classic_records_frame(metadata, lab["group_members"]).cache()
    commits = offsets.filter_uncounted_commits(lab["offset_commits"]).join(groups, on=list(GROUP), how="left_semi")
    of_groups = {name: lab[name].join(groups, on=list(GROUP), how="left_semi").collect() for name in TABLES}
    expected = table_rows({name: [row.asDict(recursive=True) for row in rows] for name, rows in of_groups.items()})
    yield records, commits.cache(), expected
    records.unpersist()


def _collected(folded) -> dict[str, list]:
    return {name: [row.asDict(recursive=True) for row in folded_rows(folded, name).collect()] for name in TABLES}


def _replaced(stored: dict[str, list], folded_row, tables: dict[str, list]) -> dict[str, list]:
    """The group's stored rows with the continuing fold's rows in place of those they replace."""
    frontier = None
    if folded_row["frontier_incarnation"] is not None:
        frontier = {"incarnation": folded_row["frontier_incarnation"], "generation": folded_row["frontier_generation"]}
    rows = Rows(frontier, folded_row["frequency_from"], tables)
    return {name: [r for r in stored[name] if not rows.replaces(name, r)] + tables[name] for name in TABLES}


def test_one_pass_gives_the_spark_history_of_every_classic_group(classic):
    records, commits, expected = classic
    states = records.sparkSession.createDataFrame([], NO_STATES)
    folded = folded_groups(history_log(records, commits, states), SETTINGS).cache()
    assert folded.where("needs_refold").count() == 0
    assert table_rows(_collected(folded)) == expected
    assert sum(len(rows) for rows in expected.values()) >= 2_000


def test_a_continuing_night_from_the_stored_states_equals_one_pass(classic):
    records, commits, expected = classic
    spark = records.sparkSession
    in_order = Window.partitionBy(*GROUP).orderBy("source_partition", "source_offset")
    numbered = records.withColumn("n", F.row_number().over(in_order)).withColumn(
        "count", F.count(F.lit(1)).over(Window.partitionBy(*GROUP))
    )
    first_half = numbered.where(F.col("n") <= F.col("count") / 2).drop("n", "count")
    second_half = numbered.where(F.col("n") > F.col("count") / 2).drop("n", "count")
    first = folded_groups(history_log(first_half, commits, spark.createDataFrame([], NO_STATES)), SETTINGS).cache()
    states = first.where(F.col("state_json").isNotNull()).select(*GROUP, "state_json")
    second = folded_groups(history_log(second_half, commits, states), SETTINGS).collect()
    assert not any(row["needs_refold"] for row in second)
    stored = _collected(first)
    combined = {name: [] for name in TABLES}
    for row in second:
        group = (row["cluster"], row["group_id"])
        mine = {name: [r for r in stored[name] if (r["cluster"], r["group_id"]) == group] for name in TABLES}
        tables = {name: [r.asDict(recursive=True) for r in row[name]] for name in TABLES}
        for name, rows in _replaced(mine, row, tables).items():
            combined[name].extend(rows)
    assert table_rows(combined) == expected


def test_a_record_below_a_groups_state_asks_for_a_refold(classic):
    records, commits, _ = classic
    spark = records.sparkSession
    states = folded_groups(history_log(records, commits, spark.createDataFrame([], NO_STATES)), SETTINGS).select(
        *GROUP, "state_json"
    )
    again = folded_groups(history_log(records, commits, states), SETTINGS)
    refolded = again.where("needs_refold").collect()
    assert refolded and all(row["state_json"] is not None for row in refolded)
    assert all(len(row[name]) == 0 for row in refolded for name in TABLES)


def test_the_commit_summary_gives_the_history_every_commit_gives(classic, lab):
    """The fold fed each partition's first and last commit between the group's record times (one row per
    interval, transforms/gold/commit_summary.py) gives the rows every commit gives, for the classic and the
    KIP-848, share and streams groups."""
    records, commits, _ = classic
    spark = records.sparkSession
    epoch_groups = F.broadcast(spark.createDataFrame(_epoch_groups(lab), "cluster string, group_id string"))
    epoch_records = lab["consumer_group_records"].join(epoch_groups, on=list(GROUP), how="left_semi")
    counted = offsets.filter_uncounted_commits(lab["offset_commits"])
    commits = commits.unionByName(counted.join(epoch_groups, on=list(GROUP), how="left_semi")).cache()
    at = commit_summary.boundaries(lab["group_metadata"], lab["consumer_group_records"])
    summary = commit_summary.summarized(commits, at).cache()
    states = spark.createDataFrame([], NO_STATES)
    names = _cluster_topic_names(lab)
    every_commit = folded_groups(history_log(records, commits, states, epoch_records), SETTINGS, names).cache()
    summarized = history_log(records, commit_summary.as_commits(summary), states, epoch_records)
    expected = table_rows(_collected(every_commit))
    assert table_rows(_collected(folded_groups(summarized, SETTINGS, names))) == expected
    assert sum(len(rows) for rows in expected.values()) >= 2_500
    assert summary.count() < commits.count()  # the lab's groups rebalance often: few commits per interval


def test_a_group_the_fold_does_not_take_yet_is_refused_by_name_not_folded_to_nothing(classic, lab):
    """A group with classic and KIP-848 records (converted between protocols) is not folded yet: the pass
    names it and why, with no rows (the step leaves its tables as they are), and folds the others."""
    records, commits, _ = classic
    spark = records.sparkSession
    converted = records.select("cluster", "group_id").first()
    kip848 = spark.createDataFrame(_epoch_groups(lab)[:1], "cluster string, group_id string")
    epoch_records = (
        lab["consumer_group_records"]
        .join(kip848, on=list(GROUP), how="left_semi")
        .withColumn("cluster", F.lit(converted["cluster"]))
        .withColumn("group_id", F.lit(converted["group_id"]))
    )
    log = history_log(records, commits, spark.createDataFrame([], NO_STATES), epoch_records)
    folded = folded_groups(log, SETTINGS, _cluster_topic_names(lab)).collect()
    refused = [row for row in folded if row["not_folded"] is not None]
    assert [(row["cluster"], row["group_id"]) for row in refused] == [tuple(converted)]
    assert "classic and KIP-848" in refused[0]["not_folded"]
    assert all(len(refused[0][name]) == 0 for name in TABLES)
    assert len(folded) > 1 and all(row["not_folded"] is None for row in folded if row not in refused)
