"""`lag` and `consumer_status` are the same from the records near snapshots as from all records, and
most records between snapshots are left out."""

from __future__ import annotations

import math
import random

import pytest
from chispa import assert_df_equality

from schemas import ops
from tests.gold_rows import CLUSTER, at, commit, commits
from transforms.gold import lag, snapshot_horizon, status
from transforms.gold.metrics_carry import group_partition_facts, group_partition_words
from transforms.gold.snapshot_horizon import records_seen_by_snapshots

INTERVALS = 3
MIN_DISTANCE_MS = 1000
SNAPSHOTS = [5.5, 30, 31, 32, 60]  # one inside a bucket that holds commits on both sides of it; an idle stretch


def _records() -> list[dict]:
    offsets = iter(range(1_000))

    def at_seconds(seconds, group="g", committed=None, **extra):
        return commit(next(offsets), seconds, group, "t", 0, committed, **extra)

    busy = [at_seconds(s, committed=int(s * 10)) for s in range(27)]  # one commit a second, from 0 to 26 s
    around_snapshot = [at_seconds(5.2, committed=52), at_seconds(5.8, committed=58)]
    # Two commits in one bucket, the later in time written earlier in the log: the slot keeps the log's last.
    out_of_order = [commit(900, 29.7, "g", "t", 0, 297), commit(899, 29.9, "g", "t", 0, 299)]
    aborted = [at_seconds(29.95, committed=999, txn_state="aborted", producer_id=7)]  # never counts
    at_a_snapshot = [at_seconds(60, committed=600)]
    tombstoned = [at_seconds(s, group="h", committed=s) for s in range(20)] + [at_seconds(25, group="h")]
    late_only = [at_seconds(2, group="i", committed=1), *[at_seconds(61 + s, group="i", committed=s) for s in range(5)]]
    return busy + around_snapshot + out_of_order + aborted + at_a_snapshot + tombstoned + late_only


@pytest.fixture(scope="module")
def inputs(spark):
    end_offsets = spark.createDataFrame(
        [(CLUSTER, "t", 0, 400 + int(seconds), at(seconds)) for seconds in SNAPSHOTS], ops.end_offsets_schema
    )
    offset_commits = commits(spark, _records())
    seen = records_seen_by_snapshots(
        offset_commits, end_offsets, intervals=INTERVALS, min_distance_ms=MIN_DISTANCE_MS, hold=_held
    ).localCheckpoint()
    return offset_commits, end_offsets, seen


def _held(rows):
    return rows.localCheckpoint()


def _lag_and_status(commit_rows, end_offsets):
    lag_rows = lag.lag(commit_rows, end_offsets).localCheckpoint()
    status_rows = status.consumer_status(
        lag_rows, commit_rows, end_offsets, intervals=INTERVALS, min_distance_ms=MIN_DISTANCE_MS, allowed_lag=0,
        minimum_complete=0.0,
    )  # fmt: skip
    return lag_rows, status_rows


def test_lag_and_status_are_the_same_from_the_records_near_snapshots(inputs):
    offset_commits, end_offsets, seen = inputs
    all_lag, all_status = _lag_and_status(offset_commits, end_offsets)
    seen_lag, seen_status = _lag_and_status(seen, end_offsets)
    assert all_lag.count() == 11 and all_status.count() == 11  # g at 5 snapshots, h at 1 (then a tombstone), i at 5
    assert_df_equality(seen_lag, all_lag, ignore_row_order=True)
    assert_df_equality(seen_status, all_status, ignore_row_order=True)


def test_records_far_from_every_snapshot_are_left_out(inputs):
    _, _, seen = inputs
    kept = {(row.group_id, row.source_offset) for row in seen.collect()}
    kept_g = sorted(offset for group, offset in kept if group == "g")
    # Snapshot 5.5: its bucket (5, 5.2 and 5.8 s) and the three buckets before it. Snapshot 30 (its bucket
    # empty): the out-of-order pair of bucket 29 (the aborted commit never counts), 26 and 25 s. Snapshot 60:
    # the commit at 60 s. Nothing from 6 to 24 s.
    assert kept_g == [2, 3, 4, 5, 25, 26, 27, 28, 30, 899, 900]
    assert sum(1 for group, _ in kept if group == "h") == 21  # a tombstone: the group partition is kept whole
    assert sorted(offset for group, offset in kept if group == "i") == [52]  # nothing after the last snapshot


