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
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import commit_summaries, history_notes, history_state
from jobs.assignor_replay import replay_assignors
from jobs.config import Config, GoldSettings
from jobs.history_changes import GROUP_RECORD_TABLES, STEP, silver_at, silver_changes
from jobs.history_topic_names import commit_topic_names
from jobs.runs import JobRun
from jobs.tables import (
    HISTORY_TABLES,
    SILVER_INPUTS,
    TOPIC_IDS,
    cluster_rows,
    ensure_table,
    materialized,
    table_location,
)
from jobs.watermarks import CHANGE_DELETE, ChangesUnavailable, current_version, note, write_noted
from schemas import gold, ops
from transforms.gold import commit_summary, offsets, renamed_topics, topic_names, whatif, whatif_inputs
from transforms.gold.history_fold import (
    GROUP,
    TopicNames,
    classic_records_frame,
    folded_groups,
    folded_rows,
    history_log,
)
from transforms.history.fold import FOLD_VERSION, TABLES
from transforms.history.settings import HistorySettings

_POSITION = ("last_source_partition", "last_source_offset")
WRITTEN_TABLES = (*TABLES, "rebalance_whatif")
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
    commit_summaries.ensure_summary_table(spark, config)
    until = {name: current_version(spark, config.table(name)) for name in SILVER_INPUTS}
    details = {"fold_version": FOLD_VERSION, "topic_ids_version": history_notes.topic_ids_version(spark, config)}
    commit_note = note(STEP, config.cluster, until, **details)
    noted_tables = (*WRITTEN_TABLES, history_state.HISTORY_STATE, commit_summaries.TABLE)
    noted = None if config.full else history_notes.newest_notes(spark, config, noted_tables)
    if noted is not None and history_notes.is_unchanged(noted, until, details):
        run.counts.update(commit_topic_names_continued=1, groups_folded=0, groups_refolded=0, groups_not_folded=0)
        run.progress(STEP, "no input changed since the versions every table notes: no group to fold")
        return
    silver = {name: silver_at(spark, config, name, version) for name, version in until.items()}
    commit_names, continued = commit_topic_names(
        spark, config, STEP, silver["offset_commits"], until["offset_commits"], commit_note
    )
    run.counts["commit_topic_names_continued"] = int(continued)
    topic_ids = cluster_rows(spark, config, TOPIC_IDS, ops.topic_ids_schema)
    names = materialized(topic_names.topic_names(silver["consumer_group_records"], commit_names, topic_ids))
    changes = _changes(spark, config, run, noted, until)
    summary = commit_summaries.refresh(spark, config, silver, changes, commit_note)
    states = _states_to_continue(spark, config, run, silver, changes, names)
    folded = fold_groups(silver, summary, states, config.gold_settings().history_settings(), collected_names(names))
    refused = folded.where(F.col("not_folded").isNotNull()).select(*GROUP, "not_folded").collect()
    for group in refused:  # its rows and state stay as they are: a later groupscope folds it
        run.progress(
            STEP, f"group {group['group_id']!r} not folded, its tables left as they were: {group['not_folded']}"
        )
    run.counts["groups_not_folded"] = len(refused)
    folded = folded.where(F.col("not_folded").isNull())
    run.counts["groups_folded"] = folded.count()
    run.progress(
        STEP,
        f"{run.counts['groups_folded']:,} groups folded, {run.counts['groups_refolded']:,} from their first record",
    )
    if run.counts["groups_folded"] == 0:  # nothing to replace: each table's note moves on, in an empty commit
        for name in (*WRITTEN_TABLES, history_state.HISTORY_STATE):
            empty = spark.createDataFrame([], spark.table(config.table(name)).schema)
            write_noted(empty, table_location(spark, config.table(name)), commit_note)
        return
    if changes is None and not refused:  # every group of the cluster, folded from its first record
        _replace_cluster(spark, config, run, folded, commit_note)
        return
    for name in TABLES:
        history_state.replace_from_frontiers(spark, config, name, folded, folded_rows(folded, name), commit_note)
    _replace_whatif(spark, config, folded, commit_note)
    history_state.store_states(spark, config, folded, commit_note)
    run.count_tables(HISTORY_TABLES)


def _replace_cluster(spark: SparkSession, config: Config, run: JobRun, folded: DataFrame, commit_note: str) -> None:
    """Every table's rows of the cluster replaced by the fold's (every group's, from its first record),
    counted from the held rows rather than read back."""
    for name in TABLES:
        history_state.replace_cluster(spark, config, name, folded_rows(folded, name), commit_note)
    whatif = materialized(whatif_rows(folded_rows(folded, "rebalances"), folded_rows(folded, "generations")))
    history_state.replace_cluster(spark, config, "rebalance_whatif", whatif, commit_note)
    history_state.replace_cluster_states(spark, config, folded, commit_note)
    written = folded.select(*[F.sum(F.size(name)).alias(name) for name in TABLES]).first().asDict()
    written["rebalance_whatif"] = whatif.count()
    run.record_counts({name: written[name] or 0 for name in HISTORY_TABLES})


def _changes(
    spark: SparkSession, config: Config, run: JobRun, noted: dict | None, until: dict
) -> dict[str, DataFrame] | None:
    """Silver's rows changed since the versions the history tables cover; None: fold every group anew."""
    covered = None if noted is None else history_notes.covered(noted, until)
    if covered is None:
        return None
    try:
        return silver_changes(spark, config, covered, until)
    except ChangesUnavailable as unavailable:
        run.progress(STEP, f"folding every group from its first record: {unavailable}")
        return None


