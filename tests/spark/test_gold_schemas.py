"""Every gold transform gives its table's declared columns and types, checked rather than cast: a
wrong type fails the write instead of being truncated or nulled on the way in."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from jobs.config import GoldSettings
from jobs.steps.history import history_from_scratch
from jobs.steps.metrics import build_metrics
from jobs.tables import HISTORY_TABLES, METRICS_TABLES, SILVER_INPUTS, gold_rows, materialized
from schemas import gold, ops
from schemas import silver as silver_tables
from transforms.schema_check import SchemaMismatch


def test_each_history_and_metrics_transform_gives_its_declared_schema(spark):
    """Types are the plan's, so empty silver inputs show them; gold_rows refuses any difference."""
    silver = {name: spark.createDataFrame([], getattr(silver_tables, f"{name}_schema")) for name in SILVER_INPUTS}
    stored = {}

    def store(name, rows):
        checked = gold_rows(name, rows)
        assert checked.schema.names == gold.GOLD_SCHEMAS[name].names
        # Cut from its lineage as the job's store does: a table's plan inlined into every later one took
        # minutes of Spark's analysis, empty as the rows are.
        stored[name] = materialized(checked)
        return stored[name]

    no_topic_ids = spark.createDataFrame([], ops.topic_ids_schema)
    for name, rows in history_from_scratch(silver, no_topic_ids, GoldSettings()).items():
        store(name, rows)
    no_snapshots = spark.createDataFrame([], ops.end_offsets_schema)
    build_metrics(silver["offset_commits"], no_snapshots, stored, GoldSettings(), None, store)
    assert set(stored) == {*HISTORY_TABLES, *METRICS_TABLES}


def test_a_gold_column_of_another_type_is_refused_not_cast(spark):
    declared = gold.GOLD_SCHEMAS["rebalance_frequency"]
    rows = spark.createDataFrame([], declared)
    assert gold_rows("rebalance_frequency", rows).schema == rows.schema
    wrong = rows.withColumn(declared.names[-1], F.lit("many"))
    with pytest.raises(SchemaMismatch, match=rf"rebalance_frequency\.{declared.names[-1]}: declared \w+, found string"):
        gold_rows("rebalance_frequency", wrong)
