"""Decode throughput: groupscope against Kafka's DumpLogSegments, and against a plain Spark scan.

    .venv/bin/python -m bench.decode_throughput DATA [--work DIR]

DATA is an output of bench.generate. In one run, on the same files, one after the other:
1. Kafka's own `DumpLogSegments --offsets-decoder` over every segment file (one JVM, its output
   written to a file): the records it decodes per second.
2. groupscope, in one Spark session with Spark's default memory settings (local[2]):
   - ingest: the segment files -> bronze `raw_records` (Delta);
   - scan: a plain Spark scan of `raw_records`, every column, into Spark's no-op sink (the practical
     limit of the engine on that table);
   - copy: `raw_records` written unchanged into a new Delta table (what writing the rows once costs,
     the floor of any job that writes them);
   - decoder: every raw record decoded (silver's decoder) into the no-op sink: the work that
     DumpLogSegments does, without writing tables;
   - decode job: `jobs.decode` (raw_records -> the six silver tables, written as Delta, and the raw =
     decoded + quarantined check), the whole "raw -> silver" step.
Goals (issue 5): decode >= 5x DumpLogSegments' records/s; decode time <= 3x scan time. Both are
reported for the decoder and for the decode job.
Each phase prints wall time, CPU seconds of its processes and their peak memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import functions as F

from bench.harness import (
    ESTATE_CLUSTER,
    REPO_ROOT,
    Phase,
    ProcessTree,
    estate_config,
    fail,
    machine_report,
    phase_rows,
    print_block,
)
from jobs.runs import JobRun
from jobs.session import build_session
from jobs.steps.decode import decode
from jobs.steps.ingest import ingest
from jobs.tables import RAW_RECORDS
from lab.broker import DUMP_LOG_SEGMENTS
from transforms import silver


def dump_log_segments(files: list[Path], out: Path) -> tuple[Phase, int]:
    """Kafka's decoder over every file in one JVM; returns the phase and the data records it printed."""
    jars = REPO_ROOT / "jvm" / "kafka-4" / "jars"
    command = ["java", "-cp", f"{jars}/*", DUMP_LOG_SEGMENTS, "--offsets-decoder", "--files", ",".join(map(str, files))]
    with open(out, "w") as stdout, subprocess.Popen(command, stdout=stdout, stderr=subprocess.DEVNULL) as process:
        tree = ProcessTree(process.pid)
        with tree.phase("DumpLogSegments") as phase:
            code = process.wait()
        tree.close()
    if code != 0:
        fail(f"DumpLogSegments exited with {code}")
    records = 0
    with open(out) as dump:
        for line in dump:
            records += line.startswith("| offset:") and "endTxnMarker" not in line
    return phase, records


def spark_phases(data: Path, work: Path) -> tuple[dict[str, Phase], int]:
    config = estate_config(data, work / "warehouse")
    tree = ProcessTree()
    spark = build_session(config, "groupscope-bench-decode")
    phases = {}
    try:
        with JobRun(spark, config, "ingest") as run, tree.phase("ingest: segments -> raw_records") as phase:
            records = ingest(spark, config, run)
        phases["ingest"] = phase
        raw = spark.table(config.table(RAW_RECORDS)).where(F.col("cluster") == F.lit(ESTATE_CLUSTER))
        with tree.phase("scan of raw_records") as phase:
            raw.write.format("noop").mode("overwrite").save()
        phases["scan"] = phase
        with tree.phase("copy of raw_records into a new Delta table (no decoding)") as phase:
            raw.write.format("delta").save(str(work / "raw_records_copy"))
        phases["copy"] = phase
        with tree.phase("decoder: raw_records -> decoded rows (no-op sink)") as phase:
            silver.decode_raw_records(raw).write.format("noop").mode("overwrite").save()
        phases["decoder"] = phase
        with JobRun(spark, config, "decode") as run, tree.phase("decode job: raw_records -> silver tables") as phase:
            decode(spark, config, run)
        phases["decode"] = phase
        if run.exit_code != 0:
            fail("the decode job failed; see its job_runs row")
        print_block("silver tables", {name: f"{count:,}" for name, count in sorted(run.counts.items())})
    finally:
        spark.stop()
        tree.close()
    return phases, records


def ratio_line(value: float, goal: str, is_met: bool) -> str:
    return f"{value:.2f}x  (goal {goal}: {'met' if is_met else 'NOT met'})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", type=Path, help="a bench.generate output directory")
    parser.add_argument("--work", type=Path, help="scratch space (default: a temporary directory, removed after)")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    manifest = json.loads((data / "manifest.json").read_text())
    files = sorted((data / "segments").rglob("*.log"))
    work = Path(tempfile.mkdtemp(prefix="groupscope-bench-", dir=args.work))
    print_block("machine", machine_report())
    print_block("data", {"directory": str(data), "records": f"{manifest['records']:,}", "segment files": len(files)})
    try:
        dump, dump_records = dump_log_segments(files, work / "dump.txt")
        print_block(f"DumpLogSegments --offsets-decoder ({dump_records:,} records)", phase_rows(dump, dump_records))
        phases, records = spark_phases(data, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for phase in phases.values():
        print_block(f"groupscope {phase.name} ({records:,} records)", phase_rows(phase, records))
    dump_rate, dump_cpu_rate = dump_records / dump.seconds, dump_records / dump.cpu_seconds
    goals = {}
    for name in ("decoder", "decode"):
        phase = phases[name]
        rate, vs_scan = records / phase.seconds, phase.seconds / phases["scan"].seconds
        goals[f"{phase.name}: vs DumpLogSegments, records/s"] = ratio_line(
            rate / dump_rate, ">= 5x", rate >= 5 * dump_rate
        )
        goals[f"{phase.name}: vs DumpLogSegments, per CPU-second"] = (
            f"{records / phase.cpu_seconds / dump_cpu_rate:.2f}x"
        )
        goals[f"{phase.name}: time vs scan time"] = ratio_line(vs_scan, "<= 3x", vs_scan <= 3)
    goals["decode job: time vs the copy's time (not a goal: writing the rows once is its floor)"] = (
        f"{phases['decode'].seconds / phases['copy'].seconds:.2f}x"
    )
    end_to_end = phases["ingest"].seconds + phases["decode"].seconds
    goals["segments -> silver tables (ingest + decode job) vs DumpLogSegments"] = (
        f"{records / end_to_end / dump_rate:.2f}x"
    )
    goals["load average at the end"] = machine_report()["load average (1, 5, 15 min)"]
    print_block("goals", goals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
