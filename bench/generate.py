"""Generates a large estate's `__consumer_offsets` data, in the formats brokers and Spark write it.

    .venv/bin/python -m bench.generate OUT --records 1000000 [--seed 1] [--workers 2]

Writes under OUT (never into the repository):
- `segments/__consumer_offsets-N/<base offset>.log`: the broker's segment files, 50 partitions
  (groups placed by Kafka's own hash), a cleaned first segment then rolled ones;
- `raw-table/part-NNNNN.parquet`: the same log as Spark's Kafka source lands it (key, value, topic,
  partition, offset, timestamp, timestampType; read_committed), the input of `--raw-table`;
- `end_offsets.parquet/` and `end_offsets.json` (JSON lines): end-offset snapshots of every topic
  partition (schemas.ops.end_offsets_schema), matching the commits;
- `topic_ids.parquet/`: topic id -> name (schemas.ops.topic_ids_schema), for KIP-848 groups;
- `manifest.json`: parameters and counts (records by type, tombstones, transactions, batches, ...).

The same arguments always give the same bytes. See bench/estate.py for the estate, bench/simulate.py
for what the coordinator writes and when, bench/log_writer.py for batches, compaction and segments.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.estate import WINDOW_START_MS, Estate, EstateShape, build_estate
from bench.log_writer import CODECS, write_partition
from bench.simulate import Coordinator
from transforms.decoder.layout_reader import uuid_to_kafka_string

MANIFEST = "manifest.json"
PILOT_WINDOW_MS = 120_000
TOPIC = "__consumer_offsets"


def parse_count(text: str) -> int:
    """1000000, 1M, 10m, 500k."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="output directory (created; must be empty or a previous output)")
    parser.add_argument("--records", type=parse_count, default=1_000_000, help="about this many records (1M, 10M)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--window-seconds", type=int, help="simulate this long instead (records follow from it)")
    parser.add_argument("--groups", type=int, default=EstateShape.groups, help="consumer groups in the estate")
    parser.add_argument("--topics", type=int, default=EstateShape.topics, help="topics in the estate")
    parser.add_argument("--max-partitions", type=int, default=EstateShape.max_partitions, help="per topic")
    parser.add_argument("--churn-minutes", type=float, help="mean time between a group's membership changes")
    codec_help = "offsets.topic.compression.codec; mixed: partition N uses codec N %% 5 (for tests)"
    parser.add_argument("--compression", choices=(*CODECS, "mixed"), default="none", help=codec_help)
    parser.add_argument("--segment-bytes", type=int, default=104_857_600, help="offsets.topic.segment.bytes")
    parser.add_argument(
        "--cleaned-fraction", type=float, default=EstateShape.cleaned_fraction, help="share of the window compacted"
    )
    parser.add_argument("--snapshots", type=int, default=24, help="end-offset snapshots over the window")
    parser.add_argument("--cluster", default="bench", help="the `cluster` column of the end-offset rows")
    parser.add_argument("--workers", type=int, default=2, help="processes writing partitions in parallel")
    return parser.parse_args(argv)


