"""Spark's part of the history fold (transforms/history): every group's log through the fold in one pass.

A group's log is its stored state (if any), its records (classic `group_metadata` rows with their members,
or `consumer_group_records` rows) and its counted commits. They go into one frame,
ordered by group and, within it, state first, then log order (`history_log`), and one `mapInArrow`
pass folds each group (`folded_groups`): one output row per group, with its rows for every history
table (an array per table, typed as gold declares it), the key from which they replace the group's
stored rows (`Rows.frontier`, `Rows.frequency_from`) and its new state as JSON. A group whose new
records do not all come after its state (a late backup, a transaction resolved later, `forget`) gets no
rows and `needs_refold`: its caller folds it again from all its silver records and no state. So a
first night, a continuing night and `--full` are one pass that differs only in the states it is given.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, BooleanType, IntegerType, LongType, StringType, StructType, TimestampType

from schemas import gold
from schemas.columns import column
from transforms.history.fold import TABLES, State, fold
from transforms.history.records import MEMBER_FIELDS, RECORD_FIELDS, classic_records, consumer_records
from transforms.history.settings import HistorySettings

GROUP = ("cluster", "group_id")
KIND_STATE, KIND_RECORD, KIND_COMMIT, KIND_EPOCH_RECORD = 0, 1, 2, 3
# cluster -> topic id -> (topic, topic_name_source): transforms/gold/topic_names.py's rows, collected.
TopicNames = dict[str, dict[str, tuple[str, str]]]
_LOG_ORDER = ("source_partition", "source_offset")
_MEMBER_COLUMNS = ("member_index", *MEMBER_FIELDS, "assigned_partitions")

FOLDED_SCHEMA = StructType(
    [
        column("cluster", StringType(), False),
        column("group_id", StringType(), False),
        column("needs_refold", BooleanType(), False),
        column("not_folded", StringType()),  # why the fold refused the group (a kind it does not fold yet)
        # the group's stored rows at and after this key give way to these (null: all of them)
        column("frontier_incarnation", IntegerType()),
        column("frontier_generation", IntegerType()),
        column("frequency_from", TimestampType()),
        column("state_json", StringType()),
        # the new state's, for the state table's columns (jobs/history_state.py)
        column("last_source_partition", IntegerType()),
        column("last_source_offset", LongType()),
        column("commits_from", TimestampType()),
        *[column(name, ArrayType(gold.GOLD_SCHEMAS[name])) for name in TABLES],
    ]
)


def classic_records_frame(group_metadata: DataFrame, group_members: DataFrame) -> DataFrame:
    """Silver group_metadata + group_members -> one row per group record with its members in order."""
    members = group_members.groupBy("record_id").agg(
        F.array_sort(F.collect_list(F.struct(*_MEMBER_COLUMNS))).alias("members")
    )
    return group_metadata.select(*RECORD_FIELDS).join(members, on="record_id", how="left")


def history_log(
    records: DataFrame, commits: DataFrame, states: DataFrame, epoch_records: DataFrame | None = None
) -> DataFrame:
    """records (classic_records_frame), counted commits (GROUP, topic, partition, record_at: every one, or
    transforms/gold/commit_summary.as_commits),
    states (GROUP, state_json) and silver `consumer_group_records` rows -> one frame, each group's rows
    together: state, then log order."""
    parts = [
        states.select(*GROUP, "state_json").withColumn("kind", F.lit(KIND_STATE)),
        records.withColumn("kind", F.lit(KIND_RECORD)),
        commits.select(*GROUP, "topic", "partition", "record_at").withColumn("kind", F.lit(KIND_COMMIT)),
    ]
    if epoch_records is not None:
        epoch_record = F.struct(*epoch_records.columns).alias("epoch_record")
        parts.append(
            epoch_records.select(*GROUP, *_LOG_ORDER, epoch_record).withColumn("kind", F.lit(KIND_EPOCH_RECORD))
        )
    log = parts[0]
    for part in parts[1:]:
        log = log.unionByName(part, allowMissingColumns=True)
    return log.repartition(*GROUP).sortWithinPartitions(*GROUP, "kind", *_LOG_ORDER)


def folded_groups(log: DataFrame, settings: HistorySettings, topic_names: TopicNames | None = None) -> DataFrame:
    """history_log's frame -> one FOLDED_SCHEMA row per group (KIP-848 partitions named by `topic_names`)."""
    return log.mapInArrow(_fold_batches(settings, topic_names or {}), FOLDED_SCHEMA)


def folded_rows(folded: DataFrame, table: str) -> DataFrame:
    """One history table's rows out of folded_groups' frame."""
    return folded.select(F.explode(table).alias("row")).select("row.*")


def _fold_batches(
    settings: HistorySettings, topic_names: TopicNames
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def fold_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema = to_arrow_schema(FOLDED_SCHEMA, timezone="UTC")
        rows = itertools.chain.from_iterable(batch.to_pylist() for batch in batches)
        out = []
        for group, log in itertools.groupby(rows, key=lambda row: tuple(row[name] for name in GROUP)):
            out.append(_fold_group(group, list(log), settings, topic_names.get(group[0], {})))
            if len(out) >= 256:
                yield pa.RecordBatch.from_pylist(out, schema=schema)
                out = []
        yield pa.RecordBatch.from_pylist(out, schema=schema)

    return fold_batches


def _log_position(record: dict) -> tuple:
    return tuple(record[name] for name in _LOG_ORDER)


def _fold_group(group: tuple, log: list[dict], settings: HistorySettings, topic_names: dict) -> dict:
    # A group to fold from its first record has a state row too, with no state: one left with no record
    # (forgotten) is still folded, to nothing.
    stored = [row["state_json"] for row in log if row["kind"] == KIND_STATE and row["state_json"] is not None]
    state = State.from_dict(json.loads(stored[0])) if stored else None
    record_rows = [row for row in log if row["kind"] == KIND_RECORD]
    member_rows = [{**member, "record_id": row["record_id"]} for row in record_rows for member in row["members"] or []]
    epoch_records = consumer_records(row["epoch_record"] for row in log if row["kind"] == KIND_EPOCH_RECORD)
    # One log: a group converted between protocols has both kinds in its one partition of the topic.
    records = sorted([*classic_records(record_rows, member_rows), *epoch_records], key=_log_position)
    commits = [
        (row["topic"], row["partition"], row["record_at"])
        for row in log
        if row["kind"] == KIND_COMMIT
        and (state is None or not state.commits_from or row["record_at"] >= state.commits_from)
    ]
    unchanged = {"cluster": group[0], "group_id": group[1], "state_json": stored[0] if stored else None}
    try:
        rows, new_state = fold(state, records, commits, settings, topic_names)
    except ValueError as refused:
        if state is None:  # the group is left as its tables hold it, and the caller says why
            return {**unchanged, "needs_refold": False, "not_folded": str(refused), **{name: [] for name in TABLES}}
        # a record at or below the state's last position: fold the group again from scratch
        return {**unchanged, "needs_refold": True, **{name: [] for name in TABLES}}
    frontier = rows.frontier or {}
    last_position = (new_state.last_position if new_state is not None else None) or [None, None]
    return {
        **unchanged,
        "needs_refold": False,
        "frontier_incarnation": frontier.get("incarnation"),
        "frontier_generation": frontier.get("generation"),
        "frequency_from": rows.frequency_from,
        "state_json": None if new_state is None else json.dumps(new_state.to_dict()),
        "last_source_partition": last_position[0],
        "last_source_offset": last_position[1],
        "commits_from": None if new_state is None else new_state.commits_from,
        **rows.tables,
    }
