"""Each query a job runs is named by the step that ran it, in Spark's UI and event log (bench/scans.py
reads the names to say what each step read)."""

from __future__ import annotations

from dataclasses import replace

from bench.scans import _step, query_name
from jobs.runs import JobRun


def _described(spark) -> dict[int, str]:
    """Each SQL execution's description, once the events of those already run have reached the store."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    return {
        executions.apply(index).executionId(): executions.apply(index).description()
        for index in range(executions.size())
    }


def test_queries_are_named_by_the_step_that_ran_them(spark, spark_config):
    config = replace(spark_config, database="groupscope_query_names")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {config.database}")
    before = set(_described(spark))
    with JobRun(spark, config, "nightly") as run:
        run.progress("history")
        spark.range(3).collect()
        run.progress("history", "a detail names no step")
        spark.range(4).collect()
        run.progress("metrics")
        spark.range(5).collect()
    spark.range(6).collect()  # after the run: not the run's
    named = [description for key, description in sorted(_described(spark).items()) if key not in before]
    steps = [_step(description) for description in named]
    assert steps[:3] == ["history", "history", "metrics"]
    assert "nightly" not in (named[-1] or "")


def test_delta_and_merge_descriptions_name_the_step():
    assert _step("Delta: nightly: history: Filtering files for query") == "history"
    assert _step("nightly: ingest - MERGE operation - scanning files for matches") == "ingest"
    assert _step("Delta: history: Compute snapshot for version: 3") == "history"


def test_a_spark_connect_query_is_named_by_its_session_tag():
    # The server's event log: no description of the run's (Spark names the call site), the tag among the jobTags.
    session = "SparkConnect_SessionTag_User_ops_Session_0c5e1d6a-6f1e-4b53-9d59-3f1f4e5a7c10"
    started = {
        "description": "collect at SparkConnectPlanExecution.scala:190",
        "jobTags": [f"{session.replace('Session', 'Operation', 1)}_Operation_1", f"{session}_Tag_nightly: history"],
    }
    assert _step(query_name(started)) == "history"
    assert query_name({"description": "nightly: metrics", "jobTags": []}) == "nightly: metrics"
