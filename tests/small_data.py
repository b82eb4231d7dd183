"""The Spark settings of every run the suite makes, in its own session or through spark-submit.

The suite's tables hold tens to thousands of rows, so a run's cost is planning and per-query overhead,
not data: one task per shuffle, and expressions interpreted rather than compiled (compiling the large
history and metrics plans' expressions was a third of the JVM's CPU for a 170-record nightly; measured
with JFR). Delta replays each table's small log with one task. Plans are fixed when made, not adapted at
run time (adaptive execution renders and re-plans each query as its stages finish), and the plan each
query shows the listener is the short one: the two were a tenth of a warm 170-record nightly's time and
its JVM's CPU. Delta writes no checksum file (`_delta_log/*.crc`) beside each commit: computing one
made each commit of a new table run a query over its state, and skipping it cut a warm nightly's wall
time and JVM CPU by about a tenth (docs/bench-log.md); the tables and their logs are otherwise Delta's
own, and the shipped settings keep the checksums. The README's own commands run with the shipped
settings, so the compiled and adaptive paths and the checksums are exercised too
(tests/integration/test_sql_views.py).

Each Spark JVM the suite starts as a process of its own (spark-submit runs, the SQL shells, the Thrift and
Connect servers) lives a minute or two, and a thread-by-thread count of a 170-record nightly's JVM put
a third of its CPU in the C2 compiler, for code that ran for seconds. Such JVMs compile with C2 only what
is hot sixteen times over (SHORT_JVM_OPTIONS: tier-4 thresholds 16 to 40 times HotSpot's); the answers are the
same, only the compiler's work differs (docs/bench-log.md, "JIT thresholds of the suite's short JVMs"). The
suite's own long-lived sessions keep the defaults: they run for an hour and their warm code is C2's.
"""

from __future__ import annotations

import json

SMALL_DATA_SPARK_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.ui.explainMode": "simple",
    "spark.databricks.delta.writeChecksumFile.enabled": "false",
}


# HotSpot's defaults are 5000, 600, 15000 and 40000 (JDK 17).
SHORT_JVM_OPTIONS = (
    "-XX:Tier4InvocationThreshold=80000 -XX:Tier4MinInvocationThreshold=24000 "
    "-XX:Tier4CompileThreshold=240000 -XX:Tier4BackEdgeThreshold=640000"
)
# The variable spark-submit (and every Spark launcher built on it) adds to the JVM it starts.
SUBMIT_OPTIONS_VARIABLE = "SPARK_SUBMIT_OPTS"


def toml_lines(settings: dict[str, str] = SMALL_DATA_SPARK_CONF) -> str:
    """`settings` as lines of a `[spark.conf]` table."""
    return "".join(f"{json.dumps(key)} = {json.dumps(value)}\n" for key, value in settings.items())
