"""Reads two groupscope warehouses on S3 and prints, as JSON, what tests/integration/test_s3.py asserts:
the tables whose rows differ between them (tests/delta_compare.py's row comparison, over s3a:// paths),
the row count of every SQL view of the first one, read through its own metastore, and the rows of one
view (TIMELINE_QUERY).

    python -m tests.s3_tables CONF EXPECTED_WAREHOUSE ACTUAL_WAREHOUSE [EXPECTED_INPUTS ACTUAL_INPUTS]

EXPECTED_INPUTS and ACTUAL_INPUTS: the segment folders each warehouse was written from, when they differ
(the same files in the bucket and in the checkout); the rows name each record's file, so the expected
rows are compared with EXPECTED_INPUTS in those names read as ACTUAL_INPUTS.

Run as a process of its own: its session is built by the jobs' factory from CONF (the S3 settings,
credentials from the environment, the embedded metastore that holds the views), which the test
process's shared session cannot be.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from jobs.config import load_config
from jobs.session import build_session
from jobs.steps.views import VIEWS
from tests.delta_compare import RUN_TABLES, table_rows

# A view's rows as one JSON text each: what the SQL shells print for it (tests/s3_shells.py) is compared
# with what this process's session, built by the jobs' factory, reads.
TIMELINE_HEADER = "timeline_row"
TIMELINE_QUERY = f"SELECT to_json(struct(*)) AS {TIMELINE_HEADER} FROM groupscope.rebalance_timeline"


def delta_tables(spark, warehouse: str, database: str) -> dict[str, str]:
    """The database's Delta tables under an s3a:// warehouse, by name, without the run records."""
    jvm = spark.sparkContext._jvm
    database_dir = jvm.org.apache.hadoop.fs.Path(f"{warehouse}/{database}.db")
    fs = database_dir.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    tables = {}
    for status in fs.listStatus(database_dir):
        path = status.getPath()
        if fs.exists(jvm.org.apache.hadoop.fs.Path(path, "_delta_log")) and path.getName() not in RUN_TABLES:
            tables[path.getName()] = path.toString()
    return tables


def main(conf: str, expected: str, actual: str, expected_inputs: str = "", actual_inputs: str = "") -> dict:
    config = load_config(Path(conf))
    spark = build_session(config, "groupscope-s3-compare")
    try:
        expected_tables = delta_tables(spark, expected, config.database)
        actual_tables = delta_tables(spark, actual, config.database)
        differing = sorted(expected_tables.keys() ^ actual_tables.keys())
        for name in sorted(expected_tables.keys() & actual_tables.keys()):
            expected_rows = sorted(
                row.replace(expected_inputs, actual_inputs) for row in table_rows(spark, expected_tables[name])
            )
            if expected_rows != table_rows(spark, actual_tables[name]):
                differing.append(name)
        views = {name: spark.table(f"{config.database}.{name}").count() for name in VIEWS}
        timeline = sorted(row[0] for row in spark.sql(TIMELINE_QUERY).collect())
        return {"tables": sorted(expected_tables), "differing": differing, "views": views, "timeline": timeline}
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:6])))
