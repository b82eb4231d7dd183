"""Share-group backlog: silver `share_group_state` -> the share-partition state over time
(`share_partition_state`) and `share_lag` at each end-offset snapshot.

A share group has no committed offset: its position in a partition is the share-partition start offset,
and the records after it already delivered to completion are its delivery-complete count (KIP-1226).
`kafka-share-groups --describe --offsets` asks the group coordinator, which reads the share
coordinator's state summary and the partition's latest offset and answers
lag = latest offset - start offset - delivery-complete count (GroupCoordinatorService, 4.2.1 and 4.3.1),
-1 when the start offset or the count is -1; the admin client turns a start offset below 0 into no
offsets at all and a lag below 0 into none, which the tool prints as '-'. `share_lag` computes the same
from the state in force at each snapshot of ops.end_offsets.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from schemas.share_gold import share_lag_schema, share_partition_state_schema
from transforms.gold.share_replay import replay

SHARE_KEY = ("cluster", "group_id", "topic_id", "partition")
RECORD_SHARE_GROUP_STATE_PARTITION_METADATA = 15
_LOG_ORDER = ("source_partition", "source_offset")
_RECORD_COLUMNS = (
    "record_id", "record_type", "record_type_name", "is_tombstone", "snapshot_epoch", "state_epoch",
    "leader_epoch", "start_offset", "delivery_complete_count", "state_batches",
)  # fmt: skip
_REPLAYED_SCHEMA = StructType(
    [
        StructField("recorded_at_ms", LongType()) if field.name == "recorded_at" else field
        for field in share_partition_state_schema.fields
    ]
)
_TOPICS_JSON = ", ".join(
    f"{name} array<struct<topic_id: string, topic_name: string>>"
    for name in ("initializing_topics", "initialized_topics", "deleting_topics")
)


def _replay_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Rows sorted by key then log order (a key may span batches) -> one replayed row per record."""
    schema = to_arrow_schema(_REPLAYED_SCHEMA)
    rows = itertools.chain.from_iterable(batch.to_pylist() for batch in batches)
    out = []
    for _, records in itertools.groupby(rows, key=lambda row: tuple(row[name] for name in SHARE_KEY)):
        for record, state in replay(records):
            out.append(
                {
                    **{name: record[name] for name in (*SHARE_KEY, *_LOG_ORDER, "record_id", "record_type_name")},
                    "recorded_at_ms": record["record_at_ms"],
                    **state,
                }
            )
            if len(out) >= 4096:
                yield pa.RecordBatch.from_pylist(out, schema=schema)
                out = []
    yield pa.RecordBatch.from_pylist(out, schema=schema)


def share_partition_states(share_group_state: DataFrame) -> DataFrame:
    """Silver share_group_state -> share_partition_state (one row per record, the state after it)."""
    ordered = (
        share_group_state.select(
            *SHARE_KEY, *_LOG_ORDER, *_RECORD_COLUMNS, F.unix_millis("record_at").alias("record_at_ms")
        )
        .repartition(*SHARE_KEY)
        .sortWithinPartitions(*SHARE_KEY, *_LOG_ORDER)
    )
    return ordered.mapInArrow(_replay_batches, _REPLAYED_SCHEMA).select(
        *[
            F.timestamp_millis("recorded_at_ms").alias(name) if name == "recorded_at" else F.col(name)
            for name in share_partition_state_schema.names
        ]
    )


def named_topic_ids(consumer_group_records: DataFrame) -> DataFrame:
    """-> (cluster, topic_id, topic) from share groups' type 15 records: the share coordinator's own view."""
    topics = F.from_json("value_json", _TOPICS_JSON)
    return (
        consumer_group_records.where(
            (F.col("record_type") == F.lit(RECORD_SHARE_GROUP_STATE_PARTITION_METADATA)) & ~F.col("is_tombstone")
        )
        .select("cluster", topics.alias("t"))
        .select(
            "cluster",
            F.explode(
                F.concat(
                    F.coalesce("t.initializing_topics", F.array()),
                    F.coalesce("t.initialized_topics", F.array()),
                    F.coalesce("t.deleting_topics", F.array()),
                )
            ).alias("topic"),
        )
        .select("cluster", "topic.topic_id", F.col("topic.topic_name").alias("topic"))
    )


def share_topic_names(consumer_group_records: DataFrame, topic_ids: DataFrame) -> DataFrame:
    """-> one (cluster, topic_id, topic) per named id: the type 15 records' name, else the optional
    topic-id table's."""
    named = (
        named_topic_ids(consumer_group_records)
        .withColumn("trust", F.lit(1))
        .unionByName(topic_ids.select("cluster", "topic_id", "topic", F.lit(2).alias("trust")))
    )
    best = Window.partitionBy("cluster", "topic_id").orderBy("trust", "topic")
    return (
        named.where(F.col("topic_id").isNotNull() & F.col("topic").isNotNull())
        .withColumn("rank", F.row_number().over(best))
        .where(F.col("rank") == 1)
        .select("cluster", "topic_id", "topic")
    )


