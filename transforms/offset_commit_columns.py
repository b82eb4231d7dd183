"""Offset commits decoded by Spark's own expressions: the fast path of the silver decoder.

Nearly every record of `__consumer_offsets` is an offset commit (type 1), and its layouts are fixed
(kafka-record-formats.md 3.1-3.2): key `int16 1, string group, string topic, int32 partition`;
value v0/v2 `int64 offset, string metadata, int64 commit`, v1 the same plus `int64 expire`, v3
`int64 offset, int32 leader epoch, string metadata, int64 commit`, v4 as v3 with a compact string
and a tag section. Every field sits at a position computed from the two string lengths before it,
so Spark reads them with built-in expressions (substring, hex, conv) in the JVM, with no Python.

A record takes this path only when every check of the reference decoder would pass trivially
(IS_COMMON_OFFSET_COMMIT): a readable type-1 key whose lengths add up exactly, and a null value
(tombstone) or a value of a known version whose lengths add up exactly, with valid UTF-8 strings;
for v4, a metadata length that fits one varint byte and no tagged fields. Every other record goes
to the reference decoder (`transforms.decode_rows`), which stays the definition: tests check that
both give the same rows on real and on damaged records.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from transforms.decode_rows import DESTINATION_OFFSET_COMMIT, UNSET_TIMESTAMP

RECORD_TYPE_OFFSET_COMMIT = 1
RECORD_TYPE_NAME = "offset_commit"
_OFFSET_COMMIT_KEY_PREFIX = b"\x00\x01"
_KEY_FIXED_BYTES = 10  # int16 type, int16 group length, int16 topic length, int32 partition
_ONE_BYTE_VARINT_LIMIT = 0x80
IS_COMMON_OFFSET_COMMIT = "is_common_offset_commit"
# Helper columns, computed once each in their own projection: Spark would otherwise inline their
# expressions into every use (and the generated code grows too large to be compiled).
_GROUP_LENGTH, _TOPIC_LENGTH, _GROUP, _TOPIC = "_oc_group_length", "_oc_topic_length", "_oc_group", "_oc_topic"
_VERSION, _V4_LENGTH_BYTE, _METADATA_LENGTH = "_oc_version", "_oc_v4_length_byte", "_oc_metadata_length"
_METADATA_AT, _COMMIT_AT, _METADATA = "_oc_metadata_at", "_oc_commit_at", "_oc_metadata"


def _unsigned(column: Column, position: Column | int, width: int) -> Column:
    """The big-endian unsigned integer of `width` (at most 4) bytes at 1-based `position`."""
    return F.conv(F.hex(F.substring(column, F.lit(position), F.lit(width))), 16, 10).cast("long")


def _signed(column: Column, position: Column | int, width: int) -> Column:
    unsigned, sign_bit = _unsigned(column, position, width), 1 << (8 * width - 1)
    return F.when(unsigned >= sign_bit, unsigned - 2 * sign_bit).otherwise(unsigned)


def _int64(column: Column, position: Column | int) -> Column:
    """A big-endian int64: conv to a negative base reads the 16 hex digits as two's complement."""
    return F.conv(F.hex(F.substring(column, F.lit(position), F.lit(8))), 16, -10).cast("long")


def _text(column: Column, position: Column | int, length: Column) -> Column:
    """Bytes as a string without conversion (validated separately, as Kafka's reader would reject them)."""
    return F.substring(column, F.lit(position), length).cast("string")


