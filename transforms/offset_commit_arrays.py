"""Offset commits decoded a whole Arrow batch at a time, with numpy: the fast path of the silver decoder.

Nearly every record of `__consumer_offsets` is an offset commit (type 1), and its layouts are fixed
(kafka-record-formats.md 3.1-3.2): key `int16 1, string group, string topic, int32 partition`;
value v0/v2 `int64 offset, string metadata, int64 commit`, v1 the same plus `int64 expire`, v3
`int64 offset, int32 leader epoch, string metadata, int64 commit`, v4 as v3 with a compact string
and a tag section. Every field sits at a position computed from the two string lengths before it,
so a batch's fields are read as numpy gathers over the Arrow buffers, with no Python per record.

A record takes this path only when every check of the reference decoder would pass trivially
(`is_common`): a readable type-1 key whose lengths add up exactly, and a null value (tombstone) or
a value of a known version whose lengths add up exactly, with valid UTF-8 strings; for v4, a
metadata length that fits one varint byte and no tagged fields. Every other record goes to the
reference decoder (`transforms.decode_rows`), which stays the definition: tests check that both give
the same rows on real and on damaged records.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from transforms.decode_rows import DESTINATION_OFFSET_COMMIT, UNSET_TIMESTAMP

RECORD_TYPE_OFFSET_COMMIT = 1
RECORD_TYPE_NAME = "offset_commit"
_KEY_FIXED_BYTES = 10  # int16 type, int16 group length, int16 topic length, int32 partition
_MAX_INT16_LENGTH = 0x7FFF  # a length with the sign bit set is negative: an error for the reference
_ONE_BYTE_VARINT_LIMIT = 0x80
COMMON_OFFSET_COMMIT_COLUMNS = (
    "is_tombstone", "group_id", "topic", "partition", "value_version", "committed_offset", "leader_epoch",
    "metadata", "committed_at_ms", "expires_at_ms",
)  # fmt: skip
# The same for every common record: the caller adds them (as Spark literals, free), not each batch.
COMMON_OFFSET_COMMIT_CONSTANTS = {
    "destination": DESTINATION_OFFSET_COMMIT,
    "record_type": RECORD_TYPE_OFFSET_COMMIT,
    "record_type_name": RECORD_TYPE_NAME,
}
_PADDING = 16  # gathers past a short field's end stay inside the buffer; those rows fail the length check


@dataclass
class _Binaries:
    """A binary Arrow array as numpy: its bytes (padded), each value's start and length, and nulls."""

    data: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    is_null: np.ndarray

    @classmethod
    def of(cls, array: pa.Array) -> _Binaries:
        array = array.cast(pa.binary()) if array.type != pa.binary() else array
        count = len(array)
        if count == 0:  # an empty array's buffers may be absent or empty
            empty = np.empty(0, np.int64)
            return cls(np.zeros(_PADDING, np.uint8), empty, empty, np.empty(0, bool))
        _, offsets_buffer, data_buffer = array.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=count + 1, offset=array.offset * 4)
        data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
        # A slice of a larger array shares its buffer: only this slice's bytes are kept.
        first, end = int(offsets[0]), int(offsets[-1])
        padded = np.concatenate([data[first:end], np.zeros(_PADDING, np.uint8)])
        is_null = array.is_null().to_numpy(zero_copy_only=False)
        return cls(padded, offsets[:-1].astype(np.int64) - first, np.diff(offsets).astype(np.int64), is_null)

    @cached_property
    def non_ascii_before(self) -> np.ndarray:
        """Per buffer position: how many bytes >= 0x80 come before it."""
        counts = np.zeros(len(self.data) + 1, np.int32)
        np.cumsum(self.data >= 0x80, dtype=np.int32, out=counts[1:])
        return counts

    def take(self, rows: np.ndarray) -> _Binaries:
        return _Binaries(self.data, self.starts[rows], self.lengths[rows], self.is_null[rows])

    def _at(self, relative: np.ndarray) -> np.ndarray:
        """Absolute positions of `relative` (per value), kept inside the padded buffer."""
        return np.clip(self.starts + relative, 0, len(self.data) - _PADDING)

    def unsigned(self, relative: np.ndarray | int, width: int) -> np.ndarray:
        at = self._at(np.broadcast_to(np.asarray(relative, np.int64), self.starts.shape))
        result = np.zeros(len(at), np.int64)
        for index in range(width):
            result = (result << 8) | self.data[at + index]
        return result

    def signed32(self, relative: np.ndarray | int) -> np.ndarray:
        unsigned = self.unsigned(relative, 4)
        return np.where(unsigned >= 1 << 31, unsigned - (1 << 32), unsigned)

    def int64(self, relative: np.ndarray | int) -> np.ndarray:
        at = self._at(np.broadcast_to(np.asarray(relative, np.int64), self.starts.shape))
        return np.ascontiguousarray(self.data[at[:, None] + np.arange(8)]).view(">i8").ravel().astype(np.int64)

    def slices(self, relative: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bytes of each value's [relative, relative + length), concatenated, and their offsets."""
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.repeat(self._at(relative) - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
        return self.data[gather], offsets


def _ranges_valid_utf8(binaries: _Binaries, relative: np.ndarray, lengths: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per row of `rows`: are the `lengths` bytes at `relative` in its value valid UTF-8? A range without a
    byte >= 0x80 (ASCII: nearly all) is, as counted over the whole buffer at once; the others are decoded."""
    non_ascii = binaries.non_ascii_before
    begin = np.clip(binaries.starts[rows] + relative[rows], 0, len(binaries.data))
    end = np.clip(begin + lengths[rows], 0, len(binaries.data))
    valid = np.ones(len(rows), bool)
    for index in np.flatnonzero(non_ascii[end] > non_ascii[begin]):
        try:
            binaries.data[begin[index] : end[index]].tobytes().decode("utf-8")
        except UnicodeDecodeError:
            valid[index] = False
    return valid


def _strings(data: np.ndarray, offsets: np.ndarray, is_valid: np.ndarray | None = None) -> pa.Array:
    validity = None if is_valid is None else pa.py_buffer(np.packbits(is_valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.string(), len(offsets) - 1, [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


def _masked(values: np.ndarray, is_valid: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    return pa.array(values, arrow_type, mask=~is_valid)


@dataclass(frozen=True)
class _Layout:
    """Where each field of each record sits, and which records the fast path decodes (`is_common`)."""

    key: _Binaries
    value: _Binaries
    group_length: np.ndarray
    topic_length: np.ndarray
    version: np.ndarray
    metadata_at: np.ndarray
    metadata_length: np.ndarray  # 0 for tombstones
    commit_at: np.ndarray
    is_common: np.ndarray

    @classmethod
    def of(cls, key_array: pa.Array, value_array: pa.Array, read_error: pa.Array) -> _Layout:
        key, value = _Binaries.of(key_array), _Binaries.of(value_array)
        group_length = key.unsigned(2, 2)
        topic_length = key.unsigned(4 + group_length, 2)
        key_is_readable = (
            ~key.is_null
            & read_error.is_null().to_numpy(zero_copy_only=False)
            & (key.lengths >= _KEY_FIXED_BYTES)
            & (key.unsigned(0, 2) == RECORD_TYPE_OFFSET_COMMIT)
            & (group_length <= _MAX_INT16_LENGTH)
            & (topic_length <= _MAX_INT16_LENGTH)
            & (key.lengths == group_length + topic_length + _KEY_FIXED_BYTES)
        )
        version = value.unsigned(0, 2)
        is_v0_v1_v2, is_v3, is_v4 = version <= 2, version == 3, version == 4
        v4_length_byte = value.unsigned(14, 1)
        metadata_length = np.select(
            [is_v0_v1_v2, is_v3, is_v4], [value.unsigned(10, 2), value.unsigned(14, 2), v4_length_byte - 1], -1
        )
        metadata_at = np.select([is_v0_v1_v2, is_v3], [12, 16], 15)
        commit_at = metadata_at + metadata_length
        trailer = np.select([version == 1, is_v4], [16, 9], 8)  # v1: expire time; v4: tag section
        value_is_readable = (
            (version <= 4)
            & (metadata_length >= 0)
            & (metadata_length <= _MAX_INT16_LENGTH)
            & (value.lengths == commit_at + trailer)
            & (~is_v4 | ((v4_length_byte < _ONE_BYTE_VARINT_LIMIT) & (value.unsigned(commit_at + 8, 1) == 0)))
        )
        is_tombstone = value.is_null
        metadata_length = np.where(is_tombstone, 0, metadata_length)
        is_common = key_is_readable & (is_tombstone | value_is_readable)
        # Last, for the records that pass so far: their strings must be valid UTF-8.
        rows = np.flatnonzero(is_common)
        is_utf8 = (
            _ranges_valid_utf8(key, np.full(len(key.starts), 4), group_length, rows)
            & _ranges_valid_utf8(key, 6 + group_length, topic_length, rows)
            & _ranges_valid_utf8(value, metadata_at, metadata_length, rows)
        )
        is_common[rows[~is_utf8]] = False
        return cls(key, value, group_length, topic_length, version, metadata_at, metadata_length, commit_at, is_common)


def common_offset_commit_mask(key_array: pa.Array, value_array: pa.Array, read_error: pa.Array) -> np.ndarray:
    """Per record: does the fast path decode it (else the reference decoder must)."""
    return _Layout.of(key_array, value_array, read_error).is_common


def decode_common_offset_commits(key_array: pa.Array, value_array: pa.Array, read_error: pa.Array) -> tuple:
    """(is_common per record, the decoded columns of the common records, in record order).

    The columns (COMMON_OFFSET_COMMIT_COLUMNS) are those of `transforms.silver.decoded_schema` that an
    offset commit fills, but for COMMON_OFFSET_COMMIT_CONSTANTS.
    """
    layout = _Layout.of(key_array, value_array, read_error)
    rows = np.flatnonzero(layout.is_common)
    key, value = layout.key.take(rows), layout.value.take(rows)
    group_length, version, commit_at = layout.group_length[rows], layout.version[rows], layout.commit_at[rows]
    has_value = ~value.is_null
    expire = value.int64(commit_at + 8)
    count = len(rows)
    columns = {
        "is_tombstone": pa.array(~has_value),
        "group_id": _strings(*key.slices(np.full(count, 4), group_length)),
        "topic": _strings(*key.slices(6 + group_length, layout.topic_length[rows])),
        "partition": pa.array(key.signed32(key.lengths - 4).astype(np.int32)),
        "value_version": _masked(version.astype(np.int32), has_value, pa.int32()),
        "committed_offset": _masked(value.int64(2), has_value, pa.int64()),
        "leader_epoch": _masked(value.signed32(10).astype(np.int32), has_value & (version >= 3), pa.int32()),
        "metadata": _strings(*value.slices(layout.metadata_at[rows], layout.metadata_length[rows]), has_value),
        "committed_at_ms": _masked(value.int64(commit_at), has_value, pa.int64()),
        "expires_at_ms": _masked(expire, has_value & (version == 1) & (expire != UNSET_TIMESTAMP), pa.int64()),
    }
    return layout.is_common, columns