def broker_lag(end_offset: Column, start_offset: Column, delivery_complete_count: Column) -> Column:
    """LAG as kafka-share-groups prints it (null for '-')."""
    computed = F.when(
        (start_offset >= 0) & (delivery_complete_count != F.lit(-1)),
        end_offset - start_offset - delivery_complete_count,
    )
    return F.when(computed >= 0, computed)


def share_lag(
    states: DataFrame, end_offsets: DataFrame, names: DataFrame, stuck_after_minutes: int, redelivery_limit: int
) -> DataFrame:
    """share_partition_state + end-offset snapshots + topic names -> share_lag: at each snapshot of a
    share partition's topic partition, the latest state record at or before it (none once deleted), and
    the status rules over the snapshots before it."""
    keys = states.select(*SHARE_KEY).distinct().join(names, on=["cluster", "topic_id"], how="inner")
    state = F.struct(*[name for name in share_partition_state_schema.names if name not in SHARE_KEY])
    records = (
        states.where(F.col("recorded_at").isNotNull())
        .join(keys, on=list(SHARE_KEY), how="inner")
        .select(
            *SHARE_KEY,
            "topic",
            F.col("recorded_at").alias("at"),
            F.lit(0).alias("kind"),
            "source_offset",
            F.lit(None).cast("long").alias("end_offset"),
            state.alias("state"),
        )
    )
    snapshots = keys.join(end_offsets, on=["cluster", "topic", "partition"], how="inner").select(
        *SHARE_KEY, "topic", F.col("observed_at").alias("at"), F.lit(1).alias("kind"),
        F.lit(None).cast("long").alias("source_offset"), "end_offset",
        F.lit(None).cast(records.schema["state"].dataType).alias("state"),
    )  # fmt: skip
    # A record stamped in the snapshot's millisecond was written before the end offset was read.
    in_force = (
        Window.partitionBy(*SHARE_KEY)
        .orderBy("at", "kind", "source_offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    evaluated = (
        records.unionByName(snapshots)
        .withColumn("in_force", F.last("state", ignorenulls=True).over(in_force))
        .where((F.col("kind") == 1) & F.col("in_force").isNotNull() & ~F.col("in_force.is_deleted"))
    )
    s = "in_force."
    rows = evaluated.select(
        *SHARE_KEY[:2], "topic", "partition", F.col("at").alias("observed_at"), "topic_id", "end_offset",
        F.when(F.col(s + "start_offset") >= 0, F.col(s + "start_offset")).alias("start_offset"),
        broker_lag(F.col("end_offset"), F.col(s + "start_offset"), F.col(s + "delivery_complete_count")).alias("lag"),
        *[F.col(s + name).alias(name) for name in ("delivery_complete_count", "state_epoch", "leader_epoch")],
        *[F.col(s + name).alias(name) for name in ("in_flight_count", "acknowledged_count", "archived_count")],
        F.col(s + "max_delivery_count").alias("max_delivery_count"),
        F.col(s + "recorded_at").alias("state_recorded_at"), F.col(s + "record_id").alias("state_record_id"),
    )  # fmt: skip
    return with_status(rows, stuck_after_minutes, redelivery_limit).select(*share_lag_schema.names)


def with_status(rows: DataFrame, stuck_after_minutes: int, redelivery_limit: int) -> DataFrame:
    """A backlog's stretch: consecutive snapshots of a share partition with a lag above 0 and one start
    offset; it is stuck once it has lasted `stuck_after_minutes`."""
    by_time = Window.partitionBy(*SHARE_KEY).orderBy("observed_at")
    has_backlog = F.coalesce(F.col("lag") > 0, F.lit(False))
    continues = (
        has_backlog
        & F.coalesce(F.lag("lag").over(by_time) > 0, F.lit(False))
        & F.lag("start_offset").over(by_time).eqNullSafe(F.col("start_offset"))
    )
    stretch = F.sum(F.when(continues, 0).otherwise(1)).over(by_time.rowsBetween(Window.unboundedPreceding, 0))
    since = F.min("observed_at").over(Window.partitionBy(*SHARE_KEY, "_stretch"))
    stuck_after = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(stuck_after_minutes))
    return (
        rows.withColumn("_stretch", stretch)
        .withColumn("backlog_since", F.when(has_backlog, since))
        .withColumns(
            {
                "is_start_offset_stuck": F.coalesce(
                    F.col("backlog_since") <= F.col("observed_at") - stuck_after, F.lit(False)
                ),
                "is_redelivery_storm": F.coalesce(F.col("max_delivery_count") > redelivery_limit, F.lit(False)),
            }
        )
        .drop("_stretch")
    )
