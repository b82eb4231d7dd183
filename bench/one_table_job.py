"""The least a groupscope job costs: bench.quickstart_cost's baseline.

    .venv/bin/python -m bench.one_table_job [--conf conf/<env>.toml]

Starts the session a job starts (jobs.session), reads the configured segment files with ingest's own
reader, writes them as one Delta table in the configured metastore and reads its row count back.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import SparkSession

from jobs.config import Config
from jobs.runs import JobRun, run_job
from jobs.steps.ingest import read_inputs

TABLE = "one_table_probe"


def one_table(spark: SparkSession, config: Config, run: JobRun) -> None:
    rows = read_inputs(spark, config, "one-table-job")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {config.database}")
    rows.write.format("delta").mode("overwrite").saveAsTable(f"{config.database}.{TABLE}")
    print(f"{TABLE}: {spark.table(f'{config.database}.{TABLE}').count()} rows")


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("one_table", one_table, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