def prepare(out: Path) -> None:
    """An empty directory; a previous generator output (it has a manifest) is replaced, anything else refused."""
    if out.exists() and any(out.iterdir()):
        if not (out / MANIFEST).is_file():
            raise SystemExit(f"{out} is not empty and holds no {MANIFEST}: refusing to write into it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def codec_of(compression: str, partition: int) -> str:
    return CODECS[partition % len(CODECS)] if compression == "mixed" else compression


def window_for(seed: int, shape: EstateShape, records: int) -> int:
    """The window that gives about `records` records, from the rate a short pilot run of the estate writes.

    What the log held before the window stays (about one record per key, compaction keeps it); of the
    window itself, the cleaned share shrinks to about nothing.
    """
    pilot = build_estate(seed, shape, PILOT_WINDOW_MS)
    by_partition = groups_by_partition(pilot)
    appends = [append for partition, plans in by_partition.items()
               for append in Coordinator(pilot, partition, seed).run(plans)]  # fmt: skip
    before = sum(len(append.records) for append in appends if append.at_ms < WINDOW_START_MS)
    # The rate once every group has reached its commit cadence (the slowest commit once a minute).
    steady_from = WINDOW_START_MS + PILOT_WINDOW_MS // 2
    steady = sum(len(append.records) for append in appends if append.at_ms >= steady_from)
    kept_per_ms = steady / (PILOT_WINDOW_MS // 2) * (1 - shape.cleaned_fraction)
    return max(PILOT_WINDOW_MS, int(max(records - before, records // 10) / kept_per_ms))


def groups_by_partition(estate: Estate) -> dict[int, list]:
    by_partition: dict[int, list] = {}
    for plan in estate.groups:
        by_partition.setdefault(plan.offsets_partition, []).append(plan)
    return dict(sorted(by_partition.items()))


def generate_partition(job: tuple) -> dict:
    """One partition, start to end: simulate, batch, compact, write segments and its raw-table file, as the
    coordinator writes (memory holds a row group of the raw table, not the partition's log)."""
    estate, partition, plans, options = job
    with RawTableWriter(options["out"] / "raw-table" / f"part-{partition:05d}.parquet", partition) as raw_table:
        written = write_partition(
            Coordinator(estate, partition, estate.seed).appends_of(plans),
            partition,
            options["out"] / "segments",
            raw_table.add,
            codec=codec_of(options["compression"], partition),
            clean_before_ms=WINDOW_START_MS + int(estate.duration_ms * options["cleaned_fraction"]),
            segment_bytes=options["segment_bytes"],
        )
    counts = dict(written.counts)
    counts["raw_table_rows"] = raw_table.rows
    return {"partition": partition, "segments": written.segments, "counts": counts}


class RawTableWriter:
    """One partition's read_committed records as Spark's Kafka source lands them, a row group at a time."""

    SCHEMA = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),  # 0: CreateTime
        ]
    )

    def __init__(self, path: Path, partition: int, row_group: int = 200_000) -> None:
        self.path, self.partition, self.row_group = path, partition, row_group
        self.rows = 0
        self._columns: dict[str, list] = {"key": [], "value": [], "offset": [], "timestamp": []}
        self._writer: pq.ParquetWriter | None = None

    def add(self, key: bytes, value: bytes | None, offset: int, timestamp_ms: int) -> None:
        columns = self._columns
        columns["key"].append(key)
        columns["value"].append(value)
        columns["offset"].append(offset)
        columns["timestamp"].append(timestamp_ms)
        if len(columns["key"]) >= self.row_group:
            self._flush()

    def _flush(self) -> None:
        columns, count = self._columns, len(self._columns["key"])
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, self.SCHEMA)
        if count or self.rows == 0:  # an empty partition still gets its (empty) file
            table = pa.table(
                {
                    "key": pa.array(columns["key"], pa.binary()),
                    "value": pa.array(columns["value"], pa.binary()),
                    "topic": pa.array([TOPIC] * count, pa.string()),
                    "partition": pa.array([self.partition] * count, pa.int32()),
                    "offset": pa.array(columns["offset"], pa.int64()),
                    "timestamp": pa.array(columns["timestamp"], pa.timestamp("ms", tz="UTC")).cast(
                        pa.timestamp("us", tz="UTC")
                    ),
                    "timestampType": pa.array([0] * count, pa.int32()),
                },
                schema=self.SCHEMA,
            )
            self._writer.write_table(table)
        self.rows += count
        for values in columns.values():
            values.clear()

    def __enter__(self) -> RawTableWriter:
        return self

    def __exit__(self, *_) -> None:
        self._flush()
        self._writer.close()


def end_offset_rows(estate: Estate, cluster: str, snapshots: int) -> pa.Table:
    """Every topic partition at evenly spaced times over the window (first and last included)."""
    times = [WINDOW_START_MS + estate.duration_ms * index // max(1, snapshots - 1) for index in range(snapshots)]
    topics, partitions, offsets, observed = [], [], [], []
    for topic in estate.topics.values():
        for partition in range(len(topic.rates)):
            for at_ms in times:
                topics.append(topic.name)
                partitions.append(partition)
                offsets.append(topic.end_offset(partition, at_ms))
                observed.append(at_ms)
    return pa.table(
        {
            "cluster": pa.array([cluster] * len(topics), pa.string()),
            "topic": pa.array(topics, pa.string()),
            "partition": pa.array(partitions, pa.int32()),
            "end_offset": pa.array(offsets, pa.int64()),
            "observed_at": pa.array(observed, pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
        }
    )


def write_end_offsets(estate: Estate, out: Path, cluster: str, snapshots: int) -> int:
    table = end_offset_rows(estate, cluster, snapshots)
    (out / "end_offsets.parquet").mkdir()
    pq.write_table(table, out / "end_offsets.parquet" / "part-00000.parquet")
    with open(out / "end_offsets.json", "w", encoding="utf-8") as handle:
        for row in table.to_pylist():
            row["observed_at"] = row["observed_at"].isoformat(timespec="milliseconds").replace("+00:00", "Z")
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    topic_ids = pa.table(
        {
            "cluster": [cluster] * len(estate.topics),
            "topic_id": [uuid_to_kafka_string(topic.topic_id) for topic in estate.topics.values()],
            "topic": list(estate.topics),
            "source": ["cluster"] * len(estate.topics),
        }
    )
    (out / "topic_ids.parquet").mkdir()
    pq.write_table(topic_ids, out / "topic_ids.parquet" / "part-00000.parquet")
    return table.num_rows


def generate(options: argparse.Namespace) -> dict:
    started = time.monotonic()
    out = options.out.resolve()
    prepare(out)
    (out / "raw-table").mkdir()
    shape = EstateShape(
        groups=options.groups,
        topics=options.topics,
        max_partitions=options.max_partitions,
        churn_minutes=options.churn_minutes,
        cleaned_fraction=options.cleaned_fraction,
    )
    if options.window_seconds:
        estate = build_estate(options.seed, shape, options.window_seconds * 1000)
    else:
        estate = build_estate(options.seed, shape, window_for(options.seed, shape, options.records))
    settings = {
        "out": out,
        "compression": options.compression,
        "cleaned_fraction": options.cleaned_fraction,
        "segment_bytes": options.segment_bytes,
    }
    jobs = [(estate, partition, plans, settings) for partition, plans in groups_by_partition(estate).items()]
    # Largest partitions first, so the last worker is not left with the biggest one.
    jobs.sort(key=lambda job: -sum(p.members * len(p.topics) for p in job[2]))
    with ProcessPoolExecutor(max_workers=max(1, options.workers)) as pool:
        results = sorted(pool.map(generate_partition, jobs), key=lambda result: result["partition"])
    totals = Counter()
    for result in results:
        totals.update(result["counts"])
    end_offsets = write_end_offsets(estate, out, options.cluster, options.snapshots)
    manifest = {
        "generator": "bench/generate.py",
        "seed": options.seed,
        "records_requested": options.records,
        "records": totals["records"],
        "window_start": datetime.fromtimestamp(WINDOW_START_MS / 1000, UTC).isoformat(),
        "window_ms": estate.duration_ms,
        "groups": len(estate.groups),
        "groups_by_protocol": Counter(f"{p.protocol}/{p.client}" for p in estate.groups),
        "topics": len(estate.topics),
        "topic_partitions": sum(len(topic.rates) for topic in estate.topics.values()),
        "offsets_partitions": len(results),
        "segment_files": sum(len(result["segments"]) for result in results),
        "compression": options.compression,
        "cleaned_fraction": options.cleaned_fraction,
        "end_offset_rows": end_offsets,
        "counts": dict(sorted(totals.items())),
        "seconds": round(time.monotonic() - started, 1),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    manifest = generate(arguments(argv))
    print(json.dumps({key: manifest[key] for key in ("records", "groups", "topic_partitions", "seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
