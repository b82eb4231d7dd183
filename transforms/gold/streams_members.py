"""Streams groups' members per epoch, as `kafka-streams-groups --describe --members --verbose` shows them.

The generations' shape (the KIP-848 one) holds a streams member's client and its active tasks, which are
what it owns. What it has no column for is here, for every member of every streams epoch: the member's
process id, user endpoint, client tags and topology epoch (its latest member metadata, type 19, before the
epoch's target-assignment record, as the generation's members are read), and its member epoch with its
active, standby and warm-up tasks (its current assignment, type 22, as it last stood before the epoch
ended: before the next generation's record, or the group's deletion). A member that left at the end of
the epoch held until then what its last record says (its tombstone is its leaving, as the generations
read ownership); one with no current assignment yet holds no task and has no member epoch.

Standby tasks move too (`standby_task_moves`), counted apart from the active tasks that fill the
rebalances' partition counts: a move of a state store's replica costs a restore, not a processing pause.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

from schemas.streams_gold import TASK_KINDS
from transforms.gold.generations import GROUP_PROTOCOL_STREAMS, INCARNATION, REBALANCE
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
        epoch_members, consumer_group_records.where(~F.col("is_tombstone")), RECORD_STREAMS_CURRENT_MEMBER,
        F.col("epoch_end").isNull() | (F.col("source_offset") < F.col("epoch_end")),
    ).select(
        *EPOCH,
        "member_id",
        "member_epoch",
        F.from_json("value_json", _TASKS_JSON).alias("tasks"),
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


def standby_task_moves(framed: DataFrame, members: DataFrame) -> DataFrame:
    """framed (rebalances.logical_rebalances) + streams_members -> (rebalance, moved_standby_task_count) for
    every streams rebalance, between its endpoints as the active moves are counted. A task can have several
    standby replicas (`streams.num.standby.replicas`), so per task the members that lost a replica are
    paired with those that gained one: a move per replica that changed hands, as for an active task with
    one holder. Members are keyed by member id: streams groups have no static membership (KIP-1071)."""
    placements = members.select(*EPOCH, "member_id", F.explode("standby_tasks").alias("task")).select(
        *EPOCH, "member_id", F.col("task.subtopology_id").alias("subtopology_id"),
        F.explode("task.partitions").alias("partition"),
    )  # fmt: skip
    streams = framed.where(F.col("group_protocol") == F.lit(GROUP_PROTOCOL_STREAMS)).select(
        *REBALANCE, "before_generation"
    )
    task = [*REBALANCE, "subtopology_id", "partition", "member_id"]
    after = streams.join(placements, on=list(REBALANCE), how="inner").select(*task, F.lit(1).alias("held_after"))
    before = streams.join(
        placements.withColumnRenamed("generation", "before_generation"), on=[*INCARNATION, "before_generation"]
    ).select(*task, F.lit(1).alias("held_before"))
    per_task = (
        before.join(after, on=task, how="full")
        .groupBy(*task[:-1])
        .agg(
            F.count_if(F.col("held_after").isNull()).alias("lost"),
            F.count_if(F.col("held_before").isNull()).alias("gained"),
        )
    )
    moves = per_task.groupBy(*REBALANCE).agg(F.sum(F.least("lost", "gained")).cast("int").alias("moved"))
    return streams.join(moves, on=list(REBALANCE), how="left").select(
        *REBALANCE, F.coalesce("moved", F.lit(0)).alias("moved_standby_task_count")
    )
