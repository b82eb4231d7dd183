"""History as one fold per group (transforms/history), run by Spark once a night.

A night folds the groups its silver changes touch, each from the state where its last fold stopped
(jobs/history_state.py), over the records after that state and the commits from the state's
`commits_from` on; the fold's rows replace each group's rows from its frontier on. A group is folded
again from its first record, with no state, when a change lands where its state has already been: a
record at or below its last folded record (a late backup), a commit before its `commits_from` (a
transaction resolved a night later), a deleted row (`forget`), a topic id named otherwise now. A first
night, `--full`, a feed that does not reach back and a fold of another version start every group so.
Either way it is the same pass; only the states given differ.
"""

from __future__ import annotations

from collections import defaultdict

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import history_state
from jobs.assignor_replay import replay_assignors
from jobs.config import Config
from jobs.history_changes import GROUP_RECORD_TABLES, STEP, silver_at, silver_changes
from jobs.history_topic_names import commit_topic_names
from jobs.runs import JobRun
from jobs.tables import HISTORY_TABLES, SILVER_INPUTS, TOPIC_IDS, cluster_rows, ensure_table, materialized
from jobs.watermarks import CHANGE_DELETE, ChangesUnavailable, covered_versions, current_version, note
from schemas import gold, ops
from transforms.gold import epochs, offsets, touched, whatif, whatif_inputs
from transforms.gold.history_fold import (
    GROUP,
    TopicNames,
    classic_records_frame,
    folded_groups,
    folded_rows,
    history_log,
)
from transforms.history.fold import TABLES
from transforms.history.settings import HistorySettings

_POSITION = ("last_source_partition", "last_source_offset")
_NO_GROUPS = "cluster string, group_id string"


def history(spark: SparkSession, config: Config, run: JobRun) -> None:
    for name in HISTORY_TABLES:
        ensure_table(
            spark,
            config.table(name),
            gold.GOLD_SCHEMAS[name],
            partition_by=("cluster",),
            change_feed=True,
            deletion_vectors=True,
        )
    history_state.ensure_state_table(spark, config)
    until = {name: current_version(spark, config.table(name)) for name in SILVER_INPUTS}
    commit_note = note(STEP, config.cluster, until)
    silver = {name: silver_at(spark, config, name, version) for name, version in until.items()}
    commit_names, continued = commit_topic_names(
        spark, config, STEP, silver["offset_commits"], until["offset_commits"], commit_note
    )
    run.counts["commit_topic_names_continued"] = int(continued)
    topic_ids = cluster_rows(spark, config, TOPIC_IDS, ops.topic_ids_schema)
    names = materialized(epochs.topic_names(silver["consumer_group_records"], commit_names, topic_ids))
    states = _states_to_continue(spark, config, run, silver, until, names)
    commits = offsets.filter_uncounted_commits(silver["offset_commits"])
    folded = _fold(spark, silver, commits, states, config.gold_settings().history_settings(), _collected(names))
    run.counts["groups_folded"] = folded.count()
    run.progress(
        STEP,
        f"{run.counts['groups_folded']:,} groups folded, {run.counts['groups_refolded']:,} from their first record",
    )
    for name in TABLES:
        history_state.replace_from_frontiers(spark, config, name, folded, folded_rows(folded, name), commit_note)
    _replace_whatif(spark, config, folded, commit_note)
    history_state.store_states(spark, config, folded, commit_note)
    run.count_tables(HISTORY_TABLES)


def _states_to_continue(
    spark: SparkSession, config: Config, run: JobRun, silver: dict, until: dict, names: DataFrame
) -> DataFrame:
    """(GROUP, state_json, *_POSITION, commits_from, is_touched) of every group to fold: the touched
    groups' stored states, a null state for a group to fold from its first record."""
    every_group = touched.groups_of(
        silver["group_metadata"].select(*GROUP).unionByName(silver["consumer_group_records"].select(*GROUP))
    )
    covered = None if config.full else _covered(spark, config, until)
    changes = None
    if covered is not None:
        try:
            changes = silver_changes(spark, config, covered, until)
        except ChangesUnavailable as unavailable:
            run.progress(STEP, f"folding every group from its first record: {unavailable}")
    stored = history_state.stored_states(spark, config)
    if changes is None:
        groups = materialized(every_group)
        run.counts["groups_refolded"] = groups.count()
        return groups.join(stored.limit(0), on=list(GROUP), how="left")
    found = [touched.groups_of(changes[name]) for name in (*GROUP_RECORD_TABLES, "offset_commits") if name in changes]
    touched_groups = spark.createDataFrame([], _NO_GROUPS)
    for more in found:
        touched_groups = touched_groups.unionByName(more)
    generations = cluster_rows(spark, config, "generations")
    renamed = touched.groups_with_renamed_topics(generations, names)
    late = _landed_below_states(changes, stored)
    refold = materialized(
        late.unionByName(renamed).unionByName(every_group.join(stored, on=list(GROUP), how="left_anti")).distinct()
    )
    # A group with a state and no record left (forgotten) is folded from nothing: its rows and state go.
    known = every_group.unionByName(stored.select(*GROUP)).distinct()
    groups = touched_groups.unionByName(refold).distinct().join(known, on=list(GROUP), how="left_semi")
    run.counts["groups_refolded"] = refold.join(known, on=list(GROUP), how="left_semi").count()
    continued = stored.join(refold, on=list(GROUP), how="left_anti")
    return materialized(groups.join(continued, on=list(GROUP), how="left"))


