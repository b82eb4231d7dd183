"""Which groups a night's silver changes can alter the history of: the groups an incremental run rebuilds.

Every history row (generations, assignments, rebalances, movements, frequency) belongs to one group and
is computed from that group's own silver records, plus two inputs read across groups:
- offset commits, read only around the group's rebalances: `departures.members_left` looks for the latest
  commit at or before a rebalance's join; `departures.pause_estimates` (eager rebalances) for the latest
  commit at or before the join and the earliest one after completion;
- the topic-id -> name map of KIP-848 and share groups (`topic_names.topic_names`: every group's records
  and commits, and the topic_ids table).

So a group's history changes only when (1) one of its group records changed (inserted, updated or
deleted: late data and `forget` too); (2) a changed commit of it lies where one of its rebalances looks
(`groups_with_commits_seen_by_rebalances`); or (3) the name map now names a topic id its KIP-848
generations name otherwise (`groups_with_renamed_topics`). Rules (2) and (3) may name a group whose
history turns out the same (a superset is safe: a rebuilt group is recomputed exactly); they never miss
one whose history changes.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from transforms.gold.departures import PROTOCOL_EAGER
from transforms.gold.generations import EPOCH_PROTOCOLS, GROUP
from transforms.gold.streams_records import SOURCE_SUBTOPOLOGY
from transforms.gold.topic_names import SOURCE_UNRESOLVED


def groups_of(rows: DataFrame) -> DataFrame:
    """Any rows with cluster and group_id -> their groups, once each."""
    return rows.select(*GROUP).distinct()


def commit_change_summary(changed_commits: DataFrame) -> DataFrame:
    """A night's changed commits (nearly all its rows) -> one row per group partition standing for them
    wherever history reads them, so that they are read once: (cluster, group_id, source_partition,
    source_offset, record_at, last_record_at, has_untimed_change). `source_offset` and `record_at` are the
    lowest and earliest, null when a row lacks one (resume.change_starts takes such a row as unplaced,
    as it would the row itself); `last_record_at` the latest."""
    return changed_commits.groupBy(*GROUP, "source_partition").agg(
        F.when(~F.max(F.col("source_offset").isNull()), F.min("source_offset")).alias("source_offset"),
        F.when(~F.max(F.col("record_at").isNull()), F.min("record_at")).alias("record_at"),
        F.max("record_at").alias("last_record_at"),
        F.max(F.col("record_at").isNull()).alias("has_untimed_change"),
    )


def _changed_commit_spans(summary: DataFrame) -> DataFrame:
    """commit_change_summary -> (group) the earliest and latest record_at of its changed commits, and
    whether one has none."""
    return summary.groupBy(*GROUP).agg(
        F.min("record_at").alias("first_changed_at"),
        F.max("last_record_at").alias("last_changed_at"),
        F.max("has_untimed_change").alias("has_untimed_change"),
    )


def _rebalance_probes(rebalances: DataFrame) -> DataFrame:
    """gold rebalances -> the times each one reads commits at: its join, its completion and its pause."""
    return rebalances.select(
        *GROUP,
        (F.col("rebalance_protocol") == F.lit(PROTOCOL_EAGER)).alias("is_eager"),
        (F.size("members_left") > 0).alias("has_departures"),
        "join_completed_at",
        "completed_at",
        "estimated_pause_ms",
        "pause_estimate_method",
    )


def groups_with_commits_seen_by_rebalances(changed_commits: DataFrame, rebalances: DataFrame) -> DataFrame:
    """commit_change_summary of the changed commits + gold rebalances -> the groups with a changed commit
    (any state: a pending one may count tomorrow, a deleted one counted) that one of their rebalances (gold,
    as the tables hold them) can read.

    A rebalance with departures reads its leavers' commits at or before its join (members_left); an eager
    one reads the group's commits at or before its join and the first commit after its
    completion. That first commit lies at or before join + estimated pause when the pause is known
    (the pause runs from a commit at or before the join to it). An unknown pause whose method is
    `no_commit_in_generation` has no commit to start from, which only a change at or before the join could
    bring; one with no method waits for the group's first commit after completion (tables written before
    that method existed show both so: they are taken as waiting, a superset). Other rebalances
    (cooperative or KIP-848, nobody left) read no commit.

    A group's changed commits are taken as one span (earliest to latest): a window overlapping the span
    touches the group, a superset of the exact test that keeps the join one row per group.
    """
    spans = _changed_commit_spans(changed_commits)
    probes = _rebalance_probes(rebalances).join(spans, on=list(GROUP), how="inner")
    pause_known_at = F.timestamp_millis(F.unix_millis("join_completed_at") + F.col("estimated_pause_ms"))
    is_read_before_join = (F.col("is_eager") | F.col("has_departures")) & (
        F.col("first_changed_at") <= F.col("join_completed_at")
    )
    is_after_completion = F.col("is_eager") & (F.col("last_changed_at") > F.col("completed_at"))
    is_waiting = F.col("estimated_pause_ms").isNull() & F.col("pause_estimate_method").isNull()
    return (
        probes.where(
            F.col("has_untimed_change")
            | is_read_before_join
            | (is_after_completion & (is_waiting | (F.col("first_changed_at") <= pause_known_at)))
        )
        .select(*GROUP)
        .distinct()
    )


def _named_topic_ids(generations: DataFrame) -> DataFrame:
    """KIP-848 and share generations -> (group, topic_id, topic, topic_name_source): every name their members show."""
    members = generations.where(F.col("group_protocol").isin(*EPOCH_PROTOCOLS)).select(
        *GROUP, F.explode("members").alias("m")
    )
    named = members.select(
        *GROUP,
        F.explode(
            F.concat(F.coalesce("m.assigned_partitions", F.array()), F.coalesce("m.target_partitions", F.array()))
        ).alias("tp"),
    )
    # A streams subtopology is no topic: no id map names it, so it never counts as renamed.
    is_topic = F.col("tp.topic_name_source") != F.lit(SOURCE_SUBTOPOLOGY)
    return named.where(is_topic).select(*GROUP, "tp.topic_id", "tp.topic", "tp.topic_name_source").distinct()


def groups_with_renamed_topics(generations: DataFrame, topic_names: DataFrame) -> DataFrame:
    """KIP-848 and share groups whose generations name a topic id otherwise than `topic_names` (epochs.topic_names,
    over the cluster's silver as it is now) does: an unresolved id now resolved, a more trusted source."""
    names = topic_names.select("cluster", "topic_id", F.col("topic").alias("new_topic"), "topic_name_source")
    used = _named_topic_ids(generations).withColumnRenamed("topic_name_source", "used_source")
    new_topic = F.coalesce("new_topic", "topic_id")
    new_source = F.coalesce("topic_name_source", F.lit(SOURCE_UNRESOLVED))
    is_renamed = ~(F.col("topic").eqNullSafe(new_topic) & F.col("used_source").eqNullSafe(new_source))
    return (
        used.join(names, on=["cluster", "topic_id"], how="left")
        .where(F.col("topic_id").isNotNull() & is_renamed)
        .select(*GROUP)
        .distinct()
    )
