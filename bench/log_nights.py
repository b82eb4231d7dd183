"""A generated log as the broker held it at each midnight, written night after night into one live path.

A segment file cut at a batch boundary is a real earlier log: the broker appends whole batches, so every
prefix that ends on a boundary is a file it once held. The cut at a moment keeps, of each segment file,
every batch up to the first whose max timestamp is after the moment (tests/log_cuts.py does the same for
lab captures, decoding every record; here only batch headers are read, so that a 10M-record night is
framed in seconds). A segment with nothing kept yet does not exist yet: segments roll as the log grows.

`write_cut` writes a cut INTO THE SAME PATHS as the night before's: a file only grows, by appending the
bytes the broker appended since (same inode, earlier bytes untouched), and a new segment appears as a new
file. End-offset snapshots are cut the same way: each night's end_offsets.json holds the snapshots taken
since the night before, up to its midnight (the nightly merges them on their key, so the union over the
nights is the cut at the last one).

Nothing here starts Spark.
"""

from __future__ import annotations

import json
import mmap
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

# RecordBatch v2 header: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
# crc uint32, attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
# producerId int64, producerEpoch int16, baseSequence int32, recordsCount int32.
_HEADER = struct.Struct(">qiibIhiqqqhii")
LOG_OVERHEAD = 12  # baseOffset and batchLength precede what batchLength counts
IS_CONTROL = 0x20  # attributes bit 5: a control batch (COMMIT/ABORT marker), no data records
END_OFFSETS_FILE = "end_offsets.json"
_COPY_CHUNK = 16 * 1024 * 1024


@dataclass(frozen=True)
class SegmentIndex:
    """One segment file's batches: where each ends, its max timestamp, and its data records."""

    name: str  # "__consumer_offsets-N/<base offset>.log", under the log directory
    # Arrays of int64, not lists: a week at the size is about 50M batches (a list of ints per
    # column would take 6 GB).
    ends: array
    max_timestamps_ms: array
    records: array  # data records of the batch (0 for a control batch)

    def kept_at(self, moment_ms: int) -> tuple[int, int]:
        """(bytes, data records) the broker had written to this file by `moment_ms`."""
        kept = records = 0
        for end, max_timestamp_ms, count in zip(self.ends, self.max_timestamps_ms, self.records, strict=True):
            if max_timestamp_ms > moment_ms:
                break
            kept, records = end, records + count
        return kept, records


def index_segments(log_dir: Path) -> list[SegmentIndex]:
    """Every segment file under a generator's segments/, framed by its batch headers."""
    return [_index_file(file, log_dir) for file in sorted(log_dir.glob("__consumer_offsets-*/*.log"))]


def _index_file(file: Path, log_dir: Path) -> SegmentIndex:
    ends, max_timestamps, records = array("q"), array("q"), array("q")
    with open(file, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        pos = 0
        while pos < len(data):
            header = _HEADER.unpack_from(data, pos)
            length, magic, attributes, max_timestamp, count = header[1], header[3], header[5], header[8], header[12]
            if magic != 2:
                raise ValueError(f"{file}: batch at {pos} has magic {magic}; the generator writes RecordBatch v2")
            pos += LOG_OVERHEAD + length
            ends.append(pos)
            max_timestamps.append(max_timestamp)
            records.append(0 if attributes & IS_CONTROL else count)
    return SegmentIndex(file.relative_to(log_dir).as_posix(), ends, max_timestamps, records)


@dataclass(frozen=True)
class Cut:
    """The log at one moment: bytes kept of each segment file that exists by then, and its data records."""

    moment_ms: int
    kept: dict[str, int]
    records: int


def cut_at(segments: list[SegmentIndex], moment_ms: int) -> Cut:
    kept, total = {}, 0
    for segment in segments:
        size, records = segment.kept_at(moment_ms)
        if size:
            kept[segment.name] = size
            total += records
    return Cut(moment_ms, kept, total)


def write_cut(cut: Cut, source_dir: Path, live_dir: Path) -> None:
    """The live log as it stood at the cut, grown in place from the night before's: each file gets the
    bytes appended since; a file the cut no longer holds whole would be a log losing bytes (refused)."""
    for name, kept in cut.kept.items():
        target = live_dir / name
        held = target.stat().st_size if target.exists() else 0
        if held > kept:
            raise ValueError(f"{target}: the log would lose bytes ({held:,} held, {kept:,} at the cut)")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(source_dir / name, "rb") as source, open(target, "ab") as log:
            source.seek(held)
            remaining = kept - held
            while remaining:
                chunk = source.read(min(_COPY_CHUNK, remaining))
                log.write(chunk)
                remaining -= len(chunk)


def snapshot_series(end_offsets_parquet: Path, topics: set[str]) -> list[dict]:
    """The generator's end-offset snapshots of `topics` (those the estate's groups consume, as the live
    end_offsets job takes them), as lab-capture snapshots in time order:
    {"observed_at_ms": ..., "offsets": {topic: {partition: end offset}}}."""
    table = pq.read_table(end_offsets_parquet, columns=["topic", "partition", "end_offset", "observed_at"])
    by_time: dict[int, dict[str, dict[str, int]]] = {}
    columns = table.to_pydict()
    for topic, partition, end_offset, observed_at in zip(
        columns["topic"], columns["partition"], columns["end_offset"], columns["observed_at"], strict=True
    ):
        if topic in topics:
            observed_ms = int(observed_at.timestamp() * 1000)
            by_time.setdefault(observed_ms, {}).setdefault(topic, {})[str(partition)] = end_offset
    return [{"observed_at_ms": at_ms, "offsets": offsets} for at_ms, offsets in sorted(by_time.items())]


def write_snapshots(series: list[dict], after_ms: int | None, moment_ms: int, directory: Path) -> int:
    """An end_offsets.json (lab-capture format: the latest snapshot at the top, all under "series") with
    the snapshots observed after `after_ms` (None: from the start) up to `moment_ms`; how many."""
    taken = [
        snapshot
        for snapshot in series
        if snapshot["observed_at_ms"] <= moment_ms and (after_ms is None or snapshot["observed_at_ms"] > after_ms)
    ]
    latest = taken[-1] if taken else {"observed_at_ms": moment_ms, "offsets": {}}
    directory.mkdir(parents=True, exist_ok=True)
    document = {"observed_at_ms": latest["observed_at_ms"], "offsets": latest["offsets"], "series": taken}
    (directory / END_OFFSETS_FILE).write_text(json.dumps(document))
    return len(taken)
