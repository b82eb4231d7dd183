"""Share partitions shared by several members: owner changes are paired owner to owner.

A share group with more members than partitions gives a partition to several members at once (Kafka's
share assignor). Tiny hand-made assignments: p0 is held by A and B, then by A and C; p1 by A, then by
nobody (with B left too); p2 by nobody, then by C. One move (B -> C on p0), whatever the owners' order;
minimal moves are only bounded from below (the forced one: B left) when a partition is shared.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from transforms.gold import assignment_math

KEY = "cluster string, group_id string, incarnation int, generation int"
OWNER = "member_key string, member_id string, group_instance_id string, client_id string, client_host string"


def _assignments(spark, rows):
    return spark.createDataFrame(
        [
            ("c", "g", 0, generation, "t", partition, m, m, None, f"client-{m}", None)
            for generation, partition, m in rows
        ],
        f"{KEY}, topic string, partition int, {OWNER}",
    )


def _rebalance(spark, members):
    member = "struct<member_id: string, group_instance_id: string, subscribed_topics: array<string>>"
    return spark.createDataFrame(
        [("c", "g", 0, 2, 1, [(m, None, ["t"]) for m in members])],
        f"{KEY}, before_generation int, members array<{member}>",
    )


def test_a_shared_partition_counts_one_move_per_owner_that_changed(spark):
    assignments = _assignments(
        spark,
        [(1, 0, "A"), (1, 0, "B"), (1, 1, "A"), (2, 0, "A"), (2, 0, "C"), (2, 2, "C")],
    )
    changes = assignment_math.partition_changes(_rebalance(spark, ["A", "C"]), assignments)
    rows = {
        (r.partition, r.before_member_key, r.after_member_key, r.is_moved)
        for r in changes.select("partition", "before_member_key", "after_member_key", "is_moved").collect()
    }
    assert rows == {(0, "A", "A", False), (0, "B", "C", True), (1, "A", None, False), (2, None, "C", False)}
    counts = assignment_math.movement_counts(changes).first()
    assert (counts.moved_partition_count, counts.newly_assigned_partition_count) == (1, 1)
    assert counts.unassigned_partition_count == 1
    after_members = spark.createDataFrame(
        [("c", "g", 0, 2, m, ["t"]) for m in ("A", "C")], f"{KEY}, member_key string, subscribed_topics array<string>"
    )
    minimal = assignment_math.minimal_moves(changes, after_members).first()
    assert (minimal.minimal_moves, minimal.minimal_moves_method) == (1, "lower_bound")  # B left: a forced move


def test_owners_of_one_partition_pair_in_member_order(spark):
    """Two owners replaced by two others: two moves, the lower member keys paired together."""
    assignments = _assignments(spark, [(1, 0, "A"), (1, 0, "B"), (2, 0, "C"), (2, 0, "D")])
    changes = assignment_math.partition_changes(_rebalance(spark, ["C", "D"]), assignments)
    moves = changes.where(F.col("is_moved")).select("before_member_key", "after_member_key").collect()
    assert sorted(tuple(r) for r in moves) == [("A", "C"), ("B", "D")]
