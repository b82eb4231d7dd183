"""The decoder's one error for bad bytes, in the log layer and the record layer alike.

It carries where the bytes failed, what was expected there and what was found, so a caller can
quarantine the record with a reason or a test can look at the parts. The record layer's message is
built from them ("where: expected ..., found ..."); the log layer words its own message, the one its
quarantine reasons and `jobs.dump` lines have always had, so reasons stored by earlier runs and new
ones stay comparable. Unknown record types and versions are not errors of the bytes: see
`coordinator_records`.
"""

from __future__ import annotations


class CorruptRecordError(ValueError):
    """Bytes that fail a check: `where`, what was `expected`, what was `found`."""

    def __init__(self, where: str, expected: str, found: str, *, message: str | None = None) -> None:
        super().__init__(f"{where}: expected {expected}, found {found}" if message is None else message)
        self.where, self.expected, self.found = where, expected, found
