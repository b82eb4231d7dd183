"""What the metrics step's join of a night's commits with the group partitions' starts costs per pass.

    .venv/bin/python -m bench.metrics_join WAREHOUSE/DB.db/offset_commits [--rounds 3] [--days 1]

A continuing night reads the commits from its earliest start and joins each with its group partition's
start (metrics_carry.records_to_evaluate), then makes four passes over the result, each joining again.
This times one pass (group_partition_facts over the last `--days` of commits, the whole table's group
partitions as starts) three ways, alternating, in one session:

  plain   no join: what a first night's pass reads
  semi    a broadcast semi join on the four key columns (membership only)
  joined  the step's own: a broadcast join on the four columns, then `record_at >= start_at`

The first round warms the JVM up and is left out of the medians; printed: each variant's median wall
seconds and its ratio to plain. Thirty-first session (docs/bench-log.md), the 10M estate's warehouse as
night 7 finds it, 9.7M rows, idle machine, the job's 8 shuffle partitions: plain 1.74 s, semi 2.47
(1.42), joined 2.35 (1.36): the key lookup, not the join's output, is the cost.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.harness import machine_report, print_block
from jobs.session import spark_jars
from transforms.gold import metrics_carry
from transforms.gold.offsets import OFFSET_KEY

MIN_DISTANCE_MS = 60_000


def _session() -> SparkSession:
    return (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", ",".join(spark_jars()))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")  # the job's (conf/defaults.toml)
        .getOrCreate()
    )


def _variants(commits: DataFrame, days: int) -> dict[str, DataFrame]:
    since = commits.agg(F.max("record_at")).first()[0] - timedelta(days=days)
    recent = commits.where((F.col("record_at") >= F.lit(since)) | F.col("record_at").isNull())
    start_at = F.lit(since - timedelta(hours=1))
    starts = recent.select(*OFFSET_KEY).distinct().withColumn("start_at", start_at).localCheckpoint()
    joined = (
        recent.join(F.broadcast(starts), on=list(OFFSET_KEY), how="inner")
        .where(F.col("record_at") >= F.col("start_at"))
        .drop("start_at")
    )
    return {
        "plain": recent,
        "semi": recent.join(F.broadcast(starts.select(*OFFSET_KEY)), on=list(OFFSET_KEY), how="left_semi"),
        "joined": joined,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("offset_commits", help="an offset_commits Delta table's directory")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--days", type=int, default=1)
    args = parser.parse_args()
    spark = _session()
    variants = _variants(spark.read.format("delta").load(args.offset_commits), args.days)
    print_block("machine", machine_report())
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_number in range(args.rounds + 1):
        for name, records in variants.items():
            started = time.monotonic()
            rows = metrics_carry.group_partition_facts(records, min_distance_ms=MIN_DISTANCE_MS).count()
            elapsed = time.monotonic() - started
            print(f"round {round_number} {name:7} {elapsed:6.2f} s  ({rows} group partitions)", flush=True)
            if round_number:
                times[name].append(elapsed)
    medians = {name: statistics.median(walls) for name, walls in times.items()}
    print_block(
        "median wall of one pass (ratio to plain)",
        {name: f"{median:.2f} s ({median / medians['plain']:.2f})" for name, median in medians.items()},
    )


if __name__ == "__main__":
    main()
