"""Nightly: capture and ingest what is new, decode it, rebuild the groups' history and metrics, refresh
the SQL views, and summarise. Capture and the live end-offset snapshot run when [capture] names a
cluster; [end_offsets] files are loaded too (the embedded default loads the sample's).

    spark-submit.sh nightly [--conf conf/<env>.toml] [--run-date YYYY-MM-DD]

With no arguments it runs on the embedded default (conf/local.toml): the lab capture shipped in
samples/, a local warehouse and an embedded metastore.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.capture import capture
from jobs.config import Config, parse_config, resolve_path
from jobs.decode import SILVER_SCHEMAS, decode
from jobs.end_offsets import live_end_offsets, load_end_offset_files, write_end_offsets
from jobs.history import HISTORY_TABLES, history
from jobs.ingest import ingest
from jobs.kafka_security import capture_configured
from jobs.metrics import METRICS_TABLES, metrics
from jobs.runs import JobRun
from jobs.session import build_session
from jobs.views import create_views


def summary(spark: SparkSession, config: Config, counts: dict[str, int]) -> str:
    offsets = spark.table(config.table("offset_commits")).where(F.col("cluster") == F.lit(config.cluster))
    groups = offsets.select("group_id").distinct().count()
    lines = [
        f"groupscope nightly: cluster {config.cluster!r}, database {config.database!r}, "
        f"warehouse {config.warehouse_dir}",
        f"  raw_records            {counts.get('raw_records', 0):>10,}",
        *(f"  {name:<22} {counts.get(name, 0):>10,}" for name in (*SILVER_SCHEMAS, *HISTORY_TABLES, *METRICS_TABLES)),
        f"  groups with commits    {groups:>10,}",
        f"  check: raw {counts.get('raw_records', 0):,} = decoded {counts.get('decoded', 0):,}"
        f" + quarantined {counts.get('quarantine', 0):,}",
        f"  query: ./spark-sql.sh -e 'SELECT * FROM {config.database}.group_health'",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_config(argv, __doc__)
    spark = build_session(config, "groupscope-nightly")
    try:
        with JobRun(spark, config, "nightly") as run:
            if capture_configured(config):
                run.progress("capture")
                capture(spark, config, run)
                run.progress("end_offsets", "live snapshot")
                write_end_offsets(spark, config, run, live_end_offsets(spark, config, run))
            run.progress("ingest")
            ingest(spark, config, run)
            end_offset_files = [resolve_path(path) for path in config.section("end_offsets").get("files", [])]
            if end_offset_files:
                run.progress("end_offsets", f"from {len(end_offset_files)} file path(s)")
                write_end_offsets(spark, config, run, load_end_offset_files(spark, end_offset_files))
            run.progress("decode")
            decode(spark, config, run)
            run.progress("history")
            history(spark, config, run)
            run.progress("metrics")
            metrics(spark, config, run)
            run.progress("views")
            create_views(spark, config)
            print(summary(spark, config, run.counts), flush=True)
        return run.exit_code
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
