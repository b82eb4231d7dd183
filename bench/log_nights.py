"""A generated log as the broker held it at each midnight, written night after night into one live path.

A partition's log cut at a batch boundary is a real earlier log: the broker appends whole batches to the
newest segment, so every prefix of the partition's batches, in log order, is a log it once held. The cut
at a moment keeps each partition's batches up to the first one *written* after the moment; only batch
headers are read, so that a 10M-record night is framed in seconds. A segment with nothing kept yet does
not exist yet: segments roll as the log grows.

A batch was written no later than its max timestamp, nor than any batch after it in the log (appends
are in log order): so its writing time is taken as the least max timestamp of it and every later batch
of its partition. Where timestamps grow with the log (a broker's coordinator stamps its own clock) that
is the batch's own. The generator does not always: partition 4 of the issue's estate opens its second
segment with a group's records stamped eleven days on; cut by their own timestamps, that segment was
missing for seven nights while the segments after it were there (a log no broker ever held), and came
on the eighth as a late backup. (tests/log_cuts.py cuts lab captures, real broker logs, by each batch's
own timestamp.)

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
_NEVER_MS = 2**63 - 1


@dataclass(frozen=True)
class SegmentIndex:
    """One segment file's batches: where each ends, its max timestamp, and its data records."""

    name: str  # "__consumer_offsets-N/<base offset>.log", under the log directory
    # Arrays of int64, not lists: a week at the size is about 50M batches (a list of ints per
    # column would take 6 GB).
    ends: array
    written_by_ms: array  # when the batch was written at the latest (see the module docstring)
    records: array  # data records of the batch (0 for a control batch)

    def kept_at(self, moment_ms: int) -> tuple[int, int]:
        """(bytes, data records) the broker had written to this file by `moment_ms`."""
        kept = records = 0
        for end, written_by_ms, count in zip(self.ends, self.written_by_ms, self.records, strict=True):
            if written_by_ms > moment_ms:
                break
            kept, records = end, records + count
        return kept, records


def index_segments(log_dir: Path) -> list[SegmentIndex]:
    """Every segment file under a generator's segments/, framed by its batch headers, in log order."""
    segments = [_index_file(file, log_dir) for file in sorted(log_dir.glob("__consumer_offsets-*/*.log"))]
    _bound_by_later_batches(segments)
    return segments


def _bound_by_later_batches(segments: list[SegmentIndex]) -> None:
    """Each batch's writing time lowered to the least of any later batch's of its partition (in place)."""
    later_ms: dict[str, int] = {}
    for segment in reversed(segments):  # zero-padded base offsets: by name is log order
        partition = segment.name.split("/")[0]
        least = later_ms.get(partition, _NEVER_MS)
        times = segment.written_by_ms
        for index in range(len(times) - 1, -1, -1):
            least = min(least, times[index])
            times[index] = least
        later_ms[partition] = least


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
