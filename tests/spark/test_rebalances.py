"""Rebalances, movements, minimal moves, causes and frequency on tiny hand-made group histories.

The headline case (issue 3): topics orders (7 partitions) and stock (5), consumers C1-C3, C3 crashes.
The assignments below are what Kafka's RangeAssignor, RoundRobinAssignor and a sticky assignor give.
"""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from tests.gold_rows import at, commit, commits, group_tables, map_text
from tests.gold_rows import group_record as record
from transforms.gold import assignment_math, departures, frequency, generations, offsets, rebalances

BOTH = ["orders", "stock"]
CRASH = {  # assignor -> (generation 1 with C1-C3, generation 2 after C3 crashed)
    "range": (
        {"C1": {"orders": [0, 1, 2], "stock": [0, 1]}, "C2": {"orders": [3, 4], "stock": [2, 3]},
         "C3": {"orders": [5, 6], "stock": [4]}},
        {"C1": {"orders": [0, 1, 2, 3], "stock": [0, 1, 2]}, "C2": {"orders": [4, 5, 6], "stock": [3, 4]}},
    ),
    "roundrobin": (
        {"C1": {"orders": [0, 3, 6], "stock": [2]}, "C2": {"orders": [1, 4], "stock": [0, 3]},
         "C3": {"orders": [2, 5], "stock": [1, 4]}},
        {"C1": {"orders": [0, 2, 4, 6], "stock": [1, 3]}, "C2": {"orders": [1, 3, 5], "stock": [0, 2, 4]}},
    ),
    "sticky": (
        {"C1": {"orders": [0, 1, 2], "stock": [0]}, "C2": {"orders": [3, 4, 5], "stock": [1]},
         "C3": {"orders": [6], "stock": [2, 3, 4]}},
        {"C1": {"orders": [0, 1, 2, 6], "stock": [0, 2]}, "C2": {"orders": [3, 4, 5], "stock": [1, 3, 4]}},
    ),
}  # fmt: skip


def crash_history(assignor, first_offset):
    before, after = CRASH[assignor]
    members = [(m, None, BOTH, before[m]) for m in ("C1", "C2", "C3")]
    # C3's last sign of life is generation 1 (t=10); its session (6 s) expires and the join ends at 16.5.
    return [
        record(assignor, first_offset, 10, 1, members, assignor=assignor),
        record(assignor, first_offset + 1, 16.7, 2, [(m, None, BOTH, after[m]) for m in ("C1", "C2")],
               assignor=assignor, joined_at=16.5),
    ]  # fmt: skip


def orders(*partitions):
    return {"orders": list(partitions)}


HISTORY = [
    *crash_history("range", 0),
    *crash_history("roundrobin", 2),
    *crash_history("sticky", 4),
    # cooperative-sticky: generation 2 revokes orders 0-2 from C1 (still a member), generation 3 assigns them
    record("coop", 6, 1, 1, [("C1", None, ["orders"], orders(0, 1, 2, 3, 4, 5))], assignor="cooperative-sticky"),
    record("coop", 7, 2, 2, [("C1", None, ["orders"], orders(3, 4, 5)), ("C2", None, ["orders"], {})],
           assignor="cooperative-sticky"),
    record("coop", 8, 2.5, 3, [("C1", None, ["orders"], orders(3, 4, 5)), ("C2", None, ["orders"], orders(0, 1, 2))],
           assignor="cooperative-sticky"),
    # a life: C2 leaves cleanly, static C1 is replaced (no rebalance), rounds 3-4 fail, C1 subscribes to stock,
    # orders grows a partition, then the group empties long after C1's last sign of life
    record("life", 10, 20, 1, [("C1a", "i1", ["orders"], orders(0)), ("C2", None, ["orders"], orders(1))]),
    record("life", 11, 21.2, 2, [("C1a", "i1", ["orders"], orders(0, 1))], joined_at=21),
    record("life", 12, 25, 2, [("C1b", "i1", ["orders"], orders(0, 1))]),
    record("life", 13, 200, 5, [("C1b", "i1", BOTH, {"orders": [0, 1], "stock": [0]})]),
    record("life", 14, 300, 6, [("C1b", "i1", BOTH, {"orders": [0, 1, 2], "stock": [0]})]),
    record("life", 15, 1000, 7),
    # mixed subscriptions: classes sharing orders (lower bound), and classes on disjoint topics (exact)
    record("mixed", 16, 1, 1, [("A", None, ["orders"], orders(0, 1)), ("B", None, BOTH, {"orders": [2], "stock": [0]}),
                               ("C", None, ["stock"], {"stock": [1]})]),
    record("mixed", 17, 2, 2, [("A", None, ["orders"], orders(0, 1)),
                               ("B", None, BOTH, {"orders": [2], "stock": [0, 1]})]),
    record("disjoint", 18, 1, 1, [("A", None, ["orders"], orders(0, 1)), ("B", None, ["orders"], orders(2, 3)),
                                  ("C", None, ["stock"], {"stock": [0]}), ("D", None, ["stock"], {"stock": [1]})]),
    record("disjoint", 19, 2, 2, [("A", None, ["orders"], orders(0, 1, 2, 3)), ("C", None, ["stock"], {"stock": [0]}),
                                  ("D", None, ["stock"], {"stock": [1]})]),
]  # fmt: skip

