"""Lab captures cut into nights: each partition's log as the broker held it at an earlier moment.

A segment file cut at a batch boundary is a real earlier log: the broker appends whole batches, so every
prefix that ends on a boundary is a file it once held. A `Cut` is one capture's log at one moment (the
bytes kept of each segment, and the moment, which decides the end-offset snapshots taken by then).
`write_night` writes the night's cuts INTO THE SAME PATHS night after night: a file only grows, by
appending the bytes the broker appended since (night 2's file starts with night 1's bytes, same inode),
so an incremental ingest meets files it read before, grown. A cut may also roll a segment (a new file
from a batch boundary on, named by its base offset) and lose the older file (what a cleaner or a moved
replica leaves): the records only that file held then reach the tables, if ever, from a backup
(`write_backup`: a copy of a capture cut at some moment, in a directory of its own, given as one more
--segments path).

The interesting cuts are found from the bytes, with the project's own decoder (`capture_batches` frames
each batch as the segment reader does and reads it with `v2_batch`; `decode_record` reads the records):
a transactional batch whose COMMIT/ABORT marker comes after the cut, a cooperative rebalance whose
revoking round is before the cut and assigning round after, a KIP-848 partition targeted to a member
before the cut and owned by it after.

Nothing here starts Spark. record_timestamps.json (the data topics' record times) is not read by the
jobs, so it is not cut.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from transforms.decoder.batch_resync import FRAMING, LOG_OVERHEAD
from transforms.decoder.coordinator_records import decode_record
from transforms.decoder.decode_rows import to_jsonable
from transforms.decoder.log_record import LogRecord
from transforms.decoder.log_transactions import Marker
from transforms.decoder.record_batches import partition_from_path
from transforms.decoder.v2_batches import v2_batch

END_OFFSETS_FILE = "end_offsets.json"
# RecordBatch v2: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32,
# attributes int16, lastOffsetDelta int32, baseTimestamp int64, then maxTimestamp int64 (also in a control
# batch, whose markers carry no time of their own).
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8
GROUP_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT = 2, 7, 8


@dataclass(frozen=True)
class Batch:
    segment: str  # path under the capture's segments/: "__consumer_offsets-N/<base offset>.log"
    position: int  # byte position of the batch in its file
    end: int
    base_offset: int
    max_timestamp_ms: int
    records: tuple[LogRecord, ...]  # data records; empty for a control batch
    markers: tuple[Marker, ...]  # COMMIT/ABORT markers of a control batch


@dataclass(frozen=True)
class Cut:
    """One capture's log as it stood at one moment."""

    capture: Path
    kept: Mapping[str, int]  # segment -> bytes the broker had written to it; segments left out: none yet
    moment_ms: int  # end-offset snapshots observed by then were taken by then
    why: str
    rolled_at: Mapping[str, int] = field(default_factory=dict)  # segment -> batch boundary a new file starts at
    lost: frozenset[str] = frozenset()  # rolled segments whose older file is gone from the live path


def capture_batches(capture: Path) -> dict[str, list[Batch]]:
    """Every batch of a capture's segments, in file order, framed and read by the project's decoder."""
    batches = {}
    for file in sorted((capture / "segments").glob("__consumer_offsets-*/*.log")):
        segment = file.relative_to(capture / "segments").as_posix()
        batches[segment] = list(_file_batches(file.read_bytes(), segment))
    return batches


def _file_batches(data: bytes, segment: str) -> Iterator[Batch]:
    pos, partition = 0, partition_from_path(segment)
    while pos < len(data):
        base_offset, length, magic = FRAMING.unpack_from(data, pos)
        assert magic == 2, f"{segment}: batch at {pos} has magic {magic}; lab captures are RecordBatch v2"
        end = pos + LOG_OVERHEAD + length
        items = v2_batch(data, pos, end, partition, segment)
        is_control = bool(items) and isinstance(items[0], Marker)
        yield Batch(segment, pos, end, base_offset, _MAX_TIMESTAMP.unpack_from(data, pos + _MAX_TIMESTAMP_AT)[0],
            () if is_control else tuple(items), tuple(items) if is_control else ())  # fmt: skip
        pos = end


