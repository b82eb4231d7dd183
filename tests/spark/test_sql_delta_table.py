"""jobs.delta_tables.SqlDeltaTable, the DeltaTable a Spark Connect session gets, makes the jobs' MERGEs as
Delta's own SQL: each MERGE shape the jobs build, run through it and through delta-spark's DeltaTable on
two copies of one table, leaves the same rows. Run here on a classic session, since the SQL is the same;
tests/integration/test_spark_connect.py runs a nightly through a server."""

from __future__ import annotations

import pytest
from delta.tables import DeltaTable as ClassicDeltaTable
from pyspark.sql import functions as F

from jobs.delta_tables import SqlDeltaTable

DATABASE = "groupscope_sql_delta_table"
SCHEMA = "cluster string, group_id string, generation int, state string"
STORED = [("c", "g1", 1, "a"), ("c", "g1", 2, "b"), ("c", "g2", 1, None), ("d", "g1", 1, "other cluster")]
SOURCE = [("c", "g1", 2, "new"), ("c", "g3", 1, "added"), ("c", "g2", 1, None)]


def _replace_group_rows(table, source):
    """history_state.replace_group_rows: a group's rows from a generation on give way to the source's."""
    markers = source.select("cluster", "group_id", F.lit(2).alias("from_generation"), F.lit(True).alias("marker"))
    rows = source.withColumn("marker", F.lit(False)).unionByName(markers, allowMissingColumns=True)
    condition = (
        "target.cluster = 'c' AND source.marker AND target.cluster = source.cluster"
        " AND target.group_id = source.group_id AND target.generation >= source.from_generation"
    )
    values = {f"`{name}`": f"source.`{name}`" for name in source.columns}
    (
        table.alias("target")
        .merge(rows.alias("source"), condition)
        .whenMatchedDelete()
        .whenNotMatchedInsert(condition="NOT source.marker", values=values)
        .execute()
    )


def _store_states(table, source):
    """history_state.store_states: a null state deletes, another replaces, a new one is inserted."""
    (
        table.alias("target")
        .merge(source.alias("source"), "target.cluster = source.cluster AND target.group_id = source.group_id")
        .whenMatchedDelete(condition="source.state IS NULL")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll(condition="source.state IS NOT NULL")
        .execute()
    )


def _widen(table, source):
    """commit_summaries._widen: matched rows updated from expressions of both sides, the others inserted."""
    (
        table.alias("target")
        .merge(source.alias("source"), "target.cluster = source.cluster AND target.group_id = source.group_id")
        .whenMatchedUpdate(set={"generation": "greatest(target.generation, source.generation)"})
        .whenNotMatchedInsertAll()
        .execute()
    )


@pytest.mark.parametrize("merge", [_replace_group_rows, _store_states, _widen])
def test_each_merge_the_jobs_make_leaves_what_delta_sparks_own_leaves(spark, merge):
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    tables = {}
    for kind in ("classic", "sql"):
        name = f"{DATABASE}.{merge.__name__.strip('_')}_{kind}"
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.createDataFrame(STORED, SCHEMA).write.format("delta").saveAsTable(name)
        tables[kind] = name
    source = spark.createDataFrame(SOURCE, SCHEMA)
    merge(ClassicDeltaTable.forName(spark, tables["classic"]), source)
    merge(SqlDeltaTable.forName(spark, tables["sql"]), source)
    classic, through_sql = (sorted(spark.table(tables[kind]).collect()) for kind in ("classic", "sql"))
    assert through_sql == classic
    assert classic != sorted(spark.createDataFrame(STORED, SCHEMA).collect())  # the merge changed something
