"""The Python segment reader alone (ingest's largest cost on a large night), against a baseline checkout.

    .venv/bin/python -m bench.segment_reader SEGMENTS [--baseline CHECKOUT] [--partitions N]

SEGMENTS: a directory of `__consumer_offsets-N` directories (bench.generate's `segments`). Each checkout
(this one, then the baseline's, alternating twice) reads the first N partitions' files the way an ingest
task does (`read_partition`, transactions resolved, then `raw_batch` into Arrow in batches of 10,000),
in a process of its own on one core: records, seconds of CPU, microseconds a record, and the ratio
to the baseline.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

BATCH = 10_000

_READ = """
import json, sys, time
from transforms.decoder.record_batches import read_partition
from transforms.bronze import raw_batch
from jobs.segment_files import discover_partitions
records, cpu = 0, 0.0
for files in discover_partitions([sys.argv[1]])[: int(sys.argv[2])]:
    segments = [(path, open(path, "rb").read()) for path in files]
    started = time.process_time()
    pending = []
    for record in read_partition(segments):
        pending.append(record)
        if len(pending) == BATCH:
            raw_batch(pending, "bench", "run")
            records, pending = records + len(pending), []
    raw_batch(pending, "bench", "run")
    records += len(pending)
    cpu += time.process_time() - started
print(json.dumps({"records": records, "cpu_s": cpu}))
""".replace("BATCH", str(BATCH))


def measure(checkout: Path, segments: str, partitions: int) -> dict:
    output = subprocess.run(
        [sys.executable, "-c", _READ, segments, str(partitions)],
        cwd=checkout,
        env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("segments")
    parser.add_argument("--baseline", type=Path, help="another checkout of groupscope (e.g. a git worktree)")
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    checkouts = {"this": Path(__file__).resolve().parents[1]}
    if args.baseline:
        checkouts["baseline"] = args.baseline.resolve()
    best: dict[str, dict] = {}
    for _ in range(2):  # alternating, so a change in the machine's load falls on both
        for label, checkout in checkouts.items():
            figures = measure(checkout, args.segments, args.partitions)
            if label not in best or figures["cpu_s"] < best[label]["cpu_s"]:
                best[label] = figures
    for label, figures in best.items():
        per_record = figures["cpu_s"] / max(figures["records"], 1) * 1e6
        records, cpu = figures["records"], figures["cpu_s"]
        line = f"{label:9} {records:>11,} records  {cpu:8.1f} s CPU  {per_record:5.2f} us/record"
        if label != "baseline" and "baseline" in best:
            line += f"  ({figures['cpu_s'] / best['baseline']['cpu_s']:.2f} x the baseline's CPU)"
        print(line)


if __name__ == "__main__":
    main()
