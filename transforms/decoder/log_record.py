"""`LogRecord`: what the log layer yields for each data record of a segment, or for bytes that failed a check.

One per record, so building one is on the hot path: see `DraftLogRecord`.
"""

from __future__ import annotations

from dataclasses import dataclass, make_dataclass


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One data record of a segment, or (with `error` set) bytes that failed a check."""

    partition: int | None  # __consumer_offsets partition, from the directory name, else None
    offset: int | None  # absolute offset; for an error item the batch's base offset as read, if any
    timestamp_ms: int | None  # LogAppendTime batches: the batch's maxTimestamp; magic 0: None
    timestamp_type: str | None  # create_time | log_append_time; None for magic 0 and error items
    key: bytes | None
    value: bytes | None  # None = tombstone
    producer_id: int  # -1 when none
    producer_epoch: int
    is_transactional: bool
    txn_state: str | None  # committed | aborted | pending for transactional records, else None
    batch_base_offset: int | None  # legacy: the first (inner) offset of the message
    batch_position: int | None  # byte position of the batch in its file
    magic: int | None
    compression: str | None  # none | gzip | snappy | lz4 | zstd
    source_file: str | None
    error: str | None  # set: not a record; what was expected, what was found, where
    raw: bytes | None  # error items: the batch, or the damaged bytes up to the next sound batch; None otherwise


# A frozen dataclass's __init__ sets each field through object.__setattr__: 17 calls, which cost more
# than decoding the record. The hot path builds this plain twin (same slots, same order) and re-classes
# it, several times faster; the object then IS a LogRecord (type, ==, hash, repr, replace, pickle).
DraftLogRecord = make_dataclass("DraftLogRecord", LogRecord.__slots__, slots=True, eq=False, repr=False)
