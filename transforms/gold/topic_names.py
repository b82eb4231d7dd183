"""Topic id -> name for the groups that assign partitions by topic id (KIP-848 consumer and share groups).

One row per known topic id of a cluster, from the most trusted source that names it: a record of the
group coordinator's own (the pre-4.1 partition metadata of consumer groups, type 4, and of early-access
share groups, type 9; a share group's state partition metadata, type 15, which names every topic whose
share partitions it initialises, holds or deletes), offset commits v4 (which carry the id), a topic-id
table (user-provided or listed from the cluster), and, last, a group whose members all subscribe to
exactly one topic name while its assignments name exactly one topic id.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.generations import GROUP
from transforms.gold.share_state import named_topic_ids

RECORD_PARTITION_METADATA_TYPES = (4, 9)  # ConsumerGroupPartitionMetadata, ShareGroupPartitionMetadata
# Records whose assigned_partitions name topic ids (targets and current assignments of both kinds) and
# whose members subscribe by name (member metadata of both kinds).
RECORD_ASSIGNMENT_TYPES = (7, 8, 13, 14)
RECORD_MEMBER_METADATA_TYPES = (5, 10)

SOURCE_PARTITION_METADATA = "partition_metadata"
SOURCE_SHARE_PARTITION_METADATA = "share_partition_metadata"
SOURCE_OFFSET_COMMIT = "offset_commit"
SOURCE_SINGLE_SUBSCRIPTION = "single_subscription"
SOURCE_UNRESOLVED = "unresolved"
_TRUST = {
    SOURCE_PARTITION_METADATA: 1,
    SOURCE_SHARE_PARTITION_METADATA: 1,
    SOURCE_OFFSET_COMMIT: 2,
    "user": 3,
    "cluster": 3,
    SOURCE_SINGLE_SUBSCRIPTION: 4,
}


def _single_subscription_names(records: DataFrame) -> DataFrame:
    """Groups that subscribe to one topic name and are assigned one topic id: that id is that name."""
    assigned_ids = (
        records.where(F.col("record_type").isin(*RECORD_ASSIGNMENT_TYPES))
        .select(*GROUP, F.explode("assigned_partitions.topic_id").alias("topic_id"))
        .groupBy(*GROUP)
        .agg(F.collect_set("topic_id").alias("topic_ids"))
    )
    subscribed = (
        records.where(F.col("record_type").isin(*RECORD_MEMBER_METADATA_TYPES) & ~F.col("is_tombstone"))
        .groupBy(*GROUP)
        .agg(
            F.array_distinct(F.flatten(F.collect_list(F.coalesce("subscribed_topic_names", F.array())))).alias("names"),
            F.max(F.coalesce(F.length("subscribed_topic_regex") > 0, F.lit(False))).alias("has_regex"),
        )
    )
    is_unambiguous = (F.size("topic_ids") == 1) & (F.size("names") == 1) & ~F.col("has_regex")
    return (
        assigned_ids.join(subscribed, on=list(GROUP), how="inner")
        .where(is_unambiguous)
        .select("cluster", F.col("topic_ids")[0].alias("topic_id"), F.col("names")[0].alias("topic"))
        .withColumn("source", F.lit(SOURCE_SINGLE_SUBSCRIPTION))
    )


def topic_names(consumer_group_records: DataFrame, offset_commits: DataFrame, topic_ids: DataFrame) -> DataFrame:
    """-> one row per known topic id: (cluster, topic_id, topic, topic_name_source), the most trusted source.
    `offset_commits`: silver's, or just their (cluster, topic_id, topic) pairs (jobs/history_topic_names.py)."""
    from_metadata = (
        consumer_group_records.where(F.col("record_type").isin(*RECORD_PARTITION_METADATA_TYPES))
        .select("cluster", F.explode("topic_names").alias("t"))
        .select("cluster", "t.topic_id", F.col("t.topic_name").alias("topic"), F.lit(SOURCE_PARTITION_METADATA))
    )
    from_share_metadata = named_topic_ids(consumer_group_records).withColumn(
        "source", F.lit(SOURCE_SHARE_PARTITION_METADATA)
    )
    # Distinct first: a broker that writes topic ids writes one with every commit.
    from_commits = (
        offset_commits.where(F.col("topic_id").isNotNull())
        .select("cluster", "topic_id", "topic", F.lit(SOURCE_OFFSET_COMMIT))
        .distinct()
    )
    candidates = (
        from_metadata.toDF("cluster", "topic_id", "topic", "source")
        .unionByName(from_share_metadata.select("cluster", "topic_id", "topic", "source"))
        .unionByName(from_commits.toDF("cluster", "topic_id", "topic", "source"))
        .unionByName(topic_ids.select("cluster", "topic_id", "topic", "source"))
        .unionByName(_single_subscription_names(consumer_group_records))
        .where(F.col("topic_id").isNotNull() & F.col("topic").isNotNull())
    )
    trust = F.create_map(*[F.lit(item) for pair in _TRUST.items() for item in pair])
    best = Window.partitionBy("cluster", "topic_id").orderBy(F.coalesce(trust[F.col("source")], F.lit(9)), "topic")
    return (
        candidates.withColumn("rank", F.row_number().over(best))
        .where(F.col("rank") == 1)
        .select("cluster", "topic_id", "topic", F.col("source").alias("topic_name_source"))
    )
