"""What raw_records holds of each segment file, carried from ingest to ingest (jobs/file_states.py): after
every kind of change the table meets, the noted states equal the states computed from all of its rows,
and only the files whose rows changed other than by new batches are computed from the table's rows.

One partition's log grows night after night: plain commits appended (a file's state combined with its
new batches), a transaction left pending, a segment roll whose new file holds the transaction's marker
(the pending row updated: its file computed again; the new file's state from its rows), raw retention
deleting old records (rows deleted: computed again), and the states table lost (all computed again).
The bytes are made by bench.batch_builder, the encoder proven against DumpLogSegments in
tests/unit/test_generator.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from bench.batch_builder import COMMIT, TIMESTAMP_MS, Rec, batch_v2, control_batch
from bench.records import offset_commit_key, offset_commit_value
from jobs.file_states import FILE_STATES, STATE_COLUMNS, STEP, file_states, states_computed_at
from jobs.ingest_plan import FileState
from jobs.raw_changes import retire
from jobs.runs import JobRun
from jobs.steps.ingest import ingest
from jobs.tables import RAW_RECORDS
from jobs.watermarks import covered_versions, current_version

PARTITION = "__consumer_offsets-5"
FIRST, SECOND = "00000000000000000000.log", "00000000000000000006.log"


def commits(first_offset: int, count: int) -> bytes:
    return b"".join(
        batch_v2(
            offset, [Rec(offset_commit_key("app", "orders", 0), offset_commit_value(4, offset, 0, b"", TIMESTAMP_MS))]
        )
        for offset in range(first_offset, first_offset + count)
    )


PENDING = batch_v2(
    5,
    [Rec(offset_commit_key("txn-app", "orders", 1), offset_commit_value(4, 5, 0, b"", TIMESTAMP_MS))],
    is_transactional=True,
    producer_id=7,
    producer_epoch=0,
    base_sequence=0,
)
# (file, bytes appended) per night, and the files each night's ingest computes from raw rows.
NIGHTS = [
    ([(FIRST, commits(0, 3))], set()),  # computed from all rows at the start: none yet
    ([(FIRST, commits(3, 2) + PENDING)], set()),
    ([(SECOND, control_batch(6, 7, control_type=COMMIT) + commits(7, 2))], {FIRST}),
    ([(SECOND, commits(9, 3))], set()),
]


def noted_rows(spark, config) -> tuple[int, dict[str, FileState]]:
    """The raw_records version the states table's note names, and its rows."""
    version = covered_versions(spark, config.table(FILE_STATES), STEP, config.cluster)[RAW_RECORDS]
    rows = spark.table(config.table(FILE_STATES)).where(F.col("cluster") == F.lit(config.cluster)).collect()
    return version, {row["source_file"]: FileState(*(row[name] for name in STATE_COLUMNS)) for row in rows}


def ingest_night(spark, config) -> int:
    with JobRun(spark, config, "ingest") as run:
        ingest(spark, config, run)
    assert run.exit_code == 0, "the run failed; see its job_runs row"
    return run.counts["ingest_file_states_computed"]


def check_noted(spark, config) -> dict[str, FileState]:
    """The noted states are those of the table's current version, as computed from all its rows."""
    now = current_version(spark, config.table(RAW_RECORDS))
    version, noted = noted_rows(spark, config)
    assert (version, noted) == (now, states_computed_at(spark, config, now))
    return noted


@pytest.fixture(scope="module")
def log(spark_config, tmp_path_factory):
    root = tmp_path_factory.mktemp("file-states")
    (root / PARTITION).mkdir()
    return root / PARTITION, replace(spark_config, cluster="file-states", segment_paths=(str(root),))


@pytest.fixture(scope="module")
def nights(spark, log) -> list[tuple[int, dict[str, FileState]]]:
    directory, config = log
    seen = []
    for appended, _ in NIGHTS:
        for name, content in appended:
            with open(directory / name, "ab") as segment:
                segment.write(content)
        computed = ingest_night(spark, config)
        seen.append((computed, check_noted(spark, config)))
    return seen


def test_each_night_computes_only_the_files_whose_rows_changed_otherwise(nights):
    assert [computed for computed, _ in nights] == [len(files) for _, files in NIGHTS]


def test_a_pending_transaction_is_in_its_files_state_until_resolved(nights):
    by_name = [{Path(path).name: state for path, state in states.items()} for _, states in nights]
    pending = [states[FIRST].first_pending_position for states in by_name]
    assert pending[0] is None and pending[1] is not None
    assert pending[2:] == [None, None]
    assert sorted(by_name[-1]) == [FIRST, SECOND]


def test_raw_retention_deletes_are_followed(spark, log, nights):
    _, config = log
    before = current_version(spark, config.table(RAW_RECORDS))
    assert retire(spark, config, F.lit(True)) > 0
    known = file_states(spark, config)
    assert known.computed == 2, known.how  # both files lost rows: each is computed again, nothing else
    assert current_version(spark, config.table(RAW_RECORDS)) == before + 1
    check_noted(spark, config)


def test_a_lost_states_table_is_computed_again_from_all_rows(spark, log, nights):
    directory, config = log
    spark.sql(f"DROP TABLE {config.table(FILE_STATES)}")
    with open(directory / SECOND, "ab") as segment:
        segment.write(commits(12, 1))
    assert ingest_night(spark, config) == 2
    check_noted(spark, config)
