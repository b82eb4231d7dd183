"""Transactions within one partition's log: each transactional record stamped by the marker that ended it.

A transactional batch waits (with everything after it, so that log order is kept) until a COMMIT or
ABORT control record of the same producer id; batches still open at the end stay pending.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transforms.decoder.log_record import LogRecord

TXN_COMMITTED, TXN_ABORTED, TXN_PENDING = "committed", "aborted", "pending"
_AS_IS = "as is"  # a waiting batch that is not transactional


@dataclass(frozen=True, slots=True)
class Marker:
    """A COMMIT or ABORT control record: ends the open transaction of `producer_id`."""

    producer_id: int
    txn_state: str


def resolve_transactions(batches: Iterable[list]) -> Iterator[LogRecord]:
    """Records in log order, each transactional one stamped by the marker that later ended its transaction.

    A transactional batch waits (with everything after it) until a COMMIT or ABORT of the same
    producer id; batches still open at the end keep the state they were decoded with: pending.
    """
    waiting: deque[list] = deque()  # [records, state]: state None while open, _AS_IS for nothing to stamp
    open_by_producer: dict[int, list[list]] = {}
    for batch in batches:
        if not batch:
            continue
        first = batch[0]
        if type(first) is Marker:
            for marker in batch:
                for entry in open_by_producer.pop(marker.producer_id, ()):
                    entry[1] = marker.txn_state
        elif first.is_transactional:
            entry = [batch, None]
            open_by_producer.setdefault(first.producer_id, []).append(entry)
            waiting.append(entry)
            continue
        elif not waiting:
            yield from batch
            continue
        else:
            waiting.append([batch, _AS_IS])
        while waiting and waiting[0][1] is not None:
            yield from _stamped(*waiting.popleft())
    for records, state in waiting:  # the first is still open: pending, as decoded
        yield from _stamped(records, state or _AS_IS)


def _stamped(records: list[LogRecord], state: str) -> list[LogRecord]:
    """The records with their transaction's state, set in place: each was built by its batch's decoding
    and nothing else holds it yet, and `dataclasses.replace` cost more than decoding the record."""
    if state is not _AS_IS:
        for record in records:
            object.__setattr__(record, "txn_state", state)
    return records
