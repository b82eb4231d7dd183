"""An incremental nightly killed with SIGKILL part-way, then run again, leaves exactly an uninterrupted run's tables.

The reference is the session's local nightly run of the quickstart capture (conftest `local_nightly`): one
run over the whole log. The crash run gets a warehouse of its own and two nights over the same live path
(tests/background_runs.py): the first over the log as it stood halfway through the capture, the second
over the whole log, an incremental run over a grown log (files read before, read on; snapshots added),
killed, process group and all, when its log shows a progress line picked at random (so any stage can be
hit, and the seed in the failure message replays it), then run again to the end. Every table but
`job_runs` must hold the reference's rows: the uninterrupted sequence of nights equals the one run over
the final log (tests/spark/test_incremental_nightly.py proves that on its own), so a difference is the
kill's. The nights take minutes: they start in the background as soon as the reference has ended
(started by conftest) and the test waits for them. bench/crash_safety.py does the same with more kills,
in the first night too (too slow for CI).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.tables import ensure_table
from tests.background_runs import DATABASE
from tests.delta_compare import differing_tables


def test_a_second_night_killed_at_a_random_point_then_run_again_leaves_the_uninterrupted_tables(
    spark, local_nightly, crash_run
):
    crash = crash_run.result()
    first_night = crash.first_night
    assert first_night.popen.returncode == 0, f"{crash.context}; the first night failed:\n{first_night.log_tail()}"
    assert crash.killed_at.startswith("[nightly"), crash.context
    assert crash.rerun.popen.returncode == 0, f"{crash.context}; the rerun failed:\n{crash.rerun.log_tail()}"
    assert differing_tables(spark, local_nightly.warehouse, crash.warehouse, DATABASE) == [], crash.context


def test_a_table_whose_creation_was_killed_is_created_again(spark, spark_config):
    # What a kill during the first write leaves: files and an empty _delta_log, no committed version,
    # no table in the catalog. Delta refuses to create a table over such a location by itself.
    name = spark_config.table("killed_during_creation")
    location = Path(spark.catalog.getDatabase(spark_config.database).locationUri.removeprefix("file:"))
    debris = location / "killed_during_creation"
    (debris / "_delta_log").mkdir(parents=True)
    (debris / "_delta_log" / ".00000000000000000000.json.b1946ac9.tmp").write_text("{}")
    (debris / "cluster=sample").mkdir()
    (debris / "cluster=sample" / "part-00000.snappy.parquet").write_bytes(b"PAR1")
    schema = StructType([StructField("cluster", StringType()), StructField("value", LongType())])

    ensure_table(spark, name, schema, partition_by=("cluster",))
    assert spark.table(name).count() == 0
    # What a kill between Delta's first commit and the metastore entry leaves: a committed table at the
    # location, unknown to the catalog. It is never cleared: the table is registered over it.
    committed = spark_config.table("killed_before_registration")
    rows = spark.createDataFrame([("sample", 1)], schema)
    rows.write.format("delta").partitionBy("cluster").save(str(location / "killed_before_registration"))
    ensure_table(spark, committed, schema, partition_by=("cluster",))
    assert spark.table(committed).collect() == [Row(cluster="sample", value=1)]
