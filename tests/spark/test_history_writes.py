"""A continuing night's history write: the touched groups' rows replaced but for the kept keys', in one
commit whose deletion vectors mark the rows replaced (no kept row written again)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest
from pyspark.errors import AnalysisException

from jobs import history_writes
from jobs.delta_tables import DeltaTable
from jobs.history_writes import _replaced_runs, groups_store
from jobs.tables import ensure_table
from jobs.watermarks import note
from schemas import gold
from tests.delta_log import file_changes

TABLE = "partition_movements"
COMPLETED_AT = datetime(2026, 11, 2, 3, 4, 5)


def movement(group_id: str, generation: int, topic: str, incarnation: int = 0) -> dict:
    return {
        "cluster": "c1", "group_id": group_id, "incarnation": incarnation, "generation": generation,
        "previous_generation": generation - 1, "completed_at": COMPLETED_AT, "topic": topic, "partition": 0,
        "from_member_id": "a", "to_member_id": "b", "is_forced": False,
    }  # fmt: skip


def keys(*generations: int, group_id: str = "g1", incarnation: int = 0) -> list[tuple]:
    return [("c1", group_id, incarnation, generation) for generation in generations]


@pytest.fixture
def config(spark, spark_config, request):
    database = f"history_writes_{request.node.name.removeprefix('test_')[:40]}"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    config = dataclasses.replace(spark_config, database=database, cluster="c1")
    ensure_table(spark, config.table(TABLE), gold.GOLD_SCHEMAS[TABLE], ("cluster",), True, True)
    held = [movement("g1", generation, "old") for generation in range(1, 6)]
    held += [movement("g2", generation, "old") for generation in range(1, 4)]
    held += [movement("g1", generation, "old", incarnation=1) for generation in (1, 2)]
    spark.createDataFrame(held, gold.GOLD_SCHEMAS[TABLE]).write.format("delta").mode("append").saveAsTable(
        config.table(TABLE)
    )
    yield config
    spark.sql(f"DROP DATABASE {database} CASCADE")


def store_g1(spark, config, rows: list[dict], kept: list[tuple]):
    groups = spark.createDataFrame([("c1", "g1")], "cluster string, group_id string")
    store = groups_store(spark, config, note("history", "c1", {"offset_commits": 1}), groups, 1)
    kept_keys = spark.createDataFrame(kept, "cluster string, group_id string, incarnation int, generation int")
    return store(TABLE, spark.createDataFrame(rows, gold.GOLD_SCHEMAS[TABLE]), kept_keys)


def held_rows(spark, config) -> set[tuple]:
    rows = spark.table(config.table(TABLE)).select("group_id", "incarnation", "generation", "topic")
    return {tuple(row) for row in rows.collect()}


def replace_g1_but_generations_2_and_4(spark, config) -> None:
    """g1 keeps generations 2 and 4 of incarnation 0: three runs replaced (1; 3; 5 and the new 6), and all
    of incarnation 1, which keeps nothing; g2 is not touched."""
    rows = [movement("g1", generation, "new") for generation in (1, 3, 5, 6)] + [movement("g1", 3, "new", 1)]
    store_g1(spark, config, rows, keys(2, 4))
    assert held_rows(spark, config) == {
        ("g1", 0, 1, "new"), ("g1", 0, 2, "old"), ("g1", 0, 3, "new"), ("g1", 0, 4, "old"),
        ("g1", 0, 5, "new"), ("g1", 0, 6, "new"), ("g1", 1, 3, "new"),
        ("g2", 0, 1, "old"), ("g2", 0, 2, "old"), ("g2", 0, 3, "old"),
    }  # fmt: skip


def test_the_touched_groups_rows_are_replaced_but_for_the_kept_keys(spark, config):
    replace_g1_but_generations_2_and_4(spark, config)
    version = DeltaTable.forName(spark, config.table(TABLE)).history(1).first()["version"]
    changes = file_changes(spark, config.table(TABLE), version)
    assert sum(changes.written.values()) == 5 and not changes.rewritten and changes.marked, changes


def test_a_night_that_replaces_nothing_still_commits_its_note(spark, config):
    before = held_rows(spark, config)
    store_g1(spark, config, [], keys(1, 2, 3, 4, 5) + keys(1, 2, incarnation=1))
    assert held_rows(spark, config) == before
    commit = DeltaTable.forName(spark, config.table(TABLE)).history(1).first()
    assert commit["userMetadata"] == note("history", "c1", {"offset_commits": 1}), commit["userMetadata"]


def test_a_computed_row_of_a_kept_key_is_refused_not_doubled(spark, config):
    with pytest.raises(AnalysisException, match="DELTA_REPLACE_WHERE_MISMATCH"):
        store_g1(spark, config, [movement("g1", 2, "new")], keys(2, 4))
    assert ("g1", 0, 2, "new") not in held_rows(spark, config)


def test_a_key_without_a_generation_is_replaced_or_kept_with_its_incarnation(spark, config):
    key_schema = "cluster string, group_id string, incarnation int, generation int"
    held = spark.createDataFrame([*keys(1, 2, 3), ("c1", "g1", 0, None), ("c1", "g1", 1, None)], key_schema)
    kept = spark.createDataFrame([*keys(2), ("c1", "g1", 1, None)], key_schema)
    runs = {(run["incarnation"], run["low"], run["high"]) for run in _replaced_runs(held, kept)}
    assert runs == {(0, 1, 1), (0, 3, 3), (0, None, None)}


def test_beyond_the_predicates_runs_the_same_rows_are_replaced_by_a_merge(spark, config, monkeypatch):
    monkeypatch.setattr(history_writes, "MAX_PREDICATE_RUNS", 0)
    replace_g1_but_generations_2_and_4(spark, config)
    assert DeltaTable.forName(spark, config.table(TABLE)).history(1).first()["operation"] == "MERGE"
