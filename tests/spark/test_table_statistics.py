"""The tables holding nearly every record keep file statistics of the columns their readers filter on only
(jobs/tables.py STATS_COLUMNS): new tables are created so, and a table an earlier version created gets
them on its next run. Delta's own log says which statistics each written file carries."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobs.tables import CHANGE_FEED_PROPERTY, STATS_COLUMNS, STATS_COLUMNS_PROPERTY, ensure_table
from schemas.bronze import raw_records_schema
from schemas.silver import offset_commits_schema

DATABASE = "table_statistics"


@pytest.fixture()
def database(spark):
    spark.sql(f"DROP DATABASE IF EXISTS {DATABASE} CASCADE")
    spark.sql(f"CREATE DATABASE {DATABASE}")
    yield DATABASE
    spark.sql(f"DROP DATABASE IF EXISTS {DATABASE} CASCADE")


def _properties(spark, name: str) -> dict[str, str]:
    return {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def _last_file_statistics(spark, name: str) -> set[str]:
    """The columns with min/max statistics in the file the table's last commit added."""
    location = spark.sql(f"DESCRIBE DETAIL {name}").first()["location"].removeprefix("file:")
    last_commit = max((Path(location) / "_delta_log").glob("*.json"))
    adds = [json.loads(line)["add"] for line in last_commit.read_text().splitlines() if '"add"' in line]
    assert len(adds) == 1, f"{last_commit}: {len(adds)} files added"
    statistics = json.loads(adds[0]["stats"])
    return set(statistics["minValues"]) | set(statistics["maxValues"])


def _one_raw_row(spark):
    row = {field.name: None for field in raw_records_schema.fields}
    row.update(cluster="c", record_id="c/0/1", source_partition=0, source_offset=1, source_kind="segment",
               record_at=datetime(2026, 11, 29, tzinfo=UTC), capture_run_id="nightly-1", key=b"k",
               source_file="/logs/__consumer_offsets-0/00000000000000000000.log", batch_position=0)  # fmt: skip
    return spark.createDataFrame([row], raw_records_schema)


def test_a_new_raw_table_keeps_statistics_of_its_filtered_columns_only(spark, database):
    name = f"{database}.raw_records"
    ensure_table(spark, name, raw_records_schema, partition_by=("cluster",), change_feed=True)
    properties = _properties(spark, name)
    assert properties[STATS_COLUMNS_PROPERTY] == ",".join(STATS_COLUMNS["raw_records"])
    assert properties[CHANGE_FEED_PROPERTY] == "true"

    _one_raw_row(spark).write.format("delta").mode("append").saveAsTable(name)
    # record_id holds a value too, and is among the first 8 columns the default keeps; source_kind and
    # capture_run_id are not.
    assert _last_file_statistics(spark, name) == set(STATS_COLUMNS["raw_records"])


def test_a_table_an_earlier_version_created_gets_the_statistics_columns(spark, database):
    name = f"{database}.offset_commits"
    columns = ", ".join(f"{field.name} {field.dataType.simpleString()}" for field in offset_commits_schema.fields)
    spark.sql(f"CREATE TABLE {name} ({columns}) USING delta PARTITIONED BY (cluster)")
    assert STATS_COLUMNS_PROPERTY not in _properties(spark, name)

    ensure_table(spark, name, offset_commits_schema, partition_by=("cluster",), change_feed=True)
    properties = _properties(spark, name)
    assert properties[STATS_COLUMNS_PROPERTY] == "source_partition,source_offset,record_at"
    assert properties[CHANGE_FEED_PROPERTY] == "true"
    version = spark.sql(f"DESCRIBE HISTORY {name}").agg({"version": "max"}).first()[0]
    ensure_table(spark, name, offset_commits_schema, partition_by=("cluster",), change_feed=True)
    assert spark.sql(f"DESCRIBE HISTORY {name}").agg({"version": "max"}).first()[0] == version, "altered again"


def test_other_tables_keep_deltas_default_statistics(spark, database):
    name = f"{database}.quarantine_like"
    ensure_table(spark, name, raw_records_schema, partition_by=("cluster",))
    assert STATS_COLUMNS_PROPERTY not in _properties(spark, name)
    _one_raw_row(spark).write.format("delta").mode("append").saveAsTable(name)
    # The shipped default (conf/defaults.toml): the first 8 columns, record_id's unique strings among them.
    assert "record_id" in _last_file_statistics(spark, name)
