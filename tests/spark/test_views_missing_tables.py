"""`views` on a warehouse the nightly has not written yet: one line naming what is missing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.steps.views import VIEWS, ViewInputMissing, create_views, tables_read


def test_the_views_read_the_gold_tables_and_no_view_counts_as_one():
    read = set().union(*(tables_read(name) for name in VIEWS))
    assert {"generations", "rebalances", "lag", "group_status"} <= read
    assert not read & set(VIEWS)


def test_views_before_any_nightly_say_in_one_line_what_to_run(spark, spark_config):
    config = replace(spark_config, database="groupscope_views_before_nightly")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {config.database}")
    with pytest.raises(ViewInputMissing) as raised:
        create_views(spark, config)
    message = str(raised.value)
    assert "\n" not in message and "run the nightly first" in message
    assert "generations" in message and "lag" in message
    assert not spark.catalog.tableExists(config.table("group_health"))
