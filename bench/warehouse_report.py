"""What a benchmark reads back from a warehouse after its runs: the nightly runs' rows of `job_runs`,
and optionally which tables differ, row by row, from another warehouse's.

    .venv/bin/python -m bench.warehouse_report WAREHOUSE [--database NAME] [--compare OTHER_WAREHOUSE]

Prints one JSON object: {"runs": [{run_id, outcome, run_date, counts}, ...] (nightly runs in the order
they started), "differing": [table, ...] (with --compare; job_runs is not compared)}. A process of its
own, because the embedded metastore serves one process at a time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import functions as F

from jobs.config import load_config
from jobs.runs import JOB_RUNS
from jobs.session import build_session
from tests.delta_compare import differing_tables


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--database", default="bench")
    parser.add_argument("--compare", type=Path, help="another warehouse: list the tables whose rows differ")
    args = parser.parse_args(argv)
    config = load_config(
        overrides={"storage": {"warehouse_dir": str(args.warehouse)}, "catalog": {"database": args.database}}
    )
    spark = build_session(config, "groupscope-bench-warehouse-report")
    try:
        rows = (
            spark.table(config.table(JOB_RUNS))
            .where(F.col("job") == F.lit("nightly"))
            .orderBy("started_at")
            .select("run_id", "outcome", F.col("run_date").cast("string").alias("run_date"), "counts_json")
            .collect()
        )
        report = {
            "runs": [
                {
                    "run_id": row["run_id"],
                    "outcome": row["outcome"],
                    "run_date": row["run_date"],
                    "counts": json.loads(row["counts_json"] or "{}"),
                }
                for row in rows
            ]
        }
        if args.compare is not None:
            report["differing"] = differing_tables(spark, args.compare, args.warehouse, args.database)
    finally:
        spark.stop()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
