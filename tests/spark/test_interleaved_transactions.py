"""Two producers' transactions interleaved in one partition, read on night after night: each record once.

A partition's log as brokers write it when transactional producers overlap (`sendOffsetsToTransaction`
from two applications whose groups hash to one partition): producer 1 begins a transaction, producer 2
begins and commits one after it, and producer 1's marker comes only after the night's cut. The next
night reads the file on from producer 1's pending batch, so it reads producer 2's batch again, already
held and committed. Found by bench.nights (issue 16 §5): 13 records landed twice in 4.7M over three
nights, each a committed transaction after a pending one. The bytes are made by bench.batch_builder, the
encoder the generator's logs (proven against Kafka's DumpLogSegments in tests/unit/test_generator.py)
are written with.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.sql import functions as F

from bench.batch_builder import ABORT, COMMIT, TIMESTAMP_MS, Rec, batch_v2, control_batch
from bench.records import offset_commit_key, offset_commit_value
from jobs.runs import JobRun
from jobs.steps.decode import decode
from jobs.steps.ingest import ingest

PARTITION = "__consumer_offsets-3"


def commit(producer_id: int, offset: int, group: str) -> bytes:
    record = Rec(offset_commit_key(group, "orders", 0), offset_commit_value(4, 100 + offset, 0, b"", TIMESTAMP_MS))
    return batch_v2(offset, [record], is_transactional=True, producer_id=producer_id, producer_epoch=0, base_sequence=0)


# Night 1: producer 1's transaction is open; producer 2's began after it and is committed.
NIGHT_1 = commit(1, 0, "app-1") + commit(2, 1, "app-2") + control_batch(2, 2, control_type=COMMIT)
# Night 2: producer 1's marker, then a third transaction that is still open at the cut.
NIGHT_2 = control_batch(3, 1, control_type=ABORT) + commit(2, 4, "app-2")
NIGHT_3 = control_batch(5, 2, control_type=COMMIT)
# Night 4: a plain commit. The file ended in a marker, so the last batch held is a resolved transaction
# the read on starts at: it came out again and was appended a second time (bench.nights' 13 duplicates).
NIGHT_4 = batch_v2(6, [Rec(offset_commit_key("app-3", "orders", 0), offset_commit_value(4, 7, 0, b"", TIMESTAMP_MS))])


def nightly(spark, config) -> dict[str, int]:
    with JobRun(spark, config, "nightly") as run:
        ingest(spark, config, run)
        decode(spark, config, run)
    assert run.exit_code == 0, "the run failed; see its job_runs row"
    return run.counts


def raw_rows(spark, config) -> list[tuple]:
    rows = spark.table(config.table("raw_records")).where(F.col("cluster") == F.lit(config.cluster))
    return sorted((r.record_id, r.source_offset, r.txn_state) for r in rows.collect())


def states_beside_pending(spark, config) -> set[str | None]:
    """The transaction states of the offset_commits rows in the files that hold a pending commit."""
    rows = (
        spark.table(config.table("offset_commits"))
        .where(F.col("cluster") == F.lit(config.cluster))
        .withColumn("file", F.input_file_name())
    )
    holding = rows.where(F.col("txn_state") == F.lit("pending")).select("file").distinct()
    return {row.txn_state for row in rows.join(holding, on="file", how="left_semi").collect()}


@pytest.fixture(scope="module")
def nights(spark, spark_config, tmp_path_factory):
    root = tmp_path_factory.mktemp("interleaved")
    live, whole = root / "live" / PARTITION, root / "whole" / PARTITION
    live.mkdir(parents=True)
    whole.mkdir(parents=True)
    (whole / "00000000000000000000.log").write_bytes(NIGHT_1 + NIGHT_2 + NIGHT_3 + NIGHT_4)
    incremental = replace(spark_config, cluster="interleaved-nights", segment_paths=(str(root / "live"),))
    once = replace(spark_config, cluster="interleaved-once", segment_paths=(str(root / "whole"),))
    segment, states = live / "00000000000000000000.log", []
    # A night's commits in several ranges, as a real night's: with the suite's one shuffle partition, the one
    # range and the others' one file are a single partition each, and Spark's union zips the two.
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        for night in (NIGHT_1, NIGHT_2, NIGHT_3, NIGHT_4):
            with open(segment, "ab") as log:
                log.write(night)
            counts = nightly(spark, incremental)
            states.append((counts, raw_rows(spark, incremental), states_beside_pending(spark, incremental)))
        nightly(spark, once)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    return states, raw_rows(spark, once)


def test_each_record_is_held_once_with_its_transactions_outcome(nights):
    states, _ = nights
    offsets_and_states = [[(offset, state) for _, offset, state in rows] for _, rows, _ in states]
    assert offsets_and_states == [
        [(0, "pending"), (1, "committed")],
        [(0, "aborted"), (1, "committed"), (4, "pending")],
        [(0, "aborted"), (1, "committed"), (4, "committed")],
        [(0, "aborted"), (1, "committed"), (4, "committed"), (6, None)],
    ]
    assert [counts["raw_records"] for counts, _, _ in states] == [2, 3, 3, 4]


def test_a_pending_commit_sits_in_a_file_apart_from_settled_ones(nights):
    """The marker that resolves a pending commit on a later night rewrites the file holding it: a file of
    the night's few others, not one of its bulk (a 1.2M-row file rewritten for 2 records at the bench's
    night 7)."""
    states, _ = nights
    assert [beside for _, _, beside in states] == [{"pending"}, {"pending"}, set(), set()]


def test_the_nights_hold_what_one_read_of_the_whole_log_holds(nights):
    states, once = nights
    _, last, _ = states[-1]
    assert [(offset, state) for _, offset, state in last] == [(offset, state) for _, offset, state in once]


def test_a_night_killed_between_resolving_and_appending_leaves_what_an_uninterrupted_one_does(
    spark, spark_config, tmp_path, monkeypatch, nights
):
    """Ingest resolves held pending records in one commit and appends the new ones in the next: a run
    killed between the two (here: failing right after the first) and run again holds what the
    uninterrupted nights hold, night by night."""
    import jobs.steps.ingest as ingest_step

    uninterrupted, _ = nights
    live = tmp_path / PARTITION
    live.mkdir()
    config = replace(spark_config, cluster="interleaved-killed", segment_paths=(str(tmp_path),))
    segment = live / "00000000000000000000.log"
    resolve = ingest_step.merge_resolved_transactions
    killed = []

    def resolve_then_die(*args, **kwargs):
        resolve(*args, **kwargs)
        killed.append(True)
        raise RuntimeError("killed after the resolving commit")

    states = []
    for index, night in enumerate((NIGHT_1, NIGHT_2, NIGHT_3, NIGHT_4)):
        with open(segment, "ab") as log:
            log.write(night)
        if index == 1:
            with monkeypatch.context() as patch:
                patch.setattr(ingest_step, "merge_resolved_transactions", resolve_then_die)
                with JobRun(spark, config, "nightly") as run:
                    ingest(spark, config, run)
            assert killed and run.exit_code != 0
            # The resolving commit is in: the aborted transaction shows, night 2's new record does not.
            assert [(offset, state) for _, offset, state in raw_rows(spark, config)] == [
                (0, "aborted"),
                (1, "committed"),
            ]
        counts = nightly(spark, config)
        states.append((counts["raw_records"], raw_rows(spark, config)))

    assert [(count, [row[1:] for row in rows]) for count, rows in states] == [
        (night_counts["raw_records"], [row[1:] for row in rows]) for night_counts, rows, _ in uninterrupted
    ]
