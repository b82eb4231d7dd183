"""A real Spark standalone cluster on loopback runs the nightly job; its tables equal a local run's.

The master and the worker are JVMs of their own, started from the pyspark installation (`spark-class`);
the worker starts the executor JVM, whose Python workers run the job's code from the zip spark-submit.sh
ships with --py-files, and read the Delta jars it ships with --jars. A job that works only when the
driver and the executors share one process fails here. The reference is the same nightly run with the
local master: every Delta table of the two warehouses must hold the same rows. The cluster and its run
take minutes: they start in the background (tests/background_runs.py, started by conftest), after
the other runs of the session, and the test waits for them.
"""

from __future__ import annotations

from tests.background_runs import DATABASE, EMPTY_FOR_THE_SAMPLE, NIGHTLY_APP_NAME
from tests.delta_compare import delta_tables, table_rows


def test_nightly_on_a_standalone_cluster_writes_the_tables_a_local_run_writes(spark, cluster_nightly, local_nightly):
    on_cluster = cluster_nightly.result()
    local_warehouse = local_nightly.wait()

    assert [(app["name"], app["state"]) for app in on_cluster.applications] == [(NIGHTLY_APP_NAME, "FINISHED")]
    local_tables = delta_tables(local_warehouse, DATABASE)
    cluster_tables = delta_tables(on_cluster.warehouse, DATABASE)
    assert cluster_tables.keys() == local_tables.keys()
    assert {"raw_records", "offset_commits", "generations", "rebalances", "group_daily", "lag"} <= local_tables.keys()
    for name, path in sorted(local_tables.items()):
        local_rows = table_rows(spark, path)
        assert local_rows or name in EMPTY_FOR_THE_SAMPLE, name
        assert table_rows(spark, cluster_tables[name]) == local_rows, name
