"""Epoch groups whose stored rows name a topic id otherwise than the cluster's records now do.

A KIP-848, share or streams group's partitions are keyed by topic id and named when its rows are made
(transforms/gold/topic_names.py ranks the sources). An id unresolved then may be named later, or by a more
trusted source; the group's rows below its fold's frontier would keep the old name, so the group is folded
again from its first record.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from transforms.history.epoch_rows import SOURCE_SUBTOPOLOGY, SOURCE_UNRESOLVED
from transforms.history.rebalances import EPOCH_PROTOCOLS

GROUP = ("cluster", "group_id")


def _named_topic_ids(generations: DataFrame) -> DataFrame:
    """Epoch groups' generations -> (group, topic_id, topic, topic_name_source): every name their members show."""
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
    """Groups whose `generations` name a topic id otherwise than `topic_names` (topic_names.topic_names over
    the cluster's silver as it is now) does: an unresolved id now resolved, a more trusted source."""
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
