"""Offset commits decoded a whole Arrow batch at a time: the fast path of the silver decoder.

Nearly every record of `__consumer_offsets` is an offset commit (type 1), and its layouts are fixed
(kafka-record-formats.md 3.1-3.2): key `int16 1, string group, string topic, int32 partition`;
value v0/v2 `int64 offset, string metadata, int64 commit`, v1 the same plus `int64 expire`, v3
`int64 offset, int32 leader epoch, string metadata, int64 commit`, v4 as v3 with a compact string and
a tag section. Here every field's position is computed for all records at once and the fields are
gathered with numpy, instead of walking each record in Python.

A record takes this path only when every check of the reference decoder would pass trivially: a
readable type-1 key whose lengths add up exactly, and a null value (tombstone) or a value of a
known version whose lengths add up exactly, with valid UTF-8 strings; for v4, a metadata length
that fits one varint byte and no tagged fields. Everything else (other record types, read errors,
corrupt bytes, tagged fields) is left to the reference decoder (`transforms.decode_rows`), which
stays the definition: tests check that both give the same rows on real and on damaged records.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transforms.decode_rows import DESTINATION_OFFSET_COMMIT, UNSET_TIMESTAMP

RECORD_TYPE_OFFSET_COMMIT = 1
RECORD_TYPE_NAME = "offset_commit"
_KEY_FIXED_BYTES = 10  # int16 type, int16 group length, int16 topic length, int32 partition
_NO_POSITION = -1
# Input columns copied to the decoded row as they are (the reference decoder does the same).
_PASSED_THROUGH = ("cluster", "record_id", "source_partition", "source_offset", "txn_state", "producer_id")


class _Bytes:
    """One binary column as numpy: start and length of each value, the data buffer, non-null mask."""

    def __init__(self, column: pa.Array) -> None:
        buffers = column.buffers()
        offset_type = np.int64 if pa.types.is_large_binary(column.type) else np.int32
        offsets = np.frombuffer(buffers[1], offset_type)[column.offset : column.offset + len(column) + 1]
        self.starts = offsets[:-1].astype(np.int64)
        self.lengths = offsets[1:].astype(np.int64) - self.starts
        self.data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
        self.present = ~column.is_null().to_numpy(zero_copy_only=False)

    def int_at(self, positions: np.ndarray, width: int) -> np.ndarray:
        """Big-endian signed integers of `width` bytes at `positions` (clipped into the buffer; callers mask)."""
        if len(self.data) < width:
            return np.zeros(len(positions), np.int64)
        safe = np.clip(positions, 0, len(self.data) - width)
        gathered = self.data[safe[:, None] + np.arange(width)]
        return gathered.view(f">i{width}").ravel().astype(np.int64)

    def strings(self, starts: np.ndarray, lengths: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        """The byte ranges as a UTF-8 string array, and a mask of the ranges that are not valid UTF-8."""
        offsets = np.zeros(len(starts) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        within = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
        data = self.data[np.repeat(starts, lengths) + within] if total else np.zeros(0, np.uint8)
        array = pa.Array.from_buffers(
            pa.string(), len(starts), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
        )
        try:
            array.validate(full=True)
            return array, np.zeros(len(starts), bool)
        except pa.ArrowInvalid:
            raw = data.tobytes()
            invalid = np.array([not _is_utf8(raw[offsets[i] : offsets[i + 1]]) for i in range(len(starts))], bool)
            return array, invalid


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _parse_keys(keys: _Bytes, candidates: np.ndarray) -> dict[str, np.ndarray]:
    start, length = keys.starts, keys.lengths
    ok = candidates & keys.present & (length >= _KEY_FIXED_BYTES)
    ok &= keys.int_at(start, 2) == RECORD_TYPE_OFFSET_COMMIT
    group_length = keys.int_at(start + 2, 2)
    topic_at = start + 4 + group_length
    ok &= (group_length >= 0) & (topic_at + 2 <= start + length)
    topic_length = keys.int_at(topic_at, 2)
    partition_at = topic_at + 2 + topic_length
    ok &= (topic_length >= 0) & (partition_at + 4 == start + length)
    return {
        "ok": ok,
        "group_at": start + 4,
        "group_length": group_length,
        "topic_at": topic_at + 2,
        "topic_length": topic_length,
        "partition": keys.int_at(partition_at, 4),
    }


def _parse_values(values: _Bytes) -> dict[str, np.ndarray]:
    """Fields of every value by its version; `ok` where the version is known and the lengths add up."""
    start, end = values.starts, values.starts + values.lengths
    version = values.int_at(start, 2)
    v0_v1_v2 = (version == 0) | (version == 1) | (version == 2)
    v4_length_byte = values.int_at(start + 14, 1) & 0xFF
    metadata_length = np.select(
        [v0_v1_v2, version == 3, version == 4],
        [values.int_at(start + 10, 2), values.int_at(start + 14, 2), v4_length_byte - 1],
        _NO_POSITION,
    )
    metadata_at = np.select([v0_v1_v2, version == 3, version == 4], [start + 12, start + 16, start + 15], 0)
    commit_at = metadata_at + metadata_length
    trailer = np.select([version == 1, version == 4], [16, 9], 8)  # v1: expire time; v4: empty tag section
    ok = values.present & (values.lengths >= 2) & (metadata_length >= 0) & (commit_at + trailer == end)
    ok &= (version != 4) | ((v4_length_byte < 0x80) & (values.int_at(commit_at + 8, 1) == 0))
    return {
        "ok": ok,
        "version": version,
        "offset": values.int_at(start + 2, 8),
        "leader_epoch": values.int_at(start + 10, 4),
        "has_leader_epoch": version >= 3,
        "metadata_at": metadata_at,
        "metadata_length": metadata_length,
        "commit": values.int_at(commit_at, 8),
        "expire": values.int_at(commit_at + 8, 8),
    }


def decode_offset_commits(batch: pa.RecordBatch, schema: pa.Schema) -> tuple[pa.RecordBatch, np.ndarray]:
    """(decoded rows in `schema` for the records this path takes, a mask of those records in `batch`).

    `batch` has the decoder's input columns (see transforms.silver); `schema` is the decoded row's.
    """
    keys, values = _Bytes(batch.column("key")), _Bytes(batch.column("value"))
    key = _parse_keys(keys, batch.column("read_error").is_null().to_numpy(zero_copy_only=False))
    value = _parse_values(values)
    taken = key["ok"] & (~values.present | value["ok"])
    rows = np.flatnonzero(taken)
    if len(rows) == 0:
        return pa.RecordBatch.from_pylist([], schema=schema), taken
    group, bad_group = keys.strings(key["group_at"][rows], key["group_length"][rows])
    topic, bad_topic = keys.strings(key["topic_at"][rows], key["topic_length"][rows])
    has_value = values.present[rows]
    metadata_length = np.where(has_value, value["metadata_length"][rows], 0)
    metadata, bad_metadata = values.strings(value["metadata_at"][rows], metadata_length)
    bad = bad_group | bad_topic | bad_metadata
    if bad.any():  # invalid UTF-8: the reference decoder quarantines it, with its reason
        taken[rows[bad]] = False
        keep = pa.array(~bad)
        rows, has_value = rows[~bad], has_value[~bad]
        group, topic, metadata = group.filter(keep), topic.filter(keep), metadata.filter(keep)
    is_tombstone = ~has_value
    version = value["version"][rows]
    expire = value["expire"][rows]
    columns = {
        "destination": pa.repeat(DESTINATION_OFFSET_COMMIT, len(rows)),
        "record_type": pa.repeat(pa.scalar(RECORD_TYPE_OFFSET_COMMIT, pa.int32()), len(rows)),
        "record_type_name": pa.repeat(RECORD_TYPE_NAME, len(rows)),
        "is_tombstone": pa.array(is_tombstone),
        "value_version": pa.array(version, pa.int32(), mask=is_tombstone),
        "group_id": group,
        "topic": topic,
        "partition": pa.array(key["partition"][rows], pa.int32()),
        "committed_offset": pa.array(value["offset"][rows], pa.int64(), mask=is_tombstone),
        "leader_epoch": pa.array(
            value["leader_epoch"][rows], pa.int32(), mask=is_tombstone | ~value["has_leader_epoch"][rows]
        ),
        "metadata": pc.if_else(pa.array(has_value), metadata, pa.scalar(None, pa.string())),
        "committed_at_ms": pa.array(value["commit"][rows], pa.int64(), mask=is_tombstone),
        "expires_at_ms": pa.array(expire, pa.int64(), mask=is_tombstone | (version != 1) | (expire == UNSET_TIMESTAMP)),
    }
    taken_rows = pa.array(rows)
    arrays = []
    for field in schema:
        if field.name in columns:
            arrays.append(columns[field.name].cast(field.type))
        elif field.name == "record_at":
            arrays.append(batch.column("record_at_ms").take(taken_rows).cast(field.type))
        elif field.name in _PASSED_THROUGH:
            arrays.append(batch.column(field.name).take(taken_rows).cast(field.type))
        else:
            arrays.append(pa.nulls(len(rows), field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema), taken