def cut_at(capture: Path, moment_ms: int, why: str, batches: dict[str, list[Batch]] | None = None) -> Cut:
    """The log at `moment_ms`: each segment up to its first batch written after it."""
    batches = capture_batches(capture) if batches is None else batches
    kept = {segment: _kept_by(found, moment_ms) for segment, found in batches.items()}
    return Cut(capture, {segment: size for segment, size in kept.items() if size}, moment_ms, why)


def _kept_by(batches: list[Batch], moment_ms: int) -> int:
    kept = 0
    for batch in batches:
        if batch.max_timestamp_ms > moment_ms:
            break
        kept = batch.end
    return kept


def cut_before(capture: Path, batch: Batch, batches: dict[str, list[Batch]], why: str) -> Cut:
    """The log just before `batch` was appended: its segment up to it, the others at the moment of the
    batch before it (a batch of another partition written in the same millisecond counts as before)."""
    earlier = [found for found in batches[batch.segment] if found.end <= batch.position]
    moment_ms = earlier[-1].max_timestamp_ms if earlier else batch.max_timestamp_ms - 1
    cut = cut_at(capture, moment_ms, why, batches)
    return Cut(capture, {**cut.kept, batch.segment: batch.position}, moment_ms, why)


def whole(capture: Path) -> Cut:
    """The capture as it ended: every byte, every snapshot."""
    moment_ms = json.loads((capture / END_OFFSETS_FILE).read_text())["observed_at_ms"]
    kept = {file.relative_to(capture / "segments").as_posix(): file.stat().st_size
            for file in (capture / "segments").glob("__consumer_offsets-*/*.log")}  # fmt: skip
    return Cut(capture, kept, moment_ms, "the whole capture")


def end_offsets_by(document: dict, moment_ms: int) -> dict:
    """An end_offsets.json as it stood at `moment_ms`: the series' snapshots observed by then, the last of
    them also at the top (the file's latest snapshot); the whole document once its last snapshot is taken."""
    if moment_ms >= document["observed_at_ms"]:
        return document
    series = [snapshot for snapshot in document.get("series", []) if snapshot["observed_at_ms"] <= moment_ms]
    latest = series[-1] if series else {"observed_at_ms": moment_ms, "offsets": {}}
    return {"observed_at_ms": latest["observed_at_ms"], "offsets": latest["offsets"], "series": series}


# --- Writing nights -------------------------------------------------------------------------------------


def _live_files(cut: Cut) -> dict[str, tuple[Path, int, int]]:
    """The live path's files for a cut: name -> (source file, first byte, end byte)."""
    files = {}
    for segment, kept in cut.kept.items():
        source = cut.capture / "segments" / segment
        roll = cut.rolled_at.get(segment)
        if roll is None or roll >= kept:
            files[segment] = (source, 0, kept)
            continue
        if segment not in cut.lost:
            files[segment] = (source, 0, roll)
        base_offset = FRAMING.unpack_from(source.read_bytes(), roll)[0]
        files[f"{segment.rsplit('/', 1)[0]}/{base_offset:020d}.log"] = (source, roll, kept)
    return files


def write_night(cuts: Iterable[Cut], segments_dir: Path, offsets_dir: Path) -> None:
    """The live log and end-offset files of one night, written over the night before's, as a broker and
    a snapshot exporter leave them: files grow by appending (their earlier bytes untouched), a lost file
    is removed, each capture's end_offsets.json is rewritten."""
    for cut in cuts:
        for name, (source, start, end) in _live_files(cut).items():
            _grow(segments_dir / name, source.read_bytes()[start:end])
        for segment in cut.lost:
            rolled = segments_dir / segment
            if rolled.exists():
                rolled.unlink()
        document = end_offsets_by(json.loads((cut.capture / END_OFFSETS_FILE).read_text()), cut.moment_ms)
        target = offsets_dir / cut.capture.name / END_OFFSETS_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(document, indent=1))


def _grow(path: Path, content: bytes) -> None:
    held = path.read_bytes() if path.exists() else b""
    assert content.startswith(held), f"{path}: the log would lose bytes ({len(held)} held, {len(content)} now)"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as log:
        log.write(content[len(held) :])


