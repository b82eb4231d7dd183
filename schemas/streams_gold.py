"""Delta table schema of streams groups' members (gold, transforms/history/streams.py).

`streams_members`: one row per member of each epoch of a streams group (KIP-1071), the columns
`kafka-streams-groups --describe --members --verbose` prints that the generations' shape has none for.
Key: cluster, group_id, incarnation, generation, member_id (as `generations` and its `members`).
"""

from __future__ import annotations

from pyspark.sql.types import ArrayType, IntegerType, LongType, MapType, StringType, StructType, TimestampType

from schemas.columns import column

TASK_KINDS = ("active", "standby", "warmup")

# One subtopology's tasks: a task is (subtopology id, partition), as Kafka Streams numbers them.
TASKS = ArrayType(StructType([column("subtopology_id", StringType()), column("partitions", ArrayType(IntegerType()))]))

streams_members_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("incarnation", IntegerType(), False),
        column("generation", IntegerType(), False),  # the target-assignment epoch (generations.generation)
        column("member_id", StringType(), False),
        column("client_id", StringType()),
        # from the member's last current assignment (type 22) in the epoch; null when it has none yet
        column("member_epoch", IntegerType()),
        # from the member metadata (type 19) the generation's members were read from
        column("topology_epoch", IntegerType()),
        column("process_id", StringType()),  # the Kafka Streams instance (one process, several threads)
        column("user_endpoint", StringType()),  # host:port for interactive queries; null when not set
        column("client_tags", MapType(StringType(), StringType())),  # rack-aware standby placement tags
        # (type 22) sorted by subtopology id, partitions ascending; active tasks are what the member owns
        # (generations.members.assigned_partitions), standby and warm-up tasks keep state stores warm
        column("active_tasks", TASKS, False),
        column("standby_tasks", TASKS, False),
        column("warmup_tasks", TASKS, False),
        column("recorded_at", TimestampType(), False),  # the generation's
        column("source_partition", IntegerType()),
        column("source_offset", LongType()),  # the generation's target-assignment record
    ]
)

STREAMS_SCHEMAS = {"streams_members": streams_members_schema}
