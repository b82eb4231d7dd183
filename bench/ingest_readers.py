"""Ingest's two segment readers on the same partitions: the JVM's (groupscope.SegmentSource) against the
Python reader, in one Spark session, alternating.

    .venv/bin/python -m bench.ingest_readers SEGMENTS [--partitions N] [--repeat 3]

SEGMENTS: a directory of `__consumer_offsets-N` directories (bench.generate's `segments`, a broker's log
dir). Each round reads the first N partitions with each reader, as ingest does
(`read_partition_directories`: the JVM reader's check of the files included), and counts the rows and sums
a hash of every column; both readers must give the same count and sum. It prints the machine, each
reader's best wall time, records a second, and the ratio JVM / Python.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

from pyspark.sql import functions as F

from bench.harness import machine_report, print_block
from jobs.config import load_config
from jobs.ingest_plan import FileRead
from jobs.segment_files import as_source_file, discover_partitions
from jobs.segment_reader import READER_CONF
from jobs.session import build_session
from jobs.steps.ingest import read_partition_directories


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("segments")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print_block("machine", machine_report())
    scratch = tempfile.mkdtemp(prefix="bench-ingest-readers-")  # the session's warehouse: nothing is written
    config = load_config(
        overrides={"storage": {"warehouse_dir": scratch}, "input": {"cluster": "bench", "segment_paths": []}}
    )
    spark = build_session(config, "bench-ingest-readers")
    partitions = [[FileRead(as_source_file(file)) for file in files] for files in discover_partitions([args.segments])][
        : args.partitions
    ]
    best: dict[str, float] = {}
    results: dict[str, tuple] = {}
    for _ in range(args.repeat):
        for reader in ("jvm", "python"):
            spark.conf.set(READER_CONF, reader)
            started = time.perf_counter()
            rows = read_partition_directories(spark, partitions, "bench", "run")
            every_column = F.xxhash64(*rows.columns).cast("decimal(38,0)")
            result = tuple(rows.agg(F.count(F.lit(1)), F.sum(every_column)).first())
            seconds = time.perf_counter() - started
            best[reader] = min(best.get(reader, seconds), seconds)
            if results.setdefault(reader, result) != result:
                raise SystemExit(f"{reader}: the same read gave {result}, then {results[reader]}")
    if results["jvm"] != results["python"]:
        raise SystemExit(f"the readers differ: JVM {results['jvm']}, Python {results['python']}")
    records = results["jvm"][0]
    for reader, seconds in best.items():
        print(f"{reader:7} {records:>11,} records  {seconds:7.1f} s  {records / seconds:>12,.0f} records/s")
    print(f"JVM / Python wall time: {best['jvm'] / best['python']:.2f}")
    spark.stop()
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
