"""Silver transforms on tiny DataFrames: every raw record lands in exactly one table, typed."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from bench.encoding import i16, i32, i64, string, uvarint
from schemas import bronze
from schemas import silver as silver_tables
from transforms import silver
from transforms.schema_check import SchemaMismatch, check_declared_types

h = bytes.fromhex
OFFSET_KEY = h("000100086d792d67726f757000066f726465727300000003")
OFFSET_V3 = h("0003000000000000002a0000000500000000018bcfe56800")
OFFSET_V1 = h("0001000000000000002a00000000018bcfe568000000018bd50bc400")
GROUP_KEY = h("000200086d792d67726f7570")
GROUP_V3 = h(
    "00030008636f6e73756d657200000001000572616e6765000f636f6e73756d65722d312d306633630000018bcfe5680000"
    "000001000f636f6e73756d65722d312d30663363ffff000a636f6e73756d65722d31000a2f3132372e302e302e31000493e0"
    "0000afc80000001c00030000000100066f7264657273ffffffff00000000ffffffffffff0000002200030000000100066f"
    "726465727300000003000000000000000100000002ffffffff"
)
CURRENT_ASSIGNMENT_KEY = h("00080002636700026d31")
CURRENT_ASSIGNMENT_V0 = h("00000000000500000004000230a5f1d5f224432d89f635c784af26d7030000000000000001000100")
# __share_group_state: a real ShareUpdate (Kafka 4.2.1 lab capture, __share_group_state-17 offset 3): one
# batch, offset 1 archived after 3 deliveries, deliveryCompleteCount 3 (KIP-1226 tag).
SHARE_UPDATE_KEY = h("0001000973686172652d6c6162a50cfae2343344f2b18d814350f3bdbe00000000")
SHARE_UPDATE_V0 = h("00000000000000000000000000000000000102000000000000000100000000000000010400030001000400000003")
SHARE_TOPIC_ID = base64.urlsafe_b64encode(SHARE_UPDATE_KEY[13:29]).decode().rstrip("=")  # Kafka's Uuid form
# A ShareUpdate whose bytes also read exactly as an offset commit (key type 1; a topic id starting 0x000e
# reads as a 14-byte topic name; an empty update reads as an OffsetCommitValue v0 with empty metadata):
# only the topic it came from tells them apart.
AMBIGUOUS_UUID = b"\x00\x0eabcdefghijklmn"
AMBIGUOUS_SHARE_KEY = i16(1) + string("g") + AMBIGUOUS_UUID + i32(2)
AMBIGUOUS_SHARE_V0 = i16(0) + i32(0) + i32(5) + i64(9) + uvarint(1) + uvarint(0)
SHARE_STATE = "__share_group_state"
AT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
COMMITTED_AT = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


def raw_row(offset, key, value, *, read_error=None, txn_state=None, producer_id=-1, topic="__consumer_offsets"):
    return (
        "c1",
        f"c1/12/{offset}" if topic == "__consumer_offsets" else f"c1/{topic}/12/{offset}",
        12,
        offset,
        AT,
        "create_time",
        key,
        value,
        producer_id,
        -1,
        txn_state is not None,
        txn_state,
        offset,
        0,
        "segment",
        f"/logs/{topic}-12/0.log",
        read_error,
        "run-1",
        topic,
    )


@pytest.fixture(scope="module")
def raw(spark):
    rows = [
        raw_row(0, OFFSET_KEY, OFFSET_V3),
        raw_row(1, OFFSET_KEY, None),
        raw_row(2, OFFSET_KEY, OFFSET_V1, txn_state="aborted", producer_id=4000),
        raw_row(3, GROUP_KEY, GROUP_V3),
        raw_row(4, GROUP_KEY, None),
        raw_row(5, CURRENT_ASSIGNMENT_KEY, CURRENT_ASSIGNMENT_V0),
        raw_row(6, i16(42) + string("g"), i16(0)),
        raw_row(7, OFFSET_KEY, i16(3) + i64(1)),
        raw_row(8, None, b"\x00\x01", read_error="batch at position 0: CRC-32C mismatch"),
        raw_row(3, SHARE_UPDATE_KEY, SHARE_UPDATE_V0, topic=SHARE_STATE),
        raw_row(4, AMBIGUOUS_SHARE_KEY, AMBIGUOUS_SHARE_V0, topic=SHARE_STATE),
        raw_row(5, SHARE_UPDATE_KEY, None, topic=SHARE_STATE),
    ]
    return spark.createDataFrame(rows, bronze.raw_records_schema)


@pytest.fixture(scope="module")
def decoded(raw):
    return silver.decode_raw_records(raw).cache()


def test_offset_commits_keep_versions_tombstones_and_txn_state(spark, decoded):
    expected = spark.createDataFrame(
        [
            (
                "c1",
                "c1/12/0",
                12,
                0,
                AT,
                "my-group",
                "orders",
                3,
                False,
                42,
                5,
                "",
                COMMITTED_AT,
                None,
                None,
                1,
                3,
                -1,
                None,
            ),
            (
                "c1",
                "c1/12/1",
                12,
                1,
                AT,
                "my-group",
                "orders",
                3,
                True,
                None,
                None,
                None,
                None,
                None,
                None,
                1,
                None,
                -1,
                None,
            ),
            (
                "c1",
                "c1/12/2",
                12,
                2,
                AT,
                "my-group",
                "orders",
                3,
                False,
                42,
                None,
                "",
                COMMITTED_AT,
                datetime(2023, 11, 15, 22, 13, 20, tzinfo=UTC),
                None,
                1,
                1,
                4000,
                "aborted",
            ),
        ],
        silver_tables.offset_commits_schema,
    )
    assert_df_equality(silver.filter_offset_commits(decoded), expected, ignore_row_order=True, ignore_nullable=True)


def test_group_metadata_members_and_assignments(spark, decoded):
    groups = silver.filter_group_metadata(decoded)
    assert sorted((row.record_id, row.is_tombstone, row.generation, row.member_count) for row in groups.collect()) == [
        ("c1/12/3", False, 1, 1),
        ("c1/12/4", True, None, None),
    ]
    members = silver.explode_group_members(decoded)
    member = members.collect()
    assert len(member) == 1
    assert (member[0].member_id, member[0].subscribed_topics, member[0].session_timeout_ms) == (
        "consumer-1-0f3c",
        ["orders"],
        45000,
    )
    expected = spark.createDataFrame(
        [
            ("c1", "c1/12/3", 12, 3, AT, "my-group", 1, "consumer-1-0f3c", "orders", partition)
            for partition in (0, 1, 2)
        ],
        silver_tables.member_assignments_schema,
    )
    assert_df_equality(
        silver.explode_member_assignments(members), expected, ignore_row_order=True, ignore_nullable=True
    )


def test_kip848_record_is_typed(decoded):
    (row,) = silver.filter_consumer_group_records(decoded).collect()
    assert (row.record_type_name, row.group_id, row.member_id, row.member_epoch, row.member_state) == (
        "consumer_group_current_member_assignment",
        "cg",
        "m1",
        5,
        0,
    )
    assert [(item.topic_id, item.partitions) for item in row.assigned_partitions] == [
        ("MKXx1fIkQy2J9jXHhK8m1w", [0, 1])
    ]


def test_undecodable_records_are_quarantined_with_reason_and_bytes(raw, decoded):
    rows = {row.record_id: row for row in silver.filter_quarantine(decoded).collect()}
    assert set(rows) == {"c1/12/6", "c1/12/7", "c1/12/8"}
    assert (rows["c1/12/6"].stage, rows["c1/12/6"].record_type) == ("key", 42)
    assert "unknown record type 42" in rows["c1/12/6"].reason
    assert rows["c1/12/7"].stage == "value" and bytes(rows["c1/12/7"].value) == i16(3) + i64(1)
    assert rows["c1/12/8"].stage == "read" and "CRC-32C" in rows["c1/12/8"].reason
    assert rows["c1/12/8"].source_file.endswith("0.log")
    assert {row.capture_run_id for row in rows.values()} == {"run-1"}


def test_the_two_decoding_passes_split_the_records_between_them(raw, decoded):
    common = silver.decode_common_offset_commits(raw).collect()
    others = silver.decode_other_records(raw).collect()
    assert {row.record_id for row in common} == {"c1/12/0", "c1/12/1", "c1/12/2"}
    assert sorted(map(repr, common + others)) == sorted(map(repr, decoded.collect()))


def test_every_raw_record_lands_in_exactly_one_place(raw, decoded):
    destinations = [
        silver.filter_offset_commits(decoded),
        silver.filter_group_metadata(decoded),
        silver.filter_consumer_group_records(decoded),
        silver.filter_share_group_state(decoded),
        silver.filter_quarantine(decoded),
    ]
    landed = [row.record_id for frame in destinations for row in frame.select("record_id").collect()]
    assert sorted(landed) == sorted(row.record_id for row in raw.select("record_id").collect())


def test_share_state_records_are_typed_by_their_topic_never_as_offset_commits(spark, raw, decoded):
    the_offsets_ones = decoded.where(F.col("destination") == "offset_commit").select("record_id").collect()
    assert {row.record_id for row in the_offsets_ones} == {"c1/12/0", "c1/12/1", "c1/12/2"}
    # The ambiguous bytes are an offset commit as __consumer_offsets' bytes, which is why the topic decides.
    as_offsets = raw.where(F.col("source_offset") == 4).withColumn("source_topic", F.lit("__consumer_offsets"))
    assert silver.decode_common_offset_commits(as_offsets).count() == 1
    batch = (1, 1, 4, 3)  # first_offset, last_offset, delivery_state (archived), delivery_count
    expected = spark.createDataFrame(
        [
            ("c1", f"c1/{SHARE_STATE}/12/3", 12, 3, AT, "share-lab", SHARE_TOPIC_ID, 0, 1, "share_update", False,
             0, 0, None, 0, 1, 3, None, None, [batch]),
            ("c1", f"c1/{SHARE_STATE}/12/4", 12, 4, AT, "g", base64.urlsafe_b64encode(AMBIGUOUS_UUID).decode()[:22],
             2, 1, "share_update", False, 0, 0, None, 5, 9, -1, None, None, []),
            ("c1", f"c1/{SHARE_STATE}/12/5", 12, 5, AT, "share-lab", SHARE_TOPIC_ID, 0, 1, "share_update", True,
             None, None, None, None, None, None, None, None, None),
        ],
        silver_tables.share_group_state_schema,
    )  # fmt: skip
    actual = silver.filter_share_group_state(decoded)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_decoder_output_matches_its_declared_schema(decoded):
    assert decoded.schema == silver.decoded_schema


# Each silver table and the transform that makes it from decoded rows.
SILVER_TRANSFORMS = {
    "offset_commits": (silver.filter_offset_commits, silver_tables.offset_commits_schema),
    "group_metadata": (silver.filter_group_metadata, silver_tables.group_metadata_schema),
    "group_members": (silver.explode_group_members, silver_tables.group_members_schema),
    "member_assignments": (
        lambda decoded: silver.explode_member_assignments(silver.explode_group_members(decoded)),
        silver_tables.member_assignments_schema,
    ),
    "consumer_group_records": (silver.filter_consumer_group_records, silver_tables.consumer_group_records_schema),
    "share_group_state": (silver.filter_share_group_state, silver_tables.share_group_state_schema),
    "quarantine": (silver.filter_quarantine, silver_tables.quarantine_schema),
}


def column_types(schema: StructType) -> list[tuple[str, str]]:
    return [(field.name, field.dataType.simpleString()) for field in schema.fields]


@pytest.mark.parametrize("table", SILVER_TRANSFORMS)
def test_each_silver_transform_gives_its_tables_declared_columns_and_types(spark, table):
    transform, declared = SILVER_TRANSFORMS[table]
    rows = transform(spark.createDataFrame([], silver.decoded_schema))
    assert column_types(rows.schema) == column_types(declared)


def test_a_decoded_column_of_another_type_fails_instead_of_being_cast(spark):
    """A long decoded as an int (say) must not be narrowed quietly on its way to its table."""
    narrowed = StructType(
        [
            StructField(field.name, IntegerType()) if field.name == "committed_offset" else field
            for field in silver.decoded_schema.fields
        ]
    )
    with pytest.raises(SchemaMismatch, match=r"^offset_commits\.committed_offset: declared bigint, found int$"):
        silver.filter_offset_commits(spark.createDataFrame([], narrowed))


def test_the_check_names_missing_or_reordered_columns(spark):
    rows = spark.createDataFrame([], "b string, a long")
    declared = StructType([StructField("a", LongType()), StructField("b", StringType())])
    with pytest.raises(SchemaMismatch, match=r"^t: declared columns \['a', 'b'\], found \['b', 'a'\]$"):
        check_declared_types(rows, declared, "t")
    assert check_declared_types(rows.select("a", "b"), declared, "t").columns == ["a", "b"]