COMMITS = [
    commit(100, 20.9, "life", "orders", 1, 7),  # C2 commits as it leaves
    commit(101, 22.0, "life", "orders", 0, 9),  # the first commit after generation 2
    commit(102, 23.0, "life", "orders", 1, 8, txn_state="aborted"),
]


def framed_history(spark, history=HISTORY):
    """(framed rebalances, partition changes, assignments) of `history`."""
    gens = generations.classic_generations(*group_tables(spark, history)).localCheckpoint()
    assignments = generations.explode_generation_assignments(gens).localCheckpoint()
    framed = rebalances.logical_rebalances(gens, assignments, round_gap_fallback_ms=300_000).localCheckpoint()
    return framed, assignment_math.partition_changes(framed, assignments).localCheckpoint(), assignments


def rebalance_rows(spark, framed, changes, assignments, counted_commits):
    no_share_members = spark.createDataFrame(
        [], "cluster string, group_id string, member_id string, record_at timestamp"
    )
    return rebalances.rebalances(
        framed,
        changes,
        assignments,
        counted_commits,
        no_share_members,
        spark.createDataFrame(
            [], "cluster string, group_id string, incarnation int, generation int, moved_standby_task_count int"
        ),  # classic groups hold no standby task
        departure_slack_ms=30_000,
        default_session_timeout_ms=45_000,
        default_heartbeat_interval_ms=5_000,
    )


@pytest.fixture(scope="module")
def rebalanced(spark):
    framed, changes, assignments = framed_history(spark)
    counted = offsets.filter_uncounted_commits(commits(spark, COMMITS))
    rows = rebalance_rows(spark, framed, changes, assignments, counted).localCheckpoint()
    return rows, rebalances.partition_movements(framed, changes).localCheckpoint()


def test_c3_crash_moves_and_minimal_moves_under_range_roundrobin_and_sticky(spark, rebalanced):
    rows, _ = rebalanced
    expected = spark.createDataFrame(
        [
            ("range", 5, 3, 0.6, 2, "orders:1 stock:1"),
            ("roundrobin", 8, 4, 0.5, 0, "orders:1 stock:1"),
            ("sticky", 4, 4, 1.0, 0, "orders:1 stock:1"),
        ],
        "group_id string, moved_partition_count int, minimal_moves int, stickiness double, skew int,"
        " skew_by_topic string",
    )
    crashes = rows.where(F.col("group_id").isin(*CRASH) & (F.col("generation") == 2))
    actual = crashes.select(*expected.columns[:-1], map_text(F.col("skew_by_topic")).alias("skew_by_topic"))
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    details = crashes.select("cause", "minimal_moves_method", F.col("members_left")[0]["how"].alias("how")).distinct()
    assert details.collect() == [("member_left_after_timeout", "exact", "timeout")]


