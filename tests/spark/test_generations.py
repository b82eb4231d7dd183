"""Generations, assignments and topic-id resolution on tiny silver tables (classic and KIP-848 groups)."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from schemas import gold, ops, silver
from tests.gold_rows import (
    CLUSTER,
    at,
    commit,
    commits,
    frame,
    group_record,
    group_tables,
    members_text,
    origin,
    partitions_text,
)
from transforms.gold import epochs, generations


def classic(offset, seconds, generation, members=(), **extra):
    """A record of group "g": members are (member_id, group_instance_id, orders partitions)."""
    return group_record(
        "g", offset, seconds, generation, [(m, i, ["orders"], {"orders": p}) for m, i, p in members], **extra
    )


CLASSIC_HISTORY = [
    classic(0, 0, 0, protocol_type=""),  # the Java coordinator's "group created" record
    classic(1, 1, 1, [("m1", None, [0, 1])]),
    classic(2, 2, 2, [("m1", None, [0]), ("a-1", "inst-a", [1])]),
    classic(3, 3, 2, [("m1", None, [0]), ("a-2", "inst-a", [1])]),  # static replacement
    classic(4, 4, 5, [("a-2", "inst-a", [0, 1])]),  # generations 3 and 4 never completed
    classic(5, 5, 6),  # Empty
    classic(6, 6, None),  # deleted
    classic(7, 7, 1, [("m9", None, [0, 1])]),  # created again under the same name
    classic(8, 8, None),
    classic(9, 9, None),  # a repeated tombstone
]


@pytest.fixture(scope="module")
def classic_rows(spark):
    return generations.classic_generations(*group_tables(spark, CLASSIC_HISTORY)).localCheckpoint()


def test_classic_generations_show_gaps_empty_deletion_and_static_replacement(spark, classic_rows):
    replaced = [("inst-a", "a-1", "a-2", at(3))]
    expected = spark.createDataFrame(
        [
            ("g", 0, 0, "empty", None, None, 1, 0, "", []),
            ("g", 0, 1, "stable", 0, 0, 1, 1, "m1=orders:0,1", []),
            ("g", 0, 2, "stable", 1, 0, 2, 2, "m1=orders:0; a-1=orders:1", replaced),
            ("g", 0, 5, "stable", 2, 2, 1, 1, "a-2=orders:0,1", []),
            ("g", 0, 6, "empty", 5, 0, 1, 0, "", []),
            ("g", 0, None, "deleted", 6, None, 1, 0, "", []),
            ("g", 1, 1, "stable", None, None, 1, 1, "m9=orders:0,1", []),
            ("g", 1, None, "deleted", 1, None, 1, 0, "", []),
        ],
        "group_id string, incarnation int, generation int, state string, previous_generation int,"
        " skipped_generation_count int, record_count int, member_count int, members string,"
        " static_replacements array<struct<group_instance_id:string,previous_member_id:string,"
        "member_id:string,replaced_at:timestamp>>",
    )
    actual = classic_rows.select(
        *expected.columns[:-2], members_text(F.col("members")).alias("members"), expected.columns[-1]
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    assert classic_rows.schema.names == gold.generations_schema.names


def test_assignments_are_valid_until_the_next_generation_and_keyed_by_instance(spark, classic_rows):
    expected = spark.createDataFrame(
        [
            (0, 1, 0, "m1", "m1", at(1), at(2)),
            (0, 1, 1, "m1", "m1", at(1), at(2)),
            (0, 2, 0, "m1", "m1", at(2), at(4)),
            (0, 2, 1, "a-1", "inst-a", at(2), at(4)),
            (0, 5, 0, "a-2", "inst-a", at(4), at(5)),
            (0, 5, 1, "a-2", "inst-a", at(4), at(5)),
            (1, 1, 0, "m9", "m9", at(7), at(8)),
            (1, 1, 1, "m9", "m9", at(7), at(8)),
        ],
        "incarnation int, generation int, partition int, member_id string, member_key string,"
        " assigned_at timestamp, valid_until timestamp",
    )
    actual = generations.explode_generation_assignments(classic_rows).select(*expected.columns)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def cg(offset, seconds, record_type, member=None, tombstone=False, group="k", **extra):
    return {
        **origin(offset, seconds),
        "record_type": record_type,
        "record_type_name": f"type-{record_type}",
        "group_id": group,
        "member_id": member,
        "is_tombstone": tombstone,
        **extra,
    }


ORDERS, STOCK, AUDIT, GONE, PAY = "id-orders", "id-stock", "id-audit", "id-gone", "id-pay"
KIP848_HISTORY = [
    cg(0, 0, 4, topic_names=[(ORDERS, "orders", 2)]),
    cg(1, 0, 5, "A", subscribed_topic_names=["orders", "stock"], client_id="ca"),
    cg(2, 0, 3, group_epoch=1),
    cg(3, 0, 7, "A", assigned_partitions=[(ORDERS, [0, 1]), (STOCK, [0])]),
    cg(4, 0, 6, assignment_epoch=1),
    cg(5, 0, 8, "A", member_epoch=1, member_state=0, assigned_partitions=[(ORDERS, [0, 1]), (STOCK, [0])]),
    cg(6, 1, 5, "B", instance_id="ib", subscribed_topic_names=["orders", "stock"]),
    cg(7, 1, 3, group_epoch=2),
    cg(8, 1, 7, "B", assigned_partitions=[(ORDERS, [1])]),
    cg(9, 1, 7, "A", assigned_partitions=[(ORDERS, [0]), (STOCK, [0])]),
    cg(10, 1.5, 6, assignment_epoch=2),
    cg(11, 2, 8, "A", tombstone=True),
    cg(12, 2, 7, "A", tombstone=True),
    cg(13, 2, 5, "A", tombstone=True),
    cg(14, 2, 3, group_epoch=3),
    cg(15, 2, 7, "B", assigned_partitions=[(ORDERS, [0, 1]), (STOCK, [0]), (AUDIT, [0]), (GONE, [0])]),
    cg(16, 2, 6, assignment_epoch=3),
    cg(  # B holds epoch 3's assignment
        17,
        2.5,
        8,
        "B",
        member_epoch=3,
        member_state=0,
        assigned_partitions=[(ORDERS, [0, 1]), (STOCK, [0]), (AUDIT, [0]), (GONE, [0])],
    ),
    cg(18, 3, 3, tombstone=True),
    cg(19, 4, 5, "P", group="solo", subscribed_topic_names=["payments"], subscribed_topic_regex=""),
    cg(20, 4, 7, "P", group="solo", assigned_partitions=[(PAY, [0])]),
]


@pytest.fixture(scope="module")
def kip848(spark):
    records = frame(spark, silver.consumer_group_records_schema, KIP848_HISTORY)
    stock_commit = commits(spark, [commit(0, 0, "k", "stock", 0, 5, topic_id=STOCK)])
    topic_ids = spark.createDataFrame(
        [(CLUSTER, AUDIT, "audit", "user"), (CLUSTER, ORDERS, "orders-renamed", "user")], ops.topic_ids_schema
    )
    names = epochs.topic_names(records, stock_commit, topic_ids).cache()
    return records, names


def test_topic_ids_resolve_from_the_most_trusted_source(spark, kip848):
    _, names = kip848
    expected = spark.createDataFrame(
        [
            (CLUSTER, ORDERS, "orders", "partition_metadata"),
            (CLUSTER, STOCK, "stock", "offset_commit"),
            (CLUSTER, AUDIT, "audit", "user"),
            (CLUSTER, PAY, "payments", "single_subscription"),
        ],
        "cluster string, topic_id string, topic string, topic_name_source string",
    )
    assert_df_equality(names, expected, ignore_row_order=True, ignore_nullable=True)


def test_kip848_epochs_own_their_current_assignments_beside_named_targets(spark, kip848):
    records, names = kip848
    rows = epochs.consumer_group_generations(records, names).where(F.col("group_id") == "k")
    everything = "orders:0,1 stock:0 audit:0 id-gone:0"
    by_topic_id = "audit:0 id-gone:0 orders:0,1 stock:0"  # owned partitions are listed in topic-id order
    expected = spark.createDataFrame(
        [
            (0, 1, "stable", None, at(0), at(0), at(0), "A=orders:0,1 stock:0", "A=orders:0,1 stock:0"),
            # never reconciled: A still owns orders:1, targeted to B, which owns nothing yet
            (0, 2, "stable", 1, at(1), at(1.5), None, "A=orders:0,1 stock:0; B=", "A=orders:0 stock:0; B=orders:1"),
            (0, 3, "stable", 2, at(2), at(2), at(2.5), f"B={by_topic_id}", f"B={everything}"),
            (0, None, "deleted", 3, None, at(3), None, "", ""),
        ],
        "incarnation int, generation int, state string, previous_generation int, join_completed_at timestamp,"
        " recorded_at timestamp, reconciled_at timestamp, members string, targets string",
    )
    targets = F.array_join(
        F.transform("members", lambda m: F.concat(m["member_id"], F.lit("="), partitions_text(m["target_partitions"]))),
        "; ",
    )
    actual = rows.select(
        *expected.columns[:-2], members_text(F.col("members")).alias("members"), targets.alias("targets")
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    assignments = generations.explode_generation_assignments(rows).where(F.col("generation") == 3)
    sources = {(row.topic, row.topic_id, row.topic_name_source, row.member_key) for row in assignments.collect()}
    assert sources == {
        ("orders", ORDERS, "partition_metadata", "ib"),
        ("stock", STOCK, "offset_commit", "ib"),
        ("audit", AUDIT, "user", "ib"),
        (GONE, GONE, "unresolved", "ib"),
    }
