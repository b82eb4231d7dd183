"""Loads a generator output's end-offset snapshots and topic ids into a warehouse's ops tables.

    .venv/bin/python -m bench.ops_tables DATA WAREHOUSE [--database NAME] [--cluster NAME] [--only TABLE]

What a capture job would have written before the nightly run: `end_offsets` (the metrics job's
snapshots) and `topic_ids` (names for KIP-848 topic ids), as Delta tables in the catalog; `--only
topic_ids` for a benchmark that gives the nightly its end offsets night by night (bench/nights.py). A process
of its own, because the embedded metastore serves one process at a time.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import functions as F

from jobs.config import load_config
from jobs.session import build_session
from jobs.tables import END_OFFSETS, TOPIC_IDS, ensure_table, replace_cluster_rows
from schemas.ops import end_offsets_schema, topic_ids_schema


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", type=Path)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--database", default="bench")
    parser.add_argument("--cluster", default="bench")
    parser.add_argument("--only", choices=(END_OFFSETS, TOPIC_IDS), help="load this table alone")
    args = parser.parse_args(argv)
    config = load_config(
        overrides={"storage": {"warehouse_dir": str(args.warehouse)}, "catalog": {"database": args.database}}
    )
    spark = build_session(config, "groupscope-bench-ops-tables")
    try:
        for name, schema, path in (
            (END_OFFSETS, end_offsets_schema, args.data / "end_offsets.parquet"),
            (TOPIC_IDS, topic_ids_schema, args.data / "topic_ids.parquet"),
        ):
            if args.only not in (None, name):
                continue
            rows = spark.read.parquet(str(path)).withColumn("cluster", F.lit(args.cluster))
            table = config.table(name)
            ensure_table(spark, table, schema, partition_by=("cluster",))
            replace_cluster_rows(
                spark, table, rows.select(*[F.col(f.name).cast(f.dataType) for f in schema]), args.cluster
            )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
