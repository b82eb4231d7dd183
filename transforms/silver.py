"""DataFrame transforms from bronze `raw_records` to the silver tables.

Nearly every record is a common offset commit, decoded inside the JVM by the fast path
(`decode_common_offset_commits`: jvm/decoder's `groupscope.CommonOffsetCommits`, a Spark function that
jobs.session registers when it builds the session); every other record goes to the reference decoder
(`decode_other_records`: transforms.decoder.decode_rows, Python over Arrow batches), which stays the
definition: tests require both to give the same rows on real and on damaged records. Every other step
is Spark built-ins. Each record lands in exactly one silver table or in `quarantine`, chosen by the
decoded row's `destination`; each table's rows are checked against its declared schema, not cast to it.

A record is common when every check of the reference decoder passes trivially (the Java class lists
the rules): a readable type-1 key whose lengths add up exactly, and a null value (tombstone) or a value
of version 0-4 whose lengths add up exactly, with valid UTF-8 strings; for v4, a metadata length that
fits one varint byte and no tagged fields. Their layouts are fixed (kafka-record-formats.md 3.1-3.2).
A record of a transaction still pending is not common: the decode job writes the others' commits in a
file apart, which the marker resolving it rewrites on a later night.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from schemas import silver as silver_tables
from schemas.coordinator_records import CONSUMER_OFFSETS_TOPIC, RECORD_TYPE_OFFSET_COMMIT, RECORD_TYPES
from transforms.decoder.decode_rows import (
    DESTINATION_CONSUMER_GROUP_RECORD,
    DESTINATION_GROUP_METADATA,
    DESTINATION_OFFSET_COMMIT,
    DESTINATION_QUARANTINE,
    DESTINATION_SHARE_GROUP_STATE,
    decode_raw_row,
)
from transforms.decoder.log_transactions import TXN_PENDING
from transforms.schema_check import check_declared_types

_RAW_INPUT_COLUMNS = (
    "cluster",
    "record_id",
    "source_partition",
    "source_offset",
    "record_at_ms",
    "key",
    "value",
    "txn_state",
    "producer_id",
    "read_error",
    "source_file",
    "capture_run_id",
    "source_topic",
)


def _f(name, data_type):
    return StructField(name, data_type, True)


# A member row's context: taken from its group record, not from the member's own struct.
_MEMBER_CONTEXT = (
    "cluster", "record_id", "source_partition", "source_offset", "record_at", "group_id", "generation",
    "protocol_type", "protocol",
)  # fmt: skip
_MEMBER = StructType(
    [
        _f(field.name, field.dataType)
        for field in silver_tables.group_members_schema.fields
        if field.name not in _MEMBER_CONTEXT
    ]
)
_TIMESTAMP_COLUMNS = {
    "committed_at", "expires_at", "state_changed_at", "assignment_at", "state_created_at", "state_written_at",
}  # fmt: skip
# Raw columns a decoded offset commit keeps as they are (the reference decoder does the same).
_PASSED_THROUGH = {
    "cluster": "cluster", "record_id": "record_id", "source_partition": "source_partition",
    "source_offset": "source_offset", "record_at": "record_at_ms", "txn_state": "txn_state",
    "producer_id": "producer_id",
}  # fmt: skip


def _decoded_columns() -> list[StructField]:
    """The decoder's row: origin, routing, and the union of every silver table's own columns.

    Timestamps travel as epoch milliseconds (`<name>_ms`) and become TIMESTAMPs in Spark.
    """
    columns = {
        "cluster": StringType(),
        "record_id": StringType(),
        "source_partition": IntegerType(),
        "source_offset": LongType(),
        "record_at": LongType(),
        "destination": StringType(),
        "stage": StringType(),
        "reason": StringType(),
        "key": BinaryType(),
        "value": BinaryType(),
        "record_type_name": StringType(),
        "members": ArrayType(_MEMBER),
        "source_file": StringType(),  # quarantined rows keep where they came from
        "capture_run_id": StringType(),
    }
    for schema in (
        silver_tables.offset_commits_schema,
        silver_tables.group_metadata_schema,
        silver_tables.consumer_group_records_schema,
        silver_tables.share_group_state_schema,
    ):
        for field in schema.fields:
            if field.name in _TIMESTAMP_COLUMNS:
                columns.setdefault(f"{field.name}_ms", LongType())
            elif field.name != "record_at":
                columns.setdefault(field.name, field.dataType)
    return [_f(name, data_type) for name, data_type in columns.items()]


decoded_schema = StructType(_decoded_columns())


# What the fast path returns for a common offset commit, in this order (null for any other record).
COMMON_OFFSET_COMMIT_COLUMNS = (
    "is_tombstone", "group_id", "topic", "partition", "value_version", "committed_offset", "leader_epoch",
    "metadata", "committed_at_ms", "expires_at_ms", "topic_id",
)  # fmt: skip
# The same for every common record: added as Spark literals.
COMMON_OFFSET_COMMIT_CONSTANTS = {
    "destination": DESTINATION_OFFSET_COMMIT,
    "record_type": RECORD_TYPE_OFFSET_COMMIT,
    "record_type_name": RECORD_TYPES[RECORD_TYPE_OFFSET_COMMIT].name,
}
# The fast path's Spark function: registered by jobs.session.build_session, called here by name.
FAST_PATH_FUNCTION = "groupscope_common_offset_commit"
FAST_PATH_TYPE = StructType([decoded_schema[name] for name in COMMON_OFFSET_COMMIT_COLUMNS])


def _common_offset_commit() -> Column:
    """The fast path over a raw row's key, value and read error: the decoded fields, or null. Only for
    `__consumer_offsets` (a null topic: raw rows of earlier versions): a `__share_group_state` key also
    starts with type 1, and its bytes must never be read as an offset commit. Not for a record of a
    pending transaction: it goes with the few others, which the decode job writes in files of their own,
    because the marker that resolves it (a later night's) rewrites the file holding it (2 pending commits
    in a night's 1.2M-row file: about 4 s more a night than in a small one)."""
    is_consumer_offsets = F.coalesce(F.col("source_topic") == F.lit(CONSUMER_OFFSETS_TOPIC), F.lit(True))
    is_settled = F.coalesce(F.col("txn_state") != F.lit(TXN_PENDING), F.lit(True))
    return F.when(
        is_consumer_offsets & is_settled,
        F.call_function(FAST_PATH_FUNCTION, F.col("key"), F.col("value"), F.col("read_error")),
    )


def _decode_other_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each batch of raw rows (none a common offset commit) -> decoded rows, by the reference decoder."""
    schema = to_arrow_schema(decoded_schema)
    for batch in batches:
        rows = []
        for raw in batch.to_pylist():
            raw["record_at"] = raw.pop("record_at_ms")
            rows.append(decode_raw_row(raw))
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


def _with_fast_path(raw_records: DataFrame) -> DataFrame:
    """The columns the decoders read, record_at as epoch ms, and `_common`: the fast path's result."""
    return raw_records.select(
        *[F.col(name) for name in _RAW_INPUT_COLUMNS if name != "record_at_ms"],
        F.unix_millis("record_at").alias("record_at_ms"),
        _common_offset_commit().alias("_common"),
    )


def decode_common_offset_commits(raw_records: DataFrame) -> DataFrame:
    """The common offset commits of raw_records (nearly all records) -> decoded rows, by the fast path in the JVM."""
    common = _with_fast_path(raw_records).where(F.col("_common").isNotNull())
    return common.select(*[_common_commit_column(field) for field in decoded_schema.fields])


def decode_other_records(raw_records: DataFrame) -> DataFrame:
    """Every other raw record -> decoded rows, by the reference decoder: only these records cross to Python."""
    others = _with_fast_path(raw_records).where(F.col("_common").isNull()).drop("_common")
    return others.mapInArrow(_decode_other_batches, decoded_schema)


def decode_raw_records(raw_records: DataFrame) -> DataFrame:
    """raw_records -> one decoded row per raw row (see `decoded_schema`): both decoders' rows together.

    The decode job runs the two apart instead, to keep the few others' rows for their several tables.
    """
    return decode_common_offset_commits(raw_records).unionByName(decode_other_records(raw_records))


def _common_commit_column(field: StructField) -> Column:
    if field.name in _PASSED_THROUGH:
        return F.col(_PASSED_THROUGH[field.name]).alias(field.name)
    if field.name in COMMON_OFFSET_COMMIT_COLUMNS:
        return F.col(f"_common.{field.name}").alias(field.name)
    return F.lit(COMMON_OFFSET_COMMIT_CONSTANTS.get(field.name)).cast(field.dataType).alias(field.name)


def _declared_column(name: str) -> Column:
    """A decoded column as its table declares it: the one conversion meant is epoch ms -> TIMESTAMP."""
    if name in _TIMESTAMP_COLUMNS:
        return F.timestamp_millis(F.col(f"{name}_ms")).alias(name)
    if name == "record_at":
        return F.timestamp_millis("record_at").alias(name)
    return F.col(name)


def _select_as(decoded: DataFrame, schema: StructType, table: str) -> DataFrame:
    """The table's columns, in its order; a type other than the declared one raises (SchemaMismatch)."""
    return check_declared_types(decoded.select(*[_declared_column(name) for name in schema.names]), schema, table)


def _routed_to(destination: str) -> Column:
    return F.col("destination") == F.lit(destination)


def filter_offset_commits(decoded: DataFrame) -> DataFrame:
    return _select_as(
        decoded.where(_routed_to(DESTINATION_OFFSET_COMMIT)), silver_tables.offset_commits_schema, "offset_commits"
    )


def filter_group_metadata(decoded: DataFrame) -> DataFrame:
    return _select_as(
        decoded.where(_routed_to(DESTINATION_GROUP_METADATA)), silver_tables.group_metadata_schema, "group_metadata"
    )


def filter_consumer_group_records(decoded: DataFrame) -> DataFrame:
    return _select_as(
        decoded.where(_routed_to(DESTINATION_CONSUMER_GROUP_RECORD)),
        silver_tables.consumer_group_records_schema,
        "consumer_group_records",
    )


def filter_share_group_state(decoded: DataFrame) -> DataFrame:
    return _select_as(
        decoded.where(_routed_to(DESTINATION_SHARE_GROUP_STATE)),
        silver_tables.share_group_state_schema,
        "share_group_state",
    )


def filter_quarantine(decoded: DataFrame) -> DataFrame:
    """Quarantined rows, with their source file and capture run (carried by the decoder)."""
    return _select_as(decoded.where(_routed_to(DESTINATION_QUARANTINE)), silver_tables.quarantine_schema, "quarantine")


def explode_group_members(decoded: DataFrame) -> DataFrame:
    members = (
        decoded.where(_routed_to(DESTINATION_GROUP_METADATA) & ~F.col("is_tombstone"))
        .select(*_MEMBER_CONTEXT, F.explode("members").alias("member"))
        .select("*", "member.*")
        .drop("member")
    )
    return _select_as(members, silver_tables.group_members_schema, "group_members")


def explode_member_assignments(group_members: DataFrame) -> DataFrame:
    assignments = (
        group_members.select(
            "cluster",
            "record_id",
            "source_partition",
            "source_offset",
            "record_at",
            "group_id",
            "generation",
            "member_id",
            F.explode("assigned_partitions").alias("assigned"),
        )
        .select("*", F.col("assigned.topic").alias("topic"), F.explode("assigned.partitions").alias("partition"))
        .select(*[field.name for field in silver_tables.member_assignments_schema.fields])
    )
    return check_declared_types(assignments, silver_tables.member_assignments_schema, "member_assignments")