def _covered(spark: SparkSession, config: Config, until: dict) -> dict[str, int] | None:
    """The silver versions every history table and the states cover (the oldest note of each input: a
    run killed part way leaves some a run ahead); None when one has no note or is ahead of silver."""
    covered: dict[str, int] = {}
    for name in (*HISTORY_TABLES, history_state.HISTORY_STATE):
        noted = covered_versions(spark, config.table(name), STEP, config.cluster)
        if noted is None or set(noted) != set(SILVER_INPUTS):
            return None
        for table, version in noted.items():
            covered[table] = min(covered.get(table, version), version)
    return None if any(covered[name] > until[name] for name in SILVER_INPUTS) else covered


def _landed_below_states(changes: dict[str, DataFrame], stored: DataFrame) -> DataFrame:
    """Groups with a change their state has already been past: a deleted row, a record at or below its
    last folded record, a commit before its `commits_from`."""
    found = stored.select(*GROUP).limit(0)
    for name, rows in changes.items():
        joined = rows.join(stored, on=list(GROUP), how="inner")
        below = F.col("_change_type") == F.lit(CHANGE_DELETE)
        if name == "offset_commits":
            below = below | (F.col("record_at") < F.col("commits_from"))
        elif name != "group_members":
            position = F.struct("source_partition", "source_offset")
            below = below | (position <= F.struct(*[F.col(column) for column in _POSITION]))
        found = found.unionByName(joined.where(below).select(*GROUP))
    return found.distinct()


def _fold(
    spark: SparkSession,
    silver: dict,
    commits: DataFrame,
    states: DataFrame,
    settings: HistorySettings,
    names: TopicNames,
) -> DataFrame:
    """Every group of `states` folded (one mapInArrow pass), held: each table's MERGE reads it."""
    after_state = F.col("last_source_offset").isNull() | (
        F.struct("source_partition", "source_offset") > F.struct(*[F.col(column) for column in _POSITION])
    )
    positions = states.select(*GROUP, *_POSITION, "commits_from")

    def new_rows(rows: DataFrame) -> DataFrame:
        return (
            rows.join(F.broadcast(positions), on=list(GROUP), how="inner")
            .where(after_state)
            .drop(*_POSITION, "commits_from")
        )

    metadata = new_rows(silver["group_metadata"])
    members = silver["group_members"].join(metadata.select("record_id"), on="record_id", how="left_semi")
    records = classic_records_frame(metadata, members)
    epoch_records = new_rows(silver["consumer_group_records"])
    read_from = F.col("commits_from").isNull() | (F.col("record_at") >= F.col("commits_from"))
    group_commits = commits.join(F.broadcast(positions), on=list(GROUP), how="inner").where(
        read_from & (F.col("commits_from").isNotNull() | after_state)
    )
    log = history_log(records, group_commits, states, epoch_records)
    folded = materialized(folded_groups(log, settings, names))
    if not folded.where("needs_refold").isEmpty():
        raise RuntimeError("a group's new records came before its state, past the changes read: not expected")
    return folded


def _collected(names: DataFrame) -> TopicNames:
    collected: TopicNames = defaultdict(dict)
    for row in names.collect():
        collected[row["cluster"]][row["topic_id"]] = (row["topic"], row["topic_name_source"])
    return dict(collected)


def _replace_whatif(spark: SparkSession, config: Config, folded: DataFrame, commit_note: str) -> None:
    """The night's rebalances replayed through Kafka's assignors (one JVM call), beside their generations
    as the table now holds them (a rebalance's generation before it may lie below its frontier)."""
    rebalances = folded_rows(folded, "rebalances")
    generations = cluster_rows(spark, config, "generations").join(
        folded.select(*GROUP), on=list(GROUP), how="left_semi"
    )
    replay = materialized(whatif_inputs.replay_inputs(rebalances, generations))
    rows = whatif.rebalance_whatif(replay, replay_assignors(replay), rebalances)
    history_state.replace_from_frontiers(spark, config, "rebalance_whatif", folded, rows, commit_note)
