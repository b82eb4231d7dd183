"""Delta table schemas of the ops layer: what the jobs record about their runs, and the inputs gold
reads besides silver (end-offset snapshots, topic ids).

Each constant states its grain. Timestamps are Spark TIMESTAMPs (UTC) ending in `_at`.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from schemas.columns import column

# ops: one run of a job, with the counts that prove nothing was lost.
job_runs_schema = StructType(
    [
        column("run_id", StringType(), False),
        column("job", StringType(), False),
        column("cluster", StringType()),
        column("started_at", TimestampType(), False),
        column("finished_at", TimestampType()),
        column("outcome", StringType(), False),  # succeeded | failed | refused (another run held the lock)
        column("inputs", ArrayType(StringType())),
        column("raw_count", LongType()),
        column("decoded_count", LongType()),
        column("quarantined_count", LongType()),
        column("counts_json", StringType()),  # per-table and per-stage counts
        column("message", StringType()),
        column("duration_seconds", DoubleType()),
        column("run_date", DateType()),  # --run-date, when given
    ]
)

# ops: one end-offset (log end offset) snapshot of one partition, e.g. from AdminClient.listOffsets
# (OffsetSpec.latest) taken by a capture job. The lag and status metrics are evaluated at these times.
end_offsets_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
        column("end_offset", LongType(), False),
        column("observed_at", TimestampType(), False),
    ]
)

# ops: one topic id -> name pair for KIP-848 assignments (keyed by topic id). Provided by the user or
# listed from the cluster at capture time (`source` = 'user' | 'cluster').
topic_ids_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("topic_id", StringType(), False),  # Kafka's base64 Uuid form, as in consumer_group_records
        column("topic", StringType(), False),
        column("source", StringType(), False),
    ]
)

# ops: a topic id -> name pair that offset commits of the cluster carry (v4 commits name the topic and
# its id); kept by the history step (jobs/history_topic_names.py) so a night reads only its own commits.
commit_topic_names_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("topic_id", StringType(), False),
        column("topic", StringType(), False),
    ]
)

# ops: what raw_records holds from one segment file of one cluster (jobs.ingest_plan.FileState), as of
# the raw_records version its commit's note names; kept by jobs/file_states.py.
file_states_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("source_file", StringType(), False),
        column("last_batch_position", LongType()),
        column("last_batch_base_offset", LongType()),
        column("is_last_batch_readable", BooleanType()),
        column("first_pending_position", LongType()),
        column("max_offset", LongType()),
    ]
)

# ops: where one group's history fold stopped (transforms/history: its State as JSON), one row per group
# of a cluster; written by the history step after the night's rows, so a run killed before it folds the
# same records again from the same state. `fold_version`: a state of another version is not read (the
# group is folded from its first record). `last_source_offset`: of the last group record folded (a group's
# records and commits share one __consumer_offsets partition); `commits_from`: the earliest commit time
# the next fold reads.
history_state_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("fold_version", IntegerType(), False),
        column("last_source_partition", IntegerType()),
        column("last_source_offset", LongType()),
        column("commits_from", TimestampType()),
        column("state_json", StringType(), False),
    ]
)

# ops: one group's counted commits of one partition between two times at which history reads commits
# (transforms/gold/commit_summary.py): the first and the last. `interval_start`: the time that opens the
# interval, null before the group's first. Kept by jobs/commit_summaries.py.
commit_summary_schema = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("topic", StringType(), False),
        column("partition", IntegerType(), False),
        column("interval_start", TimestampType()),
        column("first_at", TimestampType(), False),
        column("last_at", TimestampType(), False),
    ]
)