def test_every_rebalance_has_its_generations_rounds_causes_and_protocol(spark, rebalanced):
    rows, _ = rebalanced
    expected = spark.createDataFrame(
        [
            ("coop", 1, None, 1, 1, "cooperative", ["member_joined"], 0, 0),
            ("coop", 3, 1, 2, 2, "cooperative", ["member_joined"], 3, 3),
            ("life", 1, None, 1, 1, "eager", ["member_joined"], 0, 0),
            ("life", 2, 1, 2, 1, "eager", ["member_left_cleanly"], 1, 1),
            ("life", 5, 2, 5, 1, "eager", ["subscription_changed"], 0, 0),
            ("life", 6, 5, 6, 1, "eager", ["partitions_added"], 0, 0),
            ("life", 7, 6, 7, 1, "eager", ["group_emptied", "member_left"], 0, 0),
            ("mixed", 1, None, 1, 1, "eager", ["member_joined"], 0, 0),
            ("mixed", 2, 1, 2, 1, "eager", ["member_left_cleanly"], 1, 1),
            ("disjoint", 1, None, 1, 1, "eager", ["member_joined"], 0, 0),
            ("disjoint", 2, 1, 2, 1, "eager", ["member_left_cleanly"], 2, 2),
        ],
        "group_id string, generation int, previous_generation int, first_round_generation int, round_count int,"
        " rebalance_protocol string, causes array<string>, moved_partition_count int, minimal_moves int",
    )
    actual = rows.where(~F.col("group_id").isin(*CRASH)).select(*expected.columns)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_failed_rounds_static_replacements_departures_and_pause(rebalanced):
    rows, _ = rebalanced
    life = {row.generation: row for row in rows.where(F.col("group_id") == "life").collect()}
    assert life[5].failed_round_count == 2  # generations 3 and 4 never completed
    assert [(r.group_instance_id, r.previous_member_id, r.member_id) for r in life[5].static_replacements] == [
        ("i1", "C1a", "C1b")
    ]
    (departed,) = life[2].members_left
    assert (departed.member_id, departed.how, departed.silent_ms) == ("C2", "clean", 100)
    assert (life[2].estimated_pause_ms, life[2].pause_estimate_method) == (1100, "commit_gap")
    # Nothing committed before generation 1's join: no gap can start, now or later.
    assert (life[1].estimated_pause_ms, life[1].pause_estimate_method) == (None, "no_commit_in_generation")
    # Generation 2's commits come before generation 5's join, none after it: the pause waits for one.
    assert (life[5].estimated_pause_ms, life[5].pause_estimate_method) == (None, None)
    assert [(d.member_id, d.how) for d in life[7].members_left] == [("C1b", "unknown")]
    assert (life[7].skew, life[7].skew_by_topic) == (None, None)
    mixed = rows.where(F.col("group_id").isin("mixed", "disjoint") & (F.col("generation") == 2))
    mixed = mixed.select("group_id", "minimal_moves_method")
    assert sorted(mixed.collect()) == [("disjoint", "exact"), ("mixed", "lower_bound")]


def test_movements_name_both_owners_and_count_a_cooperative_handover_once(spark, rebalanced):
    _, movements = rebalanced
    expected = spark.createDataFrame(
        [
            ("coop", 3, 1, "orders", p, "C1", "client-C1", "C2", "client-C2", False) for p in (0, 1, 2)
        ] + [("life", 2, 1, "orders", 1, "C2", "client-C2", "C1a", "client-C1a", True)],
        "group_id string, generation int, previous_generation int, topic string, partition int,"
        " from_member_id string, from_client_id string, to_member_id string, to_client_id string, is_forced boolean",
    )  # fmt: skip
    actual = movements.where(F.col("group_id").isin("coop", "life")).select(*expected.columns)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_rebalance_frequency_flags_storm_hours_and_days(spark, rebalanced):
    rows, _ = rebalanced
    counts = frequency.rebalance_frequency(rows.where(F.col("group_id").isin("life", "coop")), 3)
    expected = spark.createDataFrame(
        [
            ("coop", "hour", at(0), 2, 3, 0, False),
            ("coop", "day", at(-12 * 3600), 2, 3, 0, False),
            ("life", "hour", at(0), 5, 1, 1, True),
            ("life", "day", at(-12 * 3600), 5, 1, 1, True),
        ],
        "group_id string, period string, period_start timestamp, rebalance_count int, moved_partition_count int,"
        " storm_hour_count int, is_storm boolean",
    )
    assert_df_equality(counts.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)


