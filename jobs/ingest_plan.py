"""Where each segment file is read from: only what raw_records does not hold yet.

What a file has given is read from raw_records itself (each record says which file and batch
position it came from), as of the table's current version (jobs/file_states.py keeps it up to date
from the table's changes): a run killed after its commit is seen whole, one killed before it not at all.

Per file, the last batch ingested (its position and base offset) and the first batch still pending
(an open transaction, whose marker a later run must see together with it). A broker only appends to
a partition's last segment, and its cleaner rewrites older ones with records removed, never added.
So a file whose last ingested batch is still where it was is read on from there (from its first
pending batch if it has one); a file that changed underneath (that batch is gone: rewritten by the
cleaner, truncated) is skipped when the partition has already ingested past its end, and otherwise
read again from the start, its records then deduplicated against the table.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.segment_files import read_file_range, segment_base_offset
from jobs.tables import RAW_RECORDS, cluster_rows
from transforms.bronze import SOURCE_KIND_SEGMENT
from transforms.decoder.record_batches import topic_partition_from_path

_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength: the same in every magic
_LOG_OVERHEAD = _BATCH_HEAD.size


@dataclass(frozen=True)
class FileState:
    """What raw_records holds from one segment file."""

    last_batch_position: int
    last_batch_base_offset: int | None
    is_last_batch_readable: bool
    first_pending_position: int | None
    max_offset: int | None


@dataclass(frozen=True)
class FileRead:
    """One file of a partition's read: from `start`, a batch boundary. Records at positions up to
    `known_through` are in raw_records already; one comes out again only if its transaction has
    resolved since (a pending record re-read with its marker)."""

    path: str
    start: int = 0
    known_through: int = -1
    pending_from: int | None = None  # the first batch the table holds pending; None: it holds none


@dataclass
class ReadPlan:
    partitions: list[list[FileRead]]
    has_pending: bool = False  # some file holds a pending transaction a read may now resolve
    # A file read again from its start may repeat records the table holds: they must be deduplicated.
    repeats_records: bool = False
    files_unchanged: int = 0
    files_read_on: int = 0
    files_new: int = 0
    files_rewritten_skipped: int = 0
    files_changed_reread: int = 0

    def summary(self) -> str:
        return (
            f"{self.files_new} new file(s), {self.files_read_on} read on, {self.files_unchanged} unchanged,"
            f" {self.files_rewritten_skipped} rewritten below what was ingested (skipped),"
            f" {self.files_changed_reread} changed and read again"
        )


def holds_other_sources(spark: SparkSession, config: Config) -> bool:
    """Whether raw_records holds records of the cluster that came from elsewhere than segment files (a
    live capture, a landed table): segment records may repeat them."""
    if not spark.catalog.tableExists(config.table(RAW_RECORDS)):
        return False
    other = cluster_rows(spark, config, RAW_RECORDS).where(F.col("source_kind") != F.lit(SOURCE_KIND_SEGMENT))
    return not other.isEmpty()


def _has_more(path: str, state: FileState) -> bool | None:
    """Whether the file holds bytes after the batch last ingested from it; None when that batch is no
    longer at its position with its base offset (the file changed underneath)."""
    header, size = read_file_range(path, state.last_batch_position, _LOG_OVERHEAD)
    if len(header) < _LOG_OVERHEAD:
        return None
    base_offset, length = _BATCH_HEAD.unpack(header)
    if state.last_batch_base_offset is not None and base_offset != state.last_batch_base_offset:
        return None
    # An unreadable last fragment is read again: the rest of its batch may have been written since.
    return not state.is_last_batch_readable or state.last_batch_position + _LOG_OVERHEAD + length < size


def plan_reads(partitions: Sequence[Sequence[str]], states: Mapping[str, FileState]) -> ReadPlan:
    """The reads of each partition directory's files (as raw_records names them, in log order)."""
    plan = ReadPlan([])
    # Keyed by (topic, partition): __share_group_state-N's offsets have nothing to do with __consumer_offsets-N's.
    partition_ingested_through: dict[tuple[str, int] | None, int] = {}
    for path, state in states.items():
        partition = topic_partition_from_path(path)
        partition_ingested_through[partition] = max(
            partition_ingested_through.get(partition, -1), state.max_offset or -1
        )
    for files in partitions:
        reads = []
        ingested_through = max((states[path].max_offset or -1 for path in files if path in states), default=-1)
        for index, path in enumerate(files):
            state = states.get(path)
            has_more = None if state is None else _has_more(path, state)
            if state is None:
                plan.files_new += 1
                reads.append(FileRead(path))
                # A new file below what its partition holds (a backup, a moved log) may repeat records.
                base_offset = segment_base_offset(path)
                held_through = partition_ingested_through.get(topic_partition_from_path(path), -1)
                plan.repeats_records |= base_offset is None or base_offset <= held_through
            elif has_more is not None:
                known_through = state.last_batch_position - (0 if state.is_last_batch_readable else 1)
                if state.first_pending_position is not None:
                    plan.files_read_on += 1
                    plan.has_pending = True
                    first_pending = state.first_pending_position
                    reads.append(FileRead(path, first_pending, known_through, first_pending))
                elif has_more:
                    plan.files_read_on += 1
                    reads.append(FileRead(path, state.last_batch_position, known_through))
                else:
                    plan.files_unchanged += 1
            elif _is_below(files, index, ingested_through):
                plan.files_rewritten_skipped += 1
            else:
                plan.files_changed_reread += 1
                plan.repeats_records = True
                reads.append(FileRead(path))
        if reads:
            plan.partitions.append(reads)
    return plan


def _is_below(files: Sequence[str], index: int, ingested_through: int) -> bool:
    """Whether every offset the file can hold (up to the next segment's base offset) is one the
    partition has already ingested: then a rewrite of it can only have removed records."""
    if index == len(files) - 1:
        return False
    next_base_offset = segment_base_offset(files[index + 1])
    return next_base_offset is not None and next_base_offset <= ingested_through + 1