def write_backup(cut: Cut, directory: Path) -> Path:
    """A copy of the capture's segments as they stood at the cut, in a directory of its own."""
    for segment, kept in cut.kept.items():
        target = directory / segment
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((cut.capture / "segments" / segment).read_bytes()[:kept])
    return directory


def copy_tree(source: Path, target: Path) -> Path:
    """A copy of a night's inputs, for a run that must see them as they are now."""
    shutil.copytree(source, target)
    return target


# --- Cuts that split something in two -------------------------------------------------------------------


def _records(batches: dict[str, list[Batch]]) -> Iterator[tuple[Batch, LogRecord, object]]:
    for found in batches.values():
        for batch in found:
            for record in batch.records:
                yield batch, record, decode_record(record.key, record.value)


def before_transaction_markers(capture: Path) -> list[Cut]:
    """Per transaction, the log just before its COMMIT or ABORT marker: its offset commits are pending."""
    batches, cuts = capture_batches(capture), []
    for found in batches.values():
        open_producers: set[int] = set()
        for batch in found:
            if batch.records and batch.records[0].is_transactional:
                open_producers.add(batch.records[0].producer_id)
            for marker in batch.markers:
                if marker.producer_id in open_producers:
                    open_producers.discard(marker.producer_id)
                    why = f"{batch.segment}: producer {marker.producer_id}'s {marker.txn_state} marker comes next"
                    cuts.append(cut_before(capture, batch, batches, why))
    return cuts


def between_cooperative_rounds(capture: Path) -> list[Cut]:
    """Per cooperative rebalance, the log after its first round (members gave up partitions they owned,
    none assigned them yet) and before the group's next record (the round that assigns them)."""
    batches, cuts, revoking = capture_batches(capture), [], {}
    for batch, _, decoded in _records(batches):
        if decoded.record_type != GROUP_METADATA:
            continue
        group = decoded.key["group"]
        if group in revoking:
            why = f"{batch.segment}: group {group}'s cooperative rounds {revoking.pop(group)} and the next"
            cuts.append(cut_before(capture, batch, batches, why))
        value = to_jsonable(decoded.value) if decoded.value is not None else None
        if value and value.get("protocol") == "cooperative-sticky" and _revokes(value["members"]):
            revoking[group] = value["generation"]
    return cuts


def _revokes(members: list[dict]) -> bool:
    def partitions(assigned: list[dict]) -> set[tuple[str, int]]:
        return {(entry["topic"], partition) for entry in assigned for partition in entry["partitions"]}

    return any(
        partitions(member["subscription"].get("owned_partitions") or [])
        - partitions(member["assignment"]["assigned_partitions"])
        for member in members
    )


def inside_kip848_handovers(capture: Path) -> list[Cut]:
    """Per KIP-848 handover (a partition targeted to a member that does not own it yet), the log just
    before the member's assignment record that owns it: targeted, not owned. Longest handover first."""
    batches, handovers = capture_batches(capture), []
    owned: dict[tuple, set] = {}
    waiting: dict[tuple, tuple[Batch, set]] = {}  # (group, member) -> (target batch, partitions not owned)
    for batch, _, decoded in _records(batches):
        if decoded.record_type not in (TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
            continue
        member = (decoded.key["group_id"], decoded.key["member_id"])
        value = to_jsonable(decoded.value) if decoded.value is not None else None
        if decoded.record_type == TARGET_ASSIGNMENT_MEMBER:
            targeted = _topic_partitions(value["topic_partitions"]) if value else set()
            if targeted - owned.get(member, set()):
                waiting[member] = (batch, targeted - owned.get(member, set()))
            continue
        owned[member] = _topic_partitions(value["assigned_partitions"]) if value else set()
        if member in waiting and waiting[member][1] <= owned[member]:
            target, _ = waiting.pop(member)
            if batch is not target:
                handovers.append((batch.max_timestamp_ms - target.max_timestamp_ms, batch, member))
    handovers.sort(key=lambda handover: -handover[0])
    return [
        cut_before(capture, batch, batches, f"{batch.segment}: member {member[1]} of {member[0]} targeted, not owning")
        for _, batch, member in handovers
    ]


def _topic_partitions(entries: list[dict]) -> set[tuple[str, int]]:
    return {(entry["topic_id"], partition) for entry in entries for partition in entry["partitions"]}
