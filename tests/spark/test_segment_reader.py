"""The JVM segment reader (jobs/segment_reader.py, groupscope.SegmentSource) gives the Python reader's rows,
column by column, on real broker logs; whatever it does not read cleanly is left to the Python reader."""

from __future__ import annotations

import random
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.batch_builder import Rec, batch_v2
from jobs.ingest_plan import FileRead
from jobs.segment_files import as_source_file, discover_partitions
from jobs.segment_reader import READER_CONF, jvm_reads, jvm_rows
from jobs.steps.ingest import read_partition_directories
from tests.conftest import PUBLIC_FIXTURES
from tests.fault_corpus import write_corpus
from tests.lab_tables import CAPTURES
from transforms.decoder.record_batches import read_partition

pytestmark = pytest.mark.spark


@contextmanager
def python_reader(spark):
    spark.conf.set(READER_CONF, "python")
    try:
        yield
    finally:
        spark.conf.unset(READER_CONF)


def _partitions(*roots: Path) -> list[list[FileRead]]:
    return [[FileRead(as_source_file(file)) for file in files] for files in discover_partitions(roots)]


def _rows(spark, partitions: list[list[FileRead]]) -> list[tuple]:
    return sorted(tuple(row) for row in read_partition_directories(spark, partitions, "c", "run").collect())


def _both(spark, partitions):
    with python_reader(spark):
        by_python = _rows(spark, partitions)
    return _rows(spark, partitions), by_python


def test_every_captured_partition_reads_the_same_by_either_reader(spark):
    partitions = _partitions(CAPTURES, PUBLIC_FIXTURES)
    taken = jvm_reads(spark, partitions)
    coordinator = [index for index, reads in enumerate(partitions) if "__" in reads[0].path.rsplit("/", 2)[-2]]
    # every coordinator partition a broker wrote is clean: the JVM reads them all
    assert sorted(taken) == coordinator
    by_jvm, by_python = _both(spark, partitions)
    assert len(by_jvm) > 4_000
    assert any(row[11] == "aborted" for row in by_jvm) and any(row[11] == "committed" for row in by_jvm)
    assert any(row[18] == "__share_group_state" for row in by_jvm)
    assert by_jvm == by_python


def _batch_positions(path: str) -> list[tuple[int, bool]]:
    """(position, is transactional) of each data batch of a file."""
    data = Path(path.removeprefix("file:")).read_bytes()
    found = {(record.batch_position, record.is_transactional) for record in read_partition([(path, data)])}
    return sorted(found)


def test_a_file_read_on_from_a_batch_gives_the_same_rows(spark):
    """Reads on from where an earlier run left a file (start, known through, first pending), at real batches."""
    rng = random.Random(7)
    partitions = [reads for reads in _partitions(CAPTURES) if "__consumer_offsets" in reads[0].path]
    with_transactions = [reads for reads in partitions if any(is_txn for _, is_txn in _batch_positions(reads[-1].path))]
    assert len(with_transactions) >= 3
    reads_on = []
    for reads in with_transactions:
        positions = _batch_positions(reads[-1].path)
        pending = [position for position, is_txn in positions if is_txn]
        pending_from = rng.choice(pending)
        known_through = rng.choice([position for position, _ in positions if position >= pending_from])
        last = FileRead(reads[-1].path, pending_from, known_through, pending_from)
        reads_on.append([*reads[:-1], last])
    by_jvm, by_python = _both(spark, reads_on)
    assert sorted(jvm_reads(spark, reads_on)) == list(range(len(reads_on)))
    assert by_jvm and by_jvm == by_python


def test_damaged_and_compressed_logs_are_left_to_the_python_reader(spark, tmp_path):
    write_corpus(tmp_path / "damaged", partitions=3, files=2, damaged_per_file=5)
    compressed = tmp_path / "compressed" / "__consumer_offsets-7"
    compressed.mkdir(parents=True)
    plain = batch_v2(0, [Rec(b"a", b"b")])
    gzipped = batch_v2(1, [Rec(b"k%d" % index, b"v%d" % index) for index in range(3)], codec="gzip")
    (compressed / "00000000000000000000.log").write_bytes(plain + gzipped)
    partitions = _partitions(tmp_path / "damaged", tmp_path / "compressed")
    assert jvm_reads(spark, partitions) == {}
    by_jvm, by_python = _both(spark, partitions)
    assert any(row[16] is not None for row in by_jvm)  # the quarantine rows with their reasons
    assert by_jvm == by_python


def test_a_segment_that_grows_after_the_check_is_read_as_checked(spark, tmp_path):
    source = next(iter(sorted(CAPTURES.glob("kafka-4.2.1/*/segments/__consumer_offsets-*"))))
    directory = tmp_path / source.name
    shutil.copytree(source, directory)
    partitions = _partitions(directory)
    taken = jvm_reads(spark, partitions)
    assert list(taken) == [0]
    before = sorted(tuple(row) for row in jvm_rows(spark, taken, "c", "run").collect())
    last = Path(partitions[0][-1].path.removeprefix("file:"))
    with last.open("ab") as file:  # a batch the broker is writing: torn
        file.write(batch_v2(10**9, [Rec(b"late", b"record")])[:40])
    after = sorted(tuple(row) for row in jvm_rows(spark, taken, "c", "run").collect())
    assert before and after == before
    assert jvm_reads(spark, partitions) == {}  # checked again, the torn batch is the Python reader's
