"""DataFrame transforms from bronze `raw_records` to the silver tables.

`decode_raw_records` is the one Python function over rows (the binary decoder, run over Arrow
batches); every other step is Spark built-ins. Each record lands in exactly one silver table or in
`quarantine`, chosen by the decoded row's `destination`.
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
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from schemas import tables
from transforms.decode_rows import (
    DESTINATION_CONSUMER_GROUP_RECORD,
    DESTINATION_GROUP_METADATA,
    DESTINATION_OFFSET_COMMIT,
    DESTINATION_QUARANTINE,
    decode_raw_row,
)
from transforms.offset_commit_arrays import (
    COMMON_OFFSET_COMMIT_COLUMNS,
    COMMON_OFFSET_COMMIT_CONSTANTS,
    common_offset_commit_mask,
    decode_common_offset_commits,
)

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
)
# Which records a decoding pass returns: all of them, the offset commits that the batch decoder
# decodes (nearly all), or the others (the reference decoder's). The decode job runs the last two apart.
ALL_RECORDS, COMMON_OFFSET_COMMITS, OTHER_RECORDS = "all", "common offset commits", "other"


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
        for field in tables.group_members_schema.fields
        if field.name not in _MEMBER_CONTEXT
    ]
)
_TIMESTAMP_COLUMNS = {"committed_at", "expires_at", "state_changed_at", "assignment_at"}
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
        tables.offset_commits_schema,
        tables.group_metadata_schema,
        tables.consumer_group_records_schema,
    ):
        for field in schema.fields:
            if field.name in _TIMESTAMP_COLUMNS:
                columns.setdefault(f"{field.name}_ms", LongType())
            elif field.name != "record_at":
                columns.setdefault(field.name, field.dataType)
    return [_f(name, data_type) for name, data_type in columns.items()]


decoded_schema = StructType(_decoded_columns())


_COMMON_COMMIT_COLUMNS = {*_PASSED_THROUGH, *COMMON_OFFSET_COMMIT_COLUMNS}
# What the fast path returns: only the columns an offset commit fills; the rest are added in Spark as nulls.
_common_commits_schema = StructType([field for field in decoded_schema.fields if field.name in _COMMON_COMMIT_COLUMNS])


def _decode_common_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each batch of raw rows -> its common offset commits, decoded a whole batch at a time."""
    schema = to_arrow_schema(_common_commits_schema)
    for batch in batches:
        is_common, commits = decode_common_offset_commits(
            batch.column("key"), batch.column("value"), batch.column("read_error")
        )
        kept = batch.filter(pa.array(is_common))
        columns = {**{name: kept.column(raw) for name, raw in _PASSED_THROUGH.items()}, **commits}
        yield pa.RecordBatch.from_arrays([columns[name].cast(schema.field(name).type) for name in schema.names],
                                         schema=schema)  # fmt: skip


def _decode_other_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each batch of raw rows (none a common offset commit) -> decoded rows, by the reference decoder."""
    schema = to_arrow_schema(decoded_schema)
    for batch in batches:
        rows = []
        for raw in batch.to_pylist():
            raw["record_at"] = raw.pop("record_at_ms")
            rows.append(decode_raw_row(raw))
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


@F.arrow_udf(BooleanType())
def _is_common_offset_commit(key: pa.Array, value: pa.Array, read_error: pa.Array) -> pa.Array:
    return pa.array(common_offset_commit_mask(key, value, read_error))


def decode_raw_records(raw_records: DataFrame, records: str = ALL_RECORDS) -> DataFrame:
    """raw_records -> one decoded row per raw row (see `decoded_schema`), of `records` (ALL_RECORDS, ...).

    Common offset commits are decoded a batch at a time (transforms.offset_commit_arrays), every other
    record by the reference decoder, row by row; each over Arrow batches, each in its own pass.
    """
    if records == ALL_RECORDS:
        return decode_raw_records(raw_records, COMMON_OFFSET_COMMITS).unionByName(
            decode_raw_records(raw_records, OTHER_RECORDS)
        )
    raw_input = raw_records.select(
        *[F.col(name) for name in _RAW_INPUT_COLUMNS if name != "record_at_ms"],
        F.unix_millis("record_at").alias("record_at_ms"),
    )
    if records == OTHER_RECORDS:
        # Only key, value and read_error cross to Python to find the few others; then only they do, whole.
        others = raw_input.where(~_is_common_offset_commit("key", "value", "read_error"))
        return others.mapInArrow(_decode_other_batches, decoded_schema)
    # Only what a decoded commit keeps crosses to Python: the file path and run id are for quarantine.
    needed = [name for name in raw_input.columns if name in (*_PASSED_THROUGH.values(), "key", "value", "read_error")]
    common = raw_input.select(*needed).mapInArrow(_decode_common_batches, _common_commits_schema)
    return common.select(*[_common_commit_column(field) for field in decoded_schema.fields])


def _common_commit_column(field: StructField) -> Column:
    if field.name in _COMMON_COMMIT_COLUMNS:
        return F.col(field.name)
    return F.lit(COMMON_OFFSET_COMMIT_CONSTANTS.get(field.name)).cast(field.dataType).alias(field.name)


def _ms_to_timestamp(name: str) -> Column:
    return F.timestamp_millis(F.col(f"{name}_ms")).alias(name)


def _select_as(decoded: DataFrame, schema: StructType) -> DataFrame:
    columns = [
        _ms_to_timestamp(field.name)
        if field.name in _TIMESTAMP_COLUMNS
        else F.timestamp_millis("record_at").alias("record_at")
        if field.name == "record_at"
        else F.col(field.name).cast(field.dataType).alias(field.name)
        for field in schema.fields
    ]
    return decoded.select(*columns)


def _routed_to(destination: str) -> Column:
    return F.col("destination") == F.lit(destination)


def filter_offset_commits(decoded: DataFrame) -> DataFrame:
    return _select_as(decoded.where(_routed_to(DESTINATION_OFFSET_COMMIT)), tables.offset_commits_schema)


def filter_group_metadata(decoded: DataFrame) -> DataFrame:
    return _select_as(decoded.where(_routed_to(DESTINATION_GROUP_METADATA)), tables.group_metadata_schema)


def filter_consumer_group_records(decoded: DataFrame) -> DataFrame:
    return _select_as(
        decoded.where(_routed_to(DESTINATION_CONSUMER_GROUP_RECORD)), tables.consumer_group_records_schema
    )


def filter_quarantine(decoded: DataFrame) -> DataFrame:
    """Quarantined rows, with their source file and capture run (carried by the decoder)."""
    return _select_as(decoded.where(_routed_to(DESTINATION_QUARANTINE)), tables.quarantine_schema)


def explode_group_members(decoded: DataFrame) -> DataFrame:
    members = (
        decoded.where(_routed_to(DESTINATION_GROUP_METADATA) & ~F.col("is_tombstone"))
        .select(*_MEMBER_CONTEXT, F.explode("members").alias("member"))
        .select("*", "member.*")
        .drop("member")
    )
    return _select_as(members, tables.group_members_schema)


def explode_member_assignments(group_members: DataFrame) -> DataFrame:
    return (
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
        .select(*[field.name for field in tables.member_assignments_schema.fields])
    )
