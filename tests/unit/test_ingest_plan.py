"""Where an incremental ingest reads each segment file from, on real segment bytes cut as a broker's log
grows (a cut at a batch boundary is a real earlier log)."""

from __future__ import annotations

import struct
from pathlib import Path

from jobs.ingest_plan import FileState, plan_reads
from jobs.segment_files import as_source_file, read_paths
from transforms.decoder.log_transactions import TXN_PENDING

CAPTURES = Path(__file__).resolve().parents[1] / "captures" / "kafka-4.2.1"
TRANSACTIONS = next((CAPTURES / "transactions" / "segments").glob("*/*.log"))
COOPERATIVE = next((CAPTURES / "cooperative-sticky" / "segments").glob("*/*.log"))


def batch_starts(data: bytes) -> list[int]:
    starts, position = [], 0
    while position + 12 <= len(data):
        starts.append(position)
        position += 12 + struct.unpack_from(">qi", data, position)[1]
    return starts


def state_of(path: Path) -> FileState:
    """What raw_records would hold after ingesting the file as it is now (as jobs.ingest_plan derives it)."""
    records = [record for record in read_paths([path]) if record.batch_position is not None]
    last = max(records, key=lambda record: record.batch_position)
    pending = [record.batch_position for record in records if record.txn_state == TXN_PENDING]
    return FileState(
        last.batch_position,
        last.batch_base_offset,
        last.error is None,
        min(pending, default=None),
        max(record.offset for record in records),
    )


def partition_dir(tmp_path: Path, source: Path) -> Path:
    directory = tmp_path / source.parent.name
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def test_a_file_that_grew_is_read_on_from_its_last_ingested_batch(tmp_path):
    data = COOPERATIVE.read_bytes()
    starts = batch_starts(data)
    segment = partition_dir(tmp_path, COOPERATIVE) / COOPERATIVE.name
    segment.write_bytes(data[: starts[len(starts) // 2]])
    state = state_of(segment)
    segment.write_bytes(data)
    name = as_source_file(str(segment))

    plan = plan_reads([[name]], {name: state})

    (read,) = plan.partitions[0]
    assert (read.start, read.known_through) == (state.last_batch_position, state.last_batch_position)
    assert not plan.repeats_records and plan.files_read_on == 1


def test_a_file_with_nothing_new_is_not_read(tmp_path):
    segment = partition_dir(tmp_path, COOPERATIVE) / COOPERATIVE.name
    segment.write_bytes(COOPERATIVE.read_bytes())
    name = as_source_file(str(segment))

    plan = plan_reads([[name]], {name: state_of(segment)})

    assert plan.partitions == [] and plan.files_unchanged == 1


def test_an_open_transaction_is_read_again_with_its_marker(tmp_path):
    data = TRANSACTIONS.read_bytes()
    segment = partition_dir(tmp_path, TRANSACTIONS) / TRANSACTIONS.name
    # The earliest cut that leaves a transaction open: its marker comes with the next night's bytes.
    for cut in batch_starts(data)[1:]:
        segment.write_bytes(data[:cut])
        state = state_of(segment)
        if state.first_pending_position is not None:
            break
    else:
        raise AssertionError("the transactions capture has no transaction open at any batch boundary")
    segment.write_bytes(data)
    name = as_source_file(str(segment))

    plan = plan_reads([[name]], {name: state})

    (read,) = plan.partitions[0]
    assert read.start == state.first_pending_position <= read.known_through == state.last_batch_position
    assert plan.has_pending


def test_a_rewritten_segment_below_what_was_ingested_is_skipped_and_a_changed_active_one_read_again(tmp_path):
    data = COOPERATIVE.read_bytes()
    starts = batch_starts(data)
    directory = partition_dir(tmp_path, COOPERATIVE)
    older, active = directory / f"{0:020d}.log", directory / f"{10**6:020d}.log"
    older.write_bytes(data)
    state = state_of(older)
    held = FileState(0, 10**6, True, None, 10**6)
    # The cleaner rewrote the older segment: its first batch is gone, so the others moved.
    older.write_bytes(data[starts[1] :])
    active.write_bytes(data)  # a different log now: the batch at position 0 no longer has base offset 10**6
    names = [as_source_file(str(path)) for path in (older, active)]

    plan = plan_reads([names], {names[0]: state, names[1]: held})

    assert plan.files_rewritten_skipped == 1 and plan.files_changed_reread == 1
    assert [read.path for read in plan.partitions[0]] == [names[1]] and plan.partitions[0][0].start == 0
    assert plan.repeats_records


def test_a_new_file_below_what_its_partition_holds_may_repeat_records(tmp_path):
    live = partition_dir(tmp_path / "live", COOPERATIVE) / COOPERATIVE.name
    backup = partition_dir(tmp_path / "backup", COOPERATIVE) / COOPERATIVE.name
    for segment in (live, backup):
        segment.write_bytes(COOPERATIVE.read_bytes())
    live_name, backup_name = as_source_file(str(live)), as_source_file(str(backup))

    plan = plan_reads([[backup_name], [live_name]], {live_name: state_of(live)})

    assert plan.files_new == 1 and plan.repeats_records
    assert [[read.path for read in reads] for reads in plan.partitions] == [[backup_name]]


def test_a_share_state_file_beside_an_ingested_offsets_log_is_new_and_repeats_nothing(tmp_path):
    """A broker's log dir holds both topics, with the same partition numbers: __share_group_state-N's
    first segment is new, not a file below what __consumer_offsets-N holds."""
    share_state = next((CAPTURES / "share" / "segments-share-state").glob("*/*.log"))
    offsets = tmp_path / f"__consumer_offsets-{share_state.parent.name.rsplit('-', 1)[1]}" / COOPERATIVE.name
    offsets.parent.mkdir()
    offsets.write_bytes(COOPERATIVE.read_bytes())
    state = state_of(offsets)
    assert state.max_offset >= 0, "the offsets log must hold offsets a new file could fall below"
    copy = partition_dir(tmp_path, share_state) / share_state.name
    copy.write_bytes(share_state.read_bytes())
    offsets_name, share_name = as_source_file(str(offsets)), as_source_file(str(copy))

    plan = plan_reads([[offsets_name], [share_name]], {offsets_name: state})

    assert (plan.files_new, plan.files_unchanged, plan.repeats_records) == (1, 1, False)
    assert [[read.path for read in reads] for reads in plan.partitions] == [[share_name]]