def with_offset_commit_layout(raw: DataFrame) -> DataFrame:
    """raw (with `key`, `value`, `read_error`) + where each offset-commit field sits + IS_COMMON_OFFSET_COMMIT.

    Positions are 1-based (Spark's substring). Key: type at 1, group length at 3, group at 5, topic
    length after the group, topic, then the partition. Value: version at 1, offset at 3, then by
    version: v0/v1/v2 metadata length at 11 and metadata at 13; v3 leader epoch at 11, metadata
    length at 15, metadata at 17; v4 leader epoch at 11, one varint byte at 15 (length + 1), metadata
    at 16. The commit time follows the metadata; then v1's expire time, or v4's tag section.
    """
    key, value = F.col("key"), F.col("value")
    version, group_length = F.col(_VERSION), F.col(_GROUP_LENGTH)
    is_v0_v1_v2, is_v4 = version.isin(0, 1, 2), version == 4
    laid_out = (
        raw.withColumns(
            {
                _GROUP_LENGTH: _unsigned(key, 3, 2),
                _VERSION: _unsigned(value, 1, 2),
                _V4_LENGTH_BYTE: _unsigned(value, 15, 1),
            }
        )
        .withColumns(
            {
                _TOPIC_LENGTH: _unsigned(key, group_length + 5, 2),
                _GROUP: _text(key, 5, group_length),
                _METADATA_LENGTH: F.when(is_v0_v1_v2, _unsigned(value, 11, 2))
                .when(version == 3, _unsigned(value, 15, 2))
                .when(is_v4, F.col(_V4_LENGTH_BYTE) - 1),
                _METADATA_AT: F.when(is_v0_v1_v2, 13).when(version == 3, 17).otherwise(16),
            }
        )
        .withColumns(
            {
                _TOPIC: _text(key, group_length + 7, F.col(_TOPIC_LENGTH)),
                _COMMIT_AT: F.col(_METADATA_AT) + F.col(_METADATA_LENGTH),
                _METADATA: _text(value, F.col(_METADATA_AT), F.col(_METADATA_LENGTH)),
            }
        )
    )
    return laid_out.withColumn(IS_COMMON_OFFSET_COMMIT, _is_common(key, value))


def _is_common(key: Column, value: Column) -> Column:
    """True for the records this path decodes exactly as the reference decoder does (never null)."""
    group_length, topic_length = F.col(_GROUP_LENGTH), F.col(_TOPIC_LENGTH)
    version, metadata_length, commit_at = F.col(_VERSION), F.col(_METADATA_LENGTH), F.col(_COMMIT_AT)
    key_is_readable = (
        (F.substring(key, 1, 2) == F.lit(_OFFSET_COMMIT_KEY_PREFIX))
        & (F.octet_length(key) >= _KEY_FIXED_BYTES)
        & (group_length < 0x8000)  # a negative int16 length is an error
        & (topic_length < 0x8000)
        & (F.octet_length(key) == group_length + topic_length + _KEY_FIXED_BYTES)
        & F.is_valid_utf8(F.col(_GROUP))
        & F.is_valid_utf8(F.col(_TOPIC))
    )
    trailer = F.when(version == 1, 16).when(version == 4, 9).otherwise(8)  # v1: expire time; v4: tag section
    is_v4_simple = (F.col(_V4_LENGTH_BYTE) < _ONE_BYTE_VARINT_LIMIT) & (_unsigned(value, commit_at + 8, 1) == 0)
    value_is_readable = (
        (version <= 4)
        & (metadata_length >= 0)
        & (metadata_length < 0x8000)
        & (F.octet_length(value) == commit_at + trailer - 1)
        & ((version != 4) | is_v4_simple)
        & F.is_valid_utf8(F.col(_METADATA))
    )
    is_common = F.col("read_error").isNull() & key.isNotNull() & key_is_readable & (value.isNull() | value_is_readable)
    return F.coalesce(is_common, F.lit(False))


def offset_commit_columns() -> dict[str, Column]:
    """The decoded row's columns, over `with_offset_commit_layout` rows where IS_COMMON_OFFSET_COMMIT holds."""
    key, value = F.col("key"), F.col("value")
    version, commit_at = F.col(_VERSION), F.col(_COMMIT_AT)
    is_tombstone = value.isNull()
    expire = _int64(value, commit_at + 8)
    value_columns = {
        "value_version": version,
        "committed_offset": _int64(value, 3),
        "leader_epoch": F.when(version >= 3, _signed(value, 11, 4)),
        "metadata": F.col(_METADATA),
        "committed_at_ms": _int64(value, commit_at),
        "expires_at_ms": F.when((version == 1) & (expire != UNSET_TIMESTAMP), expire),
    }
    return {
        "destination": F.lit(DESTINATION_OFFSET_COMMIT),
        "record_type": F.lit(RECORD_TYPE_OFFSET_COMMIT),
        "record_type_name": F.lit(RECORD_TYPE_NAME),
        "is_tombstone": is_tombstone,
        "group_id": F.col(_GROUP),
        "topic": F.col(_TOPIC),
        "partition": _signed(key, F.col(_GROUP_LENGTH) + F.col(_TOPIC_LENGTH) + 7, 4),
        **{name: F.when(~is_tombstone, column) for name, column in value_columns.items()},
    }