def test_commit_times_around_probes_give_the_lookups_every_commit_gives(spark):
    from transforms.gold.departures import commit_times_around
    from transforms.gold.timeline import earliest_after, latest_at_or_before

    seconds = [5, 20, 40, 55, 90, 130, 135, 140, 170, 190, 230]  # minute 0: four; minute 2: four, never probed
    all_commits = commits(spark, [commit(i, s, "g", "t", 0, i) for i, s in enumerate(seconds)]).select(
        "cluster", "group_id", "record_at"
    )
    probes = spark.createDataFrame(
        [("c1", "g", at(30), at(30)), ("c1", "g", at(100), at(180)), ("c1", "g", at(20), at(235))],
        "cluster string, group_id string, join_completed_at timestamp, recorded_at timestamp",
    )
    keys = ("cluster", "group_id")
    candidates = commit_times_around(all_commits, probes, keys, ["join_completed_at", "recorded_at"])

    def lookups(times):
        before = latest_at_or_before(probes, times, keys, "join_completed_at", "record_at", "before")
        return earliest_after(before, times, keys, "recorded_at", "record_at", "after").select(
            "join_completed_at", "recorded_at", "before.record_at", F.col("after.record_at").alias("after_at")
        )

    assert_df_equality(lookups(candidates), lookups(all_commits), ignore_row_order=True)
    kept = sorted(candidates.select((F.unix_seconds("record_at") - F.unix_seconds(F.lit(at(0)))).alias("s")).collect())
    # Minute 0 holds probe times: every commit. Minute 2 does not: its first and last only.
    assert [row.s for row in kept] == [5, 20, 40, 55, 90, 130, 170, 190, 230]


def test_rebalances_read_from_the_commit_times_they_can_read_equal_those_read_from_every_commit(spark):
    framed, changes, assignments = framed_history(spark)
    # Every 3 s for 7 minutes on partitions that leavers owned (life, the crashes) and of an eager group
    # with pauses (life): most minutes hold no probe, so only their first and last commit are kept.
    dense = [
        commit(1000 + index, seconds, group, topic, partition, index)
        for index, (seconds, group, topic, partition) in enumerate(
            (seconds, *place)
            for seconds in range(0, 420, 3)
            for place in (("life", "orders", 0), ("life", "orders", 1), ("range", "orders", 5), ("range", "stock", 4))
        )
    ]
    counted = offsets.filter_uncounted_commits(commits(spark, COMMITS + dense)).localCheckpoint()
    found = departures.commit_times_read_by(framed, assignments, counted)
    # Object aggregation (a list per key) sorts past 128 keys a task: at size most of history's time.
    assert "ObjectHashAggregate" not in found._jdf.queryExecution().executedPlan().toString()
    times = found.localCheckpoint()

    assert times.count() < counted.count() / 2
    from_times = rebalance_rows(spark, framed, changes, assignments, times)
    from_every_commit = rebalance_rows(spark, framed, changes, assignments, counted)
    assert from_every_commit.where(F.col("estimated_pause_ms").isNotNull()).count() > 0
    assert from_every_commit.where(F.size("members_left") > 0).count() > 0

    def comparable(rows):  # a map column cannot be sorted by
        return rows.withColumn("skew_by_topic", map_text(F.col("skew_by_topic")))

    assert_df_equality(comparable(from_times), comparable(from_every_commit), ignore_row_order=True)


# B leaves at 400 s; its partition (orders 1) last committed at 130 s, A's (orders 0) every 3 s.
QUIET = [
    record("quiet", 30, 100, 1, [("A", None, ["orders"], orders(0)), ("B", None, ["orders"], orders(1))]),
    record("quiet", 31, 400.5, 2, [("A", None, ["orders"], orders(0, 1))], joined_at=400),
]
QUIET_COMMITS = [
    commit(2000, 130, "quiet", "orders", 1, 40),
    *[commit(2001 + index, seconds, "quiet", "orders", 0, index) for index, seconds in enumerate(range(100, 421, 3))],
]


