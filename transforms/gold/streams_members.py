"""Streams groups' members per epoch, as `kafka-streams-groups --describe --members --verbose` shows them.

The generations' shape (the KIP-848 one) holds a streams member's client and its active tasks, which are
what it owns. What it has no column for is here, for every member of every streams epoch: the member's
process id, user endpoint, client tags and topology epoch (its latest member metadata, type 19, before the
epoch's target-assignment record, as the generation's members are read), and its member epoch with its
active, standby and warm-up tasks (its current assignment, type 22, as it stood when the epoch ended:
before the next generation's record, or the group's deletion). A member whose current assignment was
deleted by then holds no task and has no member epoch.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

from schemas.streams_gold import TASK_KINDS
from transforms.gold.generations import GROUP_PROTOCOL_STREAMS, INCARNATION
from transforms.gold.streams_records import RECORD_STREAMS_CURRENT_MEMBER

RECORD_STREAMS_MEMBER_METADATA = 19
EPOCH = (*INCARNATION, "generation")

_TASK_IDS = ArrayType(
    StructType([StructField("subtopology_id", StringType()), StructField("partitions", ArrayType(IntegerType()))])
)
_ENDPOINT = StructType([StructField("host", StringType()), StructField("port", IntegerType())])
_METADATA_JSON = StructType(
    [
        StructField("topology_epoch", IntegerType()),
        StructField("process_id", StringType()),
        StructField(
            "user_endpoint", StructType([StructField("host", StringType()), StructField("port", IntegerType())])
        ),
        StructField(
            "client_tags", ArrayType(StructType([StructField("key", StringType()), StructField("value", StringType())]))
        ),
    ]
)
_TASKS_JSON = StructType([StructField(f"{kind}_tasks", _TASK_IDS) for kind in TASK_KINDS])


def _sorted_tasks(tasks: Column) -> Column:
    ordered = F.transform(
        F.coalesce(tasks, F.array().cast(_TASK_IDS)),
        lambda t: F.struct(
            t["subtopology_id"].alias("subtopology_id"), F.array_sort(t["partitions"]).alias("partitions")
        ),
    )
    return F.array_sort(ordered)


def _latest(epoch_members: DataFrame, records: DataFrame, record_type: int, before: Column) -> DataFrame:
    """Each (epoch, member)'s latest record of `record_type` whose offset satisfies `before`, tombstones kept."""
    of_type = records.where(F.col("record_type") == F.lit(record_type)).select(
        "cluster", "group_id", "source_partition", "member_id", "source_offset", "is_tombstone", "member_epoch",
        "value_json",
    )  # fmt: skip
    latest = Window.partitionBy(*EPOCH, "member_id").orderBy(F.col("source_offset").desc())
    return (
        epoch_members.join(of_type, on=["cluster", "group_id", "source_partition", "member_id"], how="inner")
        .where(before)
        .withColumn("rank", F.row_number().over(latest))
        .where(F.col("rank") == 1)
        .drop("rank")
    )


def streams_members(generations: DataFrame, consumer_group_records: DataFrame) -> DataFrame:
    """gold generations + silver consumer_group_records -> streams_members rows (schemas.streams_gold)."""
    epoch_order = Window.partitionBy(*INCARNATION).orderBy("source_offset")
    epoch_members = (
        generations.where(F.col("group_protocol") == F.lit(GROUP_PROTOCOL_STREAMS))
        .withColumn("epoch_end", F.lead("source_offset").over(epoch_order))
        .where(F.col("generation").isNotNull())
        .select(
            *EPOCH,
            "recorded_at",
            "source_partition",
            F.col("source_offset").alias("anchor_offset"),
            "epoch_end",
            F.explode("members").alias("member"),
        )
        .select("*", F.col("member.member_id").alias("member_id"), F.col("member.client_id").alias("client_id"))
        .drop("member")
    )
    metadata = _latest(
        epoch_members, consumer_group_records, RECORD_STREAMS_MEMBER_METADATA,
        F.col("source_offset") < F.col("anchor_offset"),
    ).select(*EPOCH, "member_id", F.from_json("value_json", _METADATA_JSON).alias("metadata"))  # fmt: skip
    current = _latest(
        epoch_members, consumer_group_records, RECORD_STREAMS_CURRENT_MEMBER,
        F.col("epoch_end").isNull() | (F.col("source_offset") < F.col("epoch_end")),
    ).select(
        *EPOCH,
        "member_id",
        F.when(~F.col("is_tombstone"), F.col("member_epoch")).alias("member_epoch"),
        F.when(~F.col("is_tombstone"), F.from_json("value_json", _TASKS_JSON)).alias("tasks"),
    )  # fmt: skip
    endpoint = F.col("metadata.user_endpoint")
    return (
        epoch_members.join(metadata, on=[*EPOCH, "member_id"], how="left")
        .join(current, on=[*EPOCH, "member_id"], how="left")
        .select(
            *EPOCH,
            "member_id",
            "client_id",
            "member_epoch",
            F.col("metadata.topology_epoch").alias("topology_epoch"),
            F.col("metadata.process_id").alias("process_id"),
            F.when(endpoint.isNotNull(), F.concat_ws(":", endpoint["host"], endpoint["port"].cast("string"))).alias(
                "user_endpoint"
            ),
            F.map_from_entries(
                F.coalesce(F.col("metadata.client_tags"), F.array().cast(_METADATA_JSON["client_tags"].dataType))
            ).alias("client_tags"),
            *[_sorted_tasks(F.col(f"tasks.{kind}_tasks")).alias(f"{kind}_tasks") for kind in TASK_KINDS],
            "recorded_at",
            "source_partition",
            F.col("anchor_offset").alias("source_offset"),
        )
    )
