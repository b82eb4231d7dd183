"""Tiny silver inputs for the gold tests: rows by keyword, every other column null.

Times are seconds after a pinned instant (T0), so a test reads `at(12.5)` rather than a timestamp.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from schemas import silver

CLUSTER = "c1"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def row(schema: StructType, **values) -> tuple:
    unknown = set(values) - set(schema.names)
    assert not unknown, f"not in the schema: {unknown}"
    return tuple(values.get(name) for name in schema.names)


def origin(offset: int, seconds: float, partition: int = 0) -> dict:
    return {
        "cluster": CLUSTER,
        "record_id": f"{CLUSTER}/{partition}/{offset}",
        "source_partition": partition,
        "source_offset": offset,
        "record_at": at(seconds),
    }


def frame(spark: SparkSession, schema: StructType, rows: list[dict]) -> DataFrame:
    return spark.createDataFrame([row(schema, **values) for values in rows], schema)


def commit(offset: int, seconds: float, group: str, topic: str, partition: int, committed: int | None, **extra):
    """One offset_commits row; committed=None is a tombstone."""
    return {
        **origin(offset, seconds),
        "group_id": group,
        "topic": topic,
        "partition": partition,
        "is_tombstone": committed is None,
        "committed_offset": committed,
        "committed_at": None if committed is None else at(seconds),
        "record_type": 1,
        **extra,
    }


def commits(spark: SparkSession, rows: list[dict]) -> DataFrame:
    return frame(spark, silver.offset_commits_schema, rows)


def partitions_text(assigned: Column) -> Column:
    """[{topic, partitions}] -> 'orders:0,1 stock:0' (readable, and comparable without nested schemas)."""
    return F.array_join(
        F.transform(assigned, lambda tp: F.concat(tp["topic"], F.lit(":"), F.array_join(tp["partitions"], ","))), " "
    )


def members_text(members: Column) -> Column:
    """members -> 'a=orders:0 stock:0; b=orders:1' in member order."""
    return F.array_join(
        F.transform(members, lambda m: F.concat(m["member_id"], F.lit("="), partitions_text(m["assigned_partitions"]))),
        "; ",
    )


def group_record(group, offset, seconds, generation, members=(), assignor="range", joined_at=None, **extra):
    """A classic group record (type 2) and its member rows; generation=None is a tombstone.

    members: (member_id, group_instance_id, subscribed_topics, {topic: [partitions]}) tuples.
    """
    metadata = {
        **origin(offset, seconds),
        "group_id": group,
        "is_tombstone": generation is None,
        "generation": generation,
        "protocol_type": None if generation is None else "consumer",
        "protocol": assignor if members else None,
        "state_changed_at": None if generation is None else at(seconds if joined_at is None else joined_at),
        "member_count": None if generation is None else len(members),
        **extra,
    }
    rows = [
        {
            **origin(offset, seconds),
            "group_id": group,
            "generation": generation,
            "member_index": index,
            "member_id": member_id,
            "group_instance_id": instance,
            "client_id": f"client-{member_id}",
            "client_host": "/10.0.0.1",
            "session_timeout_ms": 6000,
            "rebalance_timeout_ms": 30000,
            "subscribed_topics": topics,
            "assigned_partitions": sorted(assignment.items()),
        }
        for index, (member_id, instance, topics, assignment) in enumerate(members)
    ]
    return metadata, rows


def group_tables(spark: SparkSession, records: list[tuple[dict, list[dict]]]) -> tuple[DataFrame, DataFrame]:
    """(group_metadata, group_members) silver frames from group_record() results."""
    metadata = frame(spark, silver.group_metadata_schema, [record for record, _ in records])
    members = frame(spark, silver.group_members_schema, [member for _, rows in records for member in rows])
    return metadata, members


def map_text(values: Column) -> Column:
    """{'stock': 1, 'orders': 0} -> 'orders:0 stock:1' (maps cannot be sorted or hashed by Spark)."""
    return F.array_join(
        F.transform(F.array_sort(F.map_entries(values)), lambda e: F.concat(e["key"], F.lit(":"), e["value"])), " "
    )
