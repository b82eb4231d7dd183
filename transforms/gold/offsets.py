"""Which offset records count: the committed-offset stream a group really had.

A transactional commit counts only once its transaction committed (txn_state 'committed'); an
aborted one never happened and a pending one does not count yet. A tombstone (expiry, offset or group
deletion, topic deletion) ends the partition's committed offset until the next commit.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from transforms.decoder.log_transactions import TXN_COMMITTED

OFFSET_KEY = ("cluster", "group_id", "topic", "partition")
PARTITION = ("cluster", "topic", "partition")  # one partition of a cluster: the key of its end-offset snapshots


def is_visible(txn_state: Column) -> Column:
    return txn_state.isNull() | (txn_state == F.lit(TXN_COMMITTED))


def filter_invisible_offset_records(offset_commits: DataFrame) -> DataFrame:
    """Commits and tombstones that happened (aborted and still-pending transactional ones removed)."""
    return offset_commits.where(is_visible(F.col("txn_state"))).select(
        *OFFSET_KEY,
        "source_partition",
        "source_offset",
        "record_at",
        "is_tombstone",
        "committed_offset",
        "committed_at",
        "expires_at",
    )


def filter_uncounted_commits(offset_commits: DataFrame) -> DataFrame:
    """Only commits that count: visible and not tombstones."""
    return filter_invisible_offset_records(offset_commits).where(~F.col("is_tombstone"))
