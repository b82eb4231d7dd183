"""A group's counted commits as history reads them, summarized: per partition, the first and the last
commit between two consecutive times at which the fold may read commits (its records' times and, for a
classic group, the times their state changed: `boundaries`).

History asks of commits only "the latest at or before t" (of a partition, or of the group) and "the
group's earliest after t", and only at such times t (transforms/history/departures.py). An interval's
first and last commit answer both exactly, for every t that bounds an interval, so the fold reads these
instead of every commit: a stable group's weeks of commits are one interval, two times per partition.

A commit at the same time as a boundary belongs to the interval that boundary closes ("at or before").
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

GROUP = ("cluster", "group_id")
PARTITION = (*GROUP, "topic", "partition")
SUMMARY_KEY = (*PARTITION, "interval_start")


def boundaries(group_metadata: DataFrame | None, consumer_group_records: DataFrame | None) -> DataFrame:
    """(GROUP, at): every time the fold may read a group's commits at (either input may be None)."""
    times = []
    if group_metadata is not None:
        times += [group_metadata.select(*GROUP, F.col(name).alias("at")) for name in ("record_at", "state_changed_at")]
    if consumer_group_records is not None:
        times.append(consumer_group_records.select(*GROUP, F.col("record_at").alias("at")))
    found = times[0]
    for more in times[1:]:
        found = found.unionByName(more)
    return found.where(F.col("at").isNotNull()).distinct()


def summarized(commits: DataFrame, at: DataFrame) -> DataFrame:
    """Counted commits (PARTITION, record_at) and boundaries (GROUP, at) -> one row per partition and
    interval: SUMMARY_KEY (`interval_start`: the boundary that opens it, null before the first one),
    `first_at`, `last_at`."""
    events = commits.select(*PARTITION, F.col("record_at").alias("at"), F.lit(False).alias("is_boundary")).unionByName(
        at.select(*GROUP, "at", F.lit(True).alias("is_boundary")), allowMissingColumns=True
    )
    # At one time a commit sorts before the boundary: it is in the interval the boundary closes.
    before = Window.partitionBy(*GROUP).orderBy("at", "is_boundary").rowsBetween(Window.unboundedPreceding, -1)
    opened_at = F.last(F.when(F.col("is_boundary"), F.col("at")), ignorenulls=True).over(before)
    return (
        events.withColumn("interval_start", opened_at)
        .where(~F.col("is_boundary"))
        .groupBy(*SUMMARY_KEY)
        .agg(F.min("at").alias("first_at"), F.max("at").alias("last_at"))
    )


def as_commits(summary: DataFrame) -> DataFrame:
    """The summary as the commits the fold reads: (PARTITION, record_at), each interval's first and last."""
    times = F.array_distinct(F.array("first_at", "last_at"))
    return summary.select(*PARTITION, F.explode(times).alias("record_at"))