def _states_to_continue(
    spark: SparkSession, config: Config, run: JobRun, silver: dict, changes: dict | None, names: DataFrame
) -> DataFrame:
    """(GROUP, state_json, *_POSITION, commits_from) of every group to fold: the touched groups' stored
    states, a null state for a group to fold from its first record."""
    every_group = _groups_of(silver)
    stored = history_state.stored_states(spark, config)
    if changes is None:
        groups = materialized(every_group)
        run.counts["groups_refolded"] = groups.count()
        return _with_no_state(groups)
    found = [changes[name].select(*GROUP) for name in (*GROUP_RECORD_TABLES, "offset_commits") if name in changes]
    touched_groups = spark.createDataFrame([], _NO_GROUPS)
    for more in found:
        touched_groups = touched_groups.unionByName(more)
    generations = cluster_rows(spark, config, "generations")
    renamed = renamed_topics.groups_with_renamed_topics(generations, names)
    late = _landed_below_states(changes, stored)
    refold = _held_groups(
        late.unionByName(renamed).unionByName(every_group.join(stored, on=list(GROUP), how="left_anti")).distinct()
    )
    # A group with a state and no record left (forgotten) is folded from nothing: its rows and state go.
    known = every_group.unionByName(stored.select(*GROUP)).distinct()
    groups = touched_groups.unionByName(refold).distinct().join(known, on=list(GROUP), how="left_semi")
    run.counts["groups_refolded"] = refold.join(known, on=list(GROUP), how="left_semi").count()
    continued = stored.join(refold, on=list(GROUP), how="left_anti")
    return materialized(groups.join(continued, on=list(GROUP), how="left"))


def _held_groups(groups: DataFrame) -> DataFrame:
    """`groups` (GROUP) computed once; aliased, as a join back with the frames they came from is a
    self-join Spark cannot resolve once they are held."""
    return materialized(groups).select(*[F.col(name).alias(name) for name in GROUP])


def _with_no_state(groups: DataFrame) -> DataFrame:
    """The groups, each to fold from its first record (the columns of a stored state, null)."""
    return groups.select(
        *GROUP,
        F.lit(None).cast("string").alias("state_json"),
        F.lit(None).cast("int").alias("last_source_partition"),
        F.lit(None).cast("bigint").alias("last_source_offset"),
        F.lit(None).cast("timestamp").alias("commits_from"),
    )


def _groups_of(silver: Mapping[str, DataFrame]) -> DataFrame:
    return (
        silver["group_metadata"].select(*GROUP).unionByName(silver["consumer_group_records"].select(*GROUP)).distinct()
    )


def history_from_scratch(
    silver: Mapping[str, DataFrame], topic_ids: DataFrame, settings: GoldSettings
) -> dict[str, DataFrame]:
    """Every group of `silver` folded from its first record, with no table read or written: each history
    table's rows (tests/lab_tables.py builds the lab's tables so)."""
    names = materialized(topic_names.topic_names(silver["consumer_group_records"], silver["offset_commits"], topic_ids))
    at = commit_summary.boundaries(silver["group_metadata"], silver["consumer_group_records"])
    summary = commit_summary.summarized(offsets.filter_uncounted_commits(silver["offset_commits"]), at)
    states = _with_no_state(_groups_of(silver))
    folded = fold_groups(silver, summary, states, settings.history_settings(), collected_names(names))
    tables = {name: folded_rows(folded, name) for name in TABLES}
    tables["rebalance_whatif"] = whatif_rows(tables["rebalances"], tables["generations"])
    return tables


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


def fold_groups(
    silver: dict, summary: DataFrame, states: DataFrame, settings: HistorySettings, names: TopicNames
) -> DataFrame:
    """Every group of `states` (GROUP, state_json, *_POSITION, commits_from; a null state: from its first
    record) folded over its silver records after its state and its commit summary's intervals from
    `commits_from` on, in one mapInArrow pass; held, as each table's MERGE reads it."""
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
    # No state, or one whose fold reads no commit before its new records: every interval (more than it
    # reads is harmless: it reads by time).
    read_from = F.col("commits_from").isNull() | (F.col("last_at") >= F.col("commits_from"))
    group_commits = commit_summary.as_commits(
        summary.join(F.broadcast(positions.select(*GROUP, "commits_from")), on=list(GROUP), how="inner").where(
            read_from
        )
    )
    log = history_log(records, group_commits, states, epoch_records)
    folded = materialized(folded_groups(log, settings, names))
    if not folded.where("needs_refold").isEmpty():
        raise RuntimeError("a group's new records came before its state, past the changes read: not expected")
    return folded


def collected_names(names: DataFrame) -> TopicNames:
    collected: TopicNames = defaultdict(dict)
    for row in names.collect():
        collected[row["cluster"]][row["topic_id"]] = (row["topic"], row["topic_name_source"])
    return dict(collected)


def _replace_whatif(spark: SparkSession, config: Config, folded: DataFrame, commit_note: str) -> None:
    """The night's rebalances replayed beside their generations as the table now holds them (a
    rebalance's generation before it may lie below its frontier)."""
    of_groups = cluster_rows(spark, config, "generations").join(folded.select(*GROUP), on=list(GROUP), how="left_semi")
    rows = whatif_rows(folded_rows(folded, "rebalances"), of_groups)
    history_state.replace_from_frontiers(spark, config, "rebalance_whatif", folded, rows, commit_note)


def whatif_rows(rebalances: DataFrame, generations: DataFrame) -> DataFrame:
    """`rebalances` replayed through Kafka's assignors, one JVM call for all (whatif.py)."""
    replay = materialized(whatif_inputs.replay_inputs(rebalances, generations))
    return whatif.rebalance_whatif(replay, replay_assignors(replay), rebalances)
