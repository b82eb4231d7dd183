"""Which rebalances an incremental history run keeps as they are (transforms/gold/resume.py), rule by rule.

One group, one incarnation, generations 1-6 recorded at offsets 10, 20, ... 60 of partition 7, a second
apart; the night's changes start at offset 45 (after generation 4), at 00:00:45. The end-to-end proof that
what is kept equals a rebuild is tests/spark/test_incremental_history.py; here each rule is shown to bite.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from chispa import assert_df_equality

from transforms.gold.resume import change_starts, commit_floors, narrowed_floors, settled_rebalances, silent_spans
from transforms.gold.touched import commit_change_summary

START = datetime(2026, 11, 2)


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def generations(spark, partition_of=lambda generation: 7):
    rows = [("c", "g", 0, generation, partition_of(generation), generation * 10) for generation in range(1, 7)]
    return spark.createDataFrame(
        rows,
        "cluster string, group_id string, incarnation int, generation int, source_partition int, source_offset long",
    )


def rebalances(spark, rows):
    """rows: (generation, join second, protocol, pause ms, method)."""
    return spark.createDataFrame(
        [
            ("c", "g", 0, generation, at(join), protocol, pause, method)
            for generation, join, protocol, pause, method in rows
        ],
        "cluster string, group_id string, incarnation int, generation int, join_completed_at timestamp,"
        " rebalance_protocol string, estimated_pause_ms long, pause_estimate_method string",
    )


def changes(spark, rows, commits=()):
    """rows: (partition, offset, second) of changed group records; commits: the same for changed commits."""
    schema = "cluster string, group_id string, source_partition int, source_offset long, record_at timestamp"
    records = spark.createDataFrame([("c", "g", p, o, at(s) if s is not None else None) for p, o, s in rows], schema)
    changed_commits = spark.createDataFrame([("c", "g", p, o, at(s)) for p, o, s in commits], schema)
    groups = spark.createDataFrame([("c", "g")], "cluster string, group_id string")
    return change_starts([records, changed_commits], changed_commits, groups)


def settled(spark, rebalance_rows, starts, gens=None):
    kept = settled_rebalances(rebalances(spark, rebalance_rows), gens or generations(spark), starts)
    return sorted(row.generation for row in kept.collect())


def test_a_rebalance_is_kept_once_two_later_generations_precede_the_changes(spark):
    starts = changes(spark, [(7, 45, 45.0)])
    rows = [(generation, generation * 1.0, "cooperative", None, None) for generation in range(1, 6)]
    # 2 has 3 and 4 before offset 45; 3 has only 4 (its frame reads 4, whose row the night may change).
    assert settled(spark, rows, starts) == [1, 2]
    # one generation before the change (offset 15): none has two later ones, none is settled
    assert settled(spark, rows, changes(spark, [(7, 15, 45.0)])) == []


def test_a_rebalance_whose_join_is_not_before_the_changes_is_computed_again(spark):
    # A changed record at second 1.5, logged after generation 4: generation 1's departures may read it.
    starts = changes(spark, [(7, 45, 1.5)])
    rows = [(1, 1.0, "eager", 100, "commit_gap"), (2, 2.0, "cooperative", None, None)]
    assert settled(spark, rows, starts) == [1]
    # A known pause reads commits up to join + pause: 1.0 s + 600 ms passes the change at 1.5 s.
    assert settled(spark, [(1, 1.0, "eager", 600, "commit_gap")], starts) == []


def test_an_unknown_pause_is_kept_when_no_commit_can_make_it_known(spark):
    rows = [
        (1, 1.0, "eager", None, "no_commit_in_generation"),  # nothing to start the gap from, ever
        (2, 2.0, "eager", None, None),  # waits for the group's first commit after it
    ]
    assert settled(spark, rows, changes(spark, [(7, 45, 45.0)])) == [1, 2]  # no commit changed tonight
    with_commits = changes(spark, [(7, 45, 45.0)], commits=[(7, 46, 46.0)])
    assert settled(spark, rows, with_commits) == [1]  # tonight's commit may be the one it waits for


def test_nothing_is_kept_for_changes_without_a_place_or_a_time(spark):
    rows = [(1, 1.0, "cooperative", None, None)]
    assert settled(spark, rows, changes(spark, [(7, 45, None)])) == []  # a record of no time (magic 0)
    assert settled(spark, rows, changes(spark, [(7, 45, 45.0), (8, 3, 45.0)])) == []  # two partitions
    assert settled(spark, rows, changes(spark, [(7, 25, 45.0)])) == []  # only generation 2 before offset 25


def test_only_generations_of_the_changes_partition_count(spark):
    rows, starts = [(2, 2.0, "cooperative", None, None)], changes(spark, [(7, 45, 45.0)])
    assert settled(spark, rows, starts) == [2]
    elsewhere = generations(spark, partition_of=lambda generation: 8 if generation == 3 else 7)
    assert settled(spark, rows, starts, elsewhere) == []  # offsets of another partition say nothing of order


def test_commits_are_read_from_the_minute_of_the_earliest_generation_or_sign_of_life_a_rebalance_reads(spark):
    framed = spark.createDataFrame(
        [
            ("c", "g", at(125.5), at(130.0)),
            ("c", "g", at(300.0), at(301.0)),
            ("c", "h", None, None),
            ("c", "k", at(300.0), None),
        ],
        "cluster string, group_id string, before_recorded_at timestamp, before_last_recorded_at timestamp",
    )
    # departures.commit_lookups: g's pause from its generation; k's leaver, a KIP-848 member killed after
    # its own last record at 250 s, fenced in the rebalance after the generation others made at 300 s.
    lookups = spark.createDataFrame(
        [("c", "g", at(125.5)), ("c", "k", at(250.0)), ("c", "k", at(300.0))],
        "cluster string, group_id string, known_from timestamp",
    )
    floors = {row.group_id: row for row in commit_floors(framed, lookups).collect()}
    assert floors["g"].commit_floor_at == at(120.0)
    assert "h" not in floors  # a first rebalance reads no commit: no leaver, and no pause
    assert floors["k"].commit_floor_at == at(240.0)


def test_change_starts_from_the_summary_of_the_changed_commits_equal_those_from_the_commits(spark):
    schema = "cluster string, group_id string, source_partition int, source_offset long, record_at timestamp"
    records = spark.createDataFrame([("c", "g", 7, 60, at(60))], schema)
    changed_commits = spark.createDataFrame(
        [
            ("c", "g", 7, 50, at(50)),
            ("c", "g", 7, 47, at(48)),  # the lowest offset is not the earliest time's
            ("c", "g", 7, 52, at(44)),
            ("c", "h", 3, 10, at(5)),  # two partitions: unplaced
            ("c", "h", 4, 9, at(6)),
            ("c", "u", 2, 29, at(1)),
            ("c", "u", 2, 30, None),  # untimed: unplaced
        ],
        schema,
    )
    groups = spark.createDataFrame([("c", g) for g in "ghux"], "cluster string, group_id string")
    summary = commit_change_summary(changed_commits)

    from_commits = change_starts([records, changed_commits], changed_commits, groups)
    from_summary = change_starts([records, summary], summary, groups)

    assert summary.count() == 4
    assert_df_equality(from_summary, from_commits, ignore_row_order=True, ignore_nullable=True)
    starts = {row.group_id: (row.changed_from_offset, row.changed_from_at) for row in from_commits.collect()}
    assert starts == {"g": (47, at(44)), "h": (None, None), "u": (None, None), "x": (None, None)}


def test_a_floor_is_narrowed_to_an_hour_before_the_first_lookup_and_a_group_reading_no_commit_has_none(spark):
    framed = spark.createDataFrame(
        [
            ("c", "g", at(7230.5), at(7231.0), at(10.0), at(20.0)),
            ("c", "g", at(9000.0), at(9001.0), at(7231.0), at(7231.0)),
            ("c", "new", at(7230.5), at(7231.0), None, None),  # an incarnation's first rebalance: reads no commit
        ],
        "cluster string, group_id string, join_completed_at timestamp, recorded_at timestamp,"
        " before_recorded_at timestamp, before_last_recorded_at timestamp",
    )

    no_lookups = spark.createDataFrame([], "cluster string, group_id string, known_from timestamp")
    floors = commit_floors(framed, no_lookups)
    narrowed = {row.group_id: row for row in narrowed_floors(framed, floors, 3_600_000).collect()}

    assert (narrowed["g"].is_narrowed, narrowed["g"].commit_floor_at) == (True, at(3600))
    assert "new" not in narrowed


def test_a_pause_that_waits_for_a_commit_tells_that_the_group_has_none_until_the_changes(spark):
    """rows: (generation, completion second, protocol, pause ms, method)."""

    def spans(rows, starts):
        table = spark.createDataFrame(
            [("c", "g", 0, generation, at(completed), protocol, pause, method)
             for generation, completed, protocol, pause, method in rows],
            "cluster string, group_id string, incarnation int, generation int, completed_at timestamp,"
            " rebalance_protocol string, estimated_pause_ms long, pause_estimate_method string",
        )  # fmt: skip
        return [(row.silent_after, row.silent_until) for row in silent_spans(table, starts).collect()]

    starts = changes(spark, [(7, 45, 45.0)], commits=[(7, 46, 46.0)])
    waiting = [(2, 2.0, "eager", None, None), (3, 3.0, "eager", None, None)]
    assert spans(waiting, starts) == [(at(2.0), at(45.0))]  # from the earliest waiting one
    assert spans(waiting, changes(spark, [(7, 45, 2.5)])) == [(at(2.0), at(2.5))]  # a change before 3.0
    others = [
        (2, 2.0, "eager", 100, "commit_gap"),  # found its commit after
        (3, 3.0, "eager", None, "no_commit_in_generation"),  # waits for nothing
        (4, 4.0, "cooperative", None, None),  # has no pause
        (5, 50.0, "eager", None, None),  # completed after the changes start
    ]
    assert spans(others, starts) == []
    assert spans(waiting, changes(spark, [(7, 45, 45.0), (8, 3, 45.0)])) == []  # changes in two partitions