def test_commit_times_read_from_narrowed_floors_equal_those_read_from_every_commit(spark):
    from jobs.history_commits import commit_times_read_by

    framed, _, assignments = framed_history(spark, HISTORY + QUIET)
    # What a night computes: life's later rebalances (its floor, generation 2 at 25 s, lies minutes back)
    # and quiet's one.
    later = framed.where(F.col("group_id").isin("life", "quiet") & (F.col("join_completed_at") >= at(150)))
    changes = assignment_math.partition_changes(later, assignments).localCheckpoint()
    dense = [
        commit(1000 + index, seconds, "life", "orders", partition, index)
        for index, (seconds, partition) in enumerate((s, p) for s in range(0, 420, 3) for p in (0, 1))
    ]
    counted = offsets.filter_uncounted_commits(commits(spark, COMMITS + dense + QUIET_COMMITS)).localCheckpoint()
    no_share_members = spark.createDataFrame(
        [], "cluster string, group_id string, member_id string, record_at timestamp"
    )
    heard = []

    times = commit_times_read_by(later, assignments, no_share_members, counted, heard.append, margin_ms=0)

    since_start = F.min(F.unix_seconds("record_at")) - F.unix_seconds(F.lit(at(0)))
    earliest = {row.group_id: row.first for row in times.groupBy("group_id").agg(since_start.alias("first")).collect()}
    assert earliest["life"] >= 180  # narrowed to the minute of its first lookup (200 s), and enough
    assert earliest["quiet"] <= 130  # B's last commit lies before the narrowed floor: read again
    assert [line for line in heard if "read again" in line] == [
        "1 group(s) with a lookup before the narrowed floor: their commits read again from the floor"
    ]
    from_times = rebalance_rows(spark, later, changes, assignments, times)
    from_every_commit = rebalance_rows(spark, later, changes, assignments, counted)
    quiet = from_every_commit.where(F.col("group_id") == "quiet").select(F.col("members_left")[0].alias("b")).first().b
    assert (quiet.member_id, quiet.silent_ms) == ("B", 270_000)  # last seen at its commit at 130 s
    assert_df_equality(
        from_times.withColumn("skew_by_topic", map_text(F.col("skew_by_topic"))),
        from_every_commit.withColumn("skew_by_topic", map_text(F.col("skew_by_topic"))),
        ignore_row_order=True,
    )


def test_a_span_in_which_a_group_has_no_commit_is_not_read_and_the_times_are_those_of_every_commit(spark):
    from jobs.history_commits import commit_times_read_by

    framed, _, assignments = framed_history(spark)
    later = framed.where((F.col("group_id") == "life") & (F.col("join_completed_at") >= at(150)))
    life = [commit(1000 + index, seconds, "life", "orders", 0, index) for index, seconds in enumerate(range(0, 421, 3))]
    # Another group of the same __consumer_offsets partition commits while life is silent (430-990 s).
    others = [
        commit(3000 + index, seconds, "other", "orders", 0, index) for index, seconds in enumerate(range(0, 1200, 5))
    ]
    counted = offsets.filter_uncounted_commits(commits(spark, COMMITS + life + others)).localCheckpoint()
    no_share_members = spark.createDataFrame(
        [], "cluster string, group_id string, member_id string, record_at timestamp"
    )
    silent = spark.createDataFrame(
        [("c1", "life", at(430), at(990))],
        "cluster string, group_id string, silent_after timestamp, silent_until timestamp",
    )
    heard, heard_without = [], []

    times = commit_times_read_by(later, assignments, no_share_members, counted, heard.append, 0, silent)
    without = commit_times_read_by(later, assignments, no_share_members, counted, heard_without.append, 0)

    assert heard == ["commits read for the rebalances computed: 1 partition from "
                     f"{at(180):%Y-%m-%d %H:%M:%S} to {at(430):%Y-%m-%d %H:%M:%S} "
                     f"and from {at(990):%Y-%m-%d %H:%M:%S} on"]  # fmt: skip
    assert heard_without == [
        f"commits read for the rebalances computed: 1 partition from {at(180):%Y-%m-%d %H:%M:%S} on"
    ]
    assert_df_equality(times, without, ignore_row_order=True)