def test_the_walk_started_from_the_records_facts_held_by_the_caller_keeps_the_same_records(inputs):
    offset_commits, end_offsets, seen = inputs
    facts = group_partition_facts(offset_commits, min_distance_ms=MIN_DISTANCE_MS).localCheckpoint()
    from_facts = records_seen_by_snapshots(
        offset_commits, end_offsets, intervals=INTERVALS, min_distance_ms=MIN_DISTANCE_MS, hold=_held, facts=facts
    )
    assert_df_equality(from_facts, seen, ignore_row_order=True)
    words = group_partition_words(offset_commits, facts, min_distance_ms=MIN_DISTANCE_MS).localCheckpoint()
    from_words = records_seen_by_snapshots(
        offset_commits, end_offsets, intervals=INTERVALS, min_distance_ms=MIN_DISTANCE_MS, hold=_held, facts=facts,
        words=words,
    )  # fmt: skip
    assert_df_equality(from_words, seen, ignore_row_order=True)


def _random_estate(draw: random.Random) -> tuple[list[dict], list[tuple[str, int, float]]]:
    """Group partitions of many kinds: dense (several commits a bucket), sparse (minutes apart, so a
    snapshot reaches back over many words), with untimed records, aborted commits or a tombstone."""
    rows, snapshots, offsets = [], [], iter(range(100_000))
    for partition in range(12):
        snapshots += [("t", partition, draw.uniform(0, 1_500)) for _ in range(draw.randint(0, 12))]
        for group in ("g", "h"):
            spacing = draw.choice([0.3, 1.0, 7.0, 90.0])
            start = draw.uniform(0, 300)
            for index in range(draw.randint(0, 150)):
                extra = {"record_at": None} if draw.random() < 0.03 else {}
                if draw.random() < 0.05:
                    extra.update(txn_state="aborted", producer_id=7)
                rows.append(commit(next(offsets), start + index * spacing * draw.uniform(0.5, 1.5), group, "t",
                    partition, index, **extra))  # fmt: skip
            if partition % 5 == 4 and group == "h":
                rows.append(commit(next(offsets), draw.uniform(0, 1_500), group, "t", partition, None))
    return rows, snapshots


def _kept_by_definition(rows: list[dict], snapshots: list[tuple[str, int, float]], intervals: int) -> set[int]:
    """Per group partition: with a tombstone every visible record; else, for each snapshot at or after its
    first timed record, the records in the snapshot's bucket and in the `intervals` latest non-empty buckets
    before it (an untimed record's bucket comes before every other)."""
    visible = [row for row in rows if row.get("txn_state") in (None, "committed")]
    kept = set()
    for key in {(row["group_id"], row["topic"], row["partition"]) for row in visible}:
        own = [row for row in visible if (row["group_id"], row["topic"], row["partition"]) == key]
        if any(row["is_tombstone"] for row in own):
            kept |= {row["source_offset"] for row in own}
            continue

        def bucket(row):
            return (
                -math.inf
                if row["record_at"] is None
                else math.floor(row["record_at"].timestamp() * 1000 / MIN_DISTANCE_MS)
            )

        buckets = sorted({bucket(row) for row in own})
        timed = [row["record_at"] for row in own if row["record_at"] is not None]
        for topic, partition, seconds in snapshots:
            if (topic, partition) != key[1:] or not timed or at(seconds) < min(timed):
                continue
            snapshot_bucket = math.floor(at(seconds).timestamp() * 1000 / MIN_DISTANCE_MS)
            reached = {snapshot_bucket} | set([b for b in buckets if b < snapshot_bucket][-intervals:])
            kept |= {row["source_offset"] for row in own if bucket(row) in reached}
    return kept


@pytest.mark.parametrize(
    "seed, shared, broadcast_masks",
    [(26, False, 4_000_000), (27, True, 4_000_000), (28, True, 0)],
    ids=["own bitmaps", "the carry's bitmaps", "kept words past the broadcast hint's limit"],
)
def test_the_records_kept_equal_the_definition_on_random_group_partitions(
    spark, monkeypatch, seed, shared, broadcast_masks
):
    monkeypatch.setattr(snapshot_horizon, "_BROADCAST_MASKS", broadcast_masks)
    rows, snapshots = _random_estate(random.Random(seed))
    end_offsets = spark.createDataFrame(
        [(CLUSTER, topic, partition, 0, at(seconds)) for topic, partition, seconds in snapshots], ops.end_offsets_schema
    )
    offset_commits = commits(spark, rows)
    given = {}
    if shared:
        facts = group_partition_facts(offset_commits, min_distance_ms=MIN_DISTANCE_MS).localCheckpoint()
        words = group_partition_words(offset_commits, facts, min_distance_ms=MIN_DISTANCE_MS).localCheckpoint()
        given = {"facts": facts, "words": words}
    seen = records_seen_by_snapshots(
        offset_commits, end_offsets, intervals=INTERVALS, min_distance_ms=MIN_DISTANCE_MS, hold=_held, **given
    )
    kept = [row.source_offset for row in seen.collect()]
    assert len(kept) == len(set(kept))
    expected = _kept_by_definition(rows, snapshots, INTERVALS)
    assert set(kept) == expected
    assert 0 < len(expected) < len(rows)
