"""Runs the what-if replay: each rebalance's input through Kafka's own assignors in a JVM of their own.

The assignors are the pinned kafka-clients' and group coordinator's (jvm/assignors, compiled by
scripts/bootstrap.sh), fed one JSON line per rebalance on stdin from the driver; rebalances are few
(a handful per group and day), so one short JVM per history run costs about a second.

Its result lines go back into Spark as a list the driver holds, which Spark ships inside the tasks that
read it: so they are cut into tasks of at most TASK_BYTES, parsed into rows once and held, and the
stages after read those. In two tasks (Spark's default for a list), a from-scratch run over 108M records
made tasks of 48 MB, and serializing one took the driver's whole 1 GiB heap: the run hung.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructType

from jobs.config import REPO_ROOT
from jobs.delta_tables import is_connect
from jobs.tables import materialized
from schemas.columns import column
from schemas.whatif import REPLAYED_PARTITION
from transforms.gold.generations import REBALANCE

# The most bytes of result lines one task carries.
TASK_BYTES = 1 << 20
JARS = REPO_ROOT / "jvm" / "assignors" / "jars"
MAIN_CLASS = "groupscope.AssignorReplay"
REPLAYED = StructType(
    [
        column(
            "key",
            StructType(
                [
                    column("cluster", StringType()),
                    column("group_id", StringType()),
                    column("incarnation", IntegerType()),
                    column("generation", IntegerType()),
                ]
            ),
        ),
        column("assignor", StringType()),
        column("round_count", IntegerType()),
        column("assignment", ArrayType(REPLAYED_PARTITION)),
        column("revoked", ArrayType(REPLAYED_PARTITION)),
        column("error", StringType()),
    ]
)


class ReplayFailed(RuntimeError):
    """The assignor JVM exited with an error (its stderr is the message)."""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(os.path.join(home, "bin", "java")) if home else (shutil.which("java") or "java")


def replay_lines(lines: list[str]) -> list[str]:
    """Replay input lines -> result lines (one per rebalance and assignor), by Kafka's assignors."""
    if not (JARS / "groupscope-assignors.jar").exists():
        raise ReplayFailed(f"{JARS}/groupscope-assignors.jar is missing: run scripts/bootstrap.sh job")
    command = [
        _java(),
        "-Xmx256m",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
        "-cp",
        f"{JARS}/*",
        MAIN_CLASS,
    ]
    done = subprocess.run(command, input="\n".join(lines), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ReplayFailed(f"assignor replay exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout.splitlines()


def replay_assignors(inputs: DataFrame) -> DataFrame:
    """whatif_inputs.replay_inputs rows -> (rebalance key, assignor, round_count, assignment, revoked)."""
    spark = inputs.sparkSession
    lines = [row["replay_json"] for row in inputs.select("replay_json").collect()]
    results = replay_lines(lines) if lines else []
    refused = [line for line in results if '"error"' in line and json.loads(line).get("error")]
    if refused:  # left out of rebalance_whatif, and said: the rest of the night goes on
        print(f"assignor replay: {len(refused)} rebalance(s) refused, e.g. {refused[0][:500]}", file=sys.stderr)
    parsed = (
        lines_frame(spark, results).select(F.from_json("line", REPLAYED).alias("r")).where(F.col("r.error").isNull())
    )
    return materialized(
        parsed.select(
            *[F.col(f"r.key.{name}").alias(name) for name in REBALANCE],
            "r.assignor",
            "r.round_count",
            "r.assignment",
            "r.revoked",
        )
    )


def lines_frame(spark: SparkSession, lines: list[str]) -> DataFrame:
    """(line) rows of a list the driver holds, in tasks of at most about TASK_BYTES each. Spark Connect
    ships a large list to its server in chunks of its own (a cached relation), not inside tasks."""
    rows = [(line,) for line in lines]
    if is_connect(spark):
        return spark.createDataFrame(rows, "line string")
    slices = max(1, math.ceil(sum(len(line) for line in lines) / TASK_BYTES))
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, slices), "line string")
