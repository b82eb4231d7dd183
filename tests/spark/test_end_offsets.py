"""End-offset snapshots from files (the lab captures' end_offsets.json) into `end_offsets`, loaded once
however often they are given, and how a live snapshot picks its topics.

The live snapshot through Kafka's AdminClient is tested against a real broker in tests/integration/test_capture.py,
where it shares that module's broker and its secured listener.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from pyspark.sql import functions as F

from jobs.runs import JobRun
from jobs.steps.end_offsets import load_end_offset_files, snapshot_topics, write_end_offsets
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.spark

CAPTURES = REPO_ROOT / "tests" / "captures" / "kafka-4.2.1"
DATABASE = "groupscope_end_offsets"


@pytest.fixture(scope="module")
def config(spark, spark_config):
    if not spark.catalog.databaseExists(DATABASE):
        spark.sql(f"CREATE DATABASE {DATABASE}")
    return replace(spark_config, database=DATABASE, cluster="lab-files")


def file_rows(paths) -> set[tuple]:
    """(topic, partition, end offset, observed_at in ms) as the files state them: the final snapshot at the
    top and the series taken during the scenario, if the file has one."""
    rows = set()
    for path in paths:
        document = json.loads(path.read_text())
        for snapshot in [document, *document.get("series", [])]:
            for topic, partitions in snapshot["offsets"].items():
                rows |= {(topic, int(part), end, snapshot["observed_at_ms"]) for part, end in partitions.items()}
    return rows


def table_rows(spark, config) -> list[tuple]:
    return [
        tuple(row)
        for row in spark.table(config.table("end_offsets"))
        .where(F.col("cluster") == F.lit(config.cluster))
        .select("topic", "partition", "end_offset", F.unix_millis("observed_at"))
        .collect()
    ]


def load(spark, config, paths) -> int:
    with JobRun(spark, config, "end_offsets") as run:
        added = write_end_offsets(spark, config, run, load_end_offset_files(spark, paths))
    assert run.exit_code == 0, "the run failed; see its job_runs row"
    return added


def test_capture_files_load_once_however_often_they_are_given(spark, config):
    files = [CAPTURES / "range" / "end_offsets.json", CAPTURES / "transactions" / "end_offsets.json"]
    expected = file_rows(files)
    # One snapshot given twice in the same call (as a file and through its capture directory) counts once.
    assert load(spark, config, [*files, CAPTURES / "range"]) == len(expected) > 0
    assert sorted(table_rows(spark, config)) == sorted(expected)
    # The same snapshots again, one of them found through its capture directory: nothing new.
    assert load(spark, config, [files[0], CAPTURES / "transactions"]) == 0
    assert sorted(table_rows(spark, config)) == sorted(expected)


def test_capture_files_hold_a_series_and_all_of_it_loads(spark):
    document = json.loads((CAPTURES / "kip848" / "end_offsets.json").read_text())
    times = [snapshot["observed_at_ms"] for snapshot in document["series"]]
    # About one a second until the final snapshot, which comes after all of them.
    assert len(times) >= 10 and times == sorted(times) and times[-1] < document["observed_at_ms"]
    loaded = load_end_offset_files(spark, [CAPTURES / "kip848"])
    loaded_times = {row[0] for row in loaded.select(F.unix_millis("observed_at")).distinct().collect()}
    assert loaded_times == {*times, document["observed_at_ms"]}
    # kip848 grows `payments` from 4 to 6 partitions mid-scenario: the series follows it.
    partitions = [len(snapshot["offsets"].get("payments", {})) for snapshot in document["series"]]
    assert 4 in partitions and 6 in partitions


def test_a_single_snapshot_file_loads_as_before(spark, tmp_path):
    """Captures made before the series existed hold one snapshot and no "series": they load as that one."""
    document = json.loads((CAPTURES / "range" / "end_offsets.json").read_text())
    single = tmp_path / "end_offsets.json"
    single.write_text(json.dumps({"observed_at_ms": document["observed_at_ms"], "offsets": document["offsets"]}))
    loaded = load_end_offset_files(spark, [tmp_path]).select(
        "topic", "partition", "end_offset", F.unix_millis("observed_at")
    )
    expected = {
        (t, int(p), end, document["observed_at_ms"])
        for t, parts in document["offsets"].items()
        for p, end in parts.items()
    }
    assert {tuple(row) for row in loaded.collect()} == expected and len(expected) == 9


def test_a_path_without_a_snapshot_file_is_an_error(spark, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"end_offsets\.json"):
        load_end_offset_files(spark, [tmp_path])


def test_snapshot_topics_are_the_configured_then_the_consumed_then_all():
    existing = {"orders", "stock", "audit"}
    assert snapshot_topics(["stock", "audit"], {"orders"}, existing) == ["audit", "stock"]
    assert snapshot_topics([], {"orders", "deleted-since"}, existing) == ["orders"]
    assert snapshot_topics([], set(), existing) == ["audit", "orders", "stock"]
