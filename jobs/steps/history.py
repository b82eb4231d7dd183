"""History: silver group records -> gold generations, assignments, rebalances, movements, frequency, the
what-if replay of every rebalance through Kafka's assignors, idle capacity, and streams groups' members.

Incremental: each gold table's commits note the silver versions its rows cover (jobs/watermarks.py). A
run reads what changed in silver since then (Change Data Feed), finds the groups those changes can alter
(transforms/gold/touched.py), recomputes just those groups and replaces just their rows; every other
group keeps its rows. A touched group is framed again from a row of the table on, its rows before that
kept (transforms/gold/frames.py; a KIP-848, share or streams group's open holdings in them patched:
epoch_frames.py). Settled rebalances are kept as the table
holds them and the others read only the commits from where their readings start
(transforms/gold/resume.py): the commits, nearly every record, are read for the night's stretch of
history, not for all of it. The kept rebalances' rows and the generations kept, with their assignments
and capacity, stay where the tables hold them, not written again (jobs/history_writes.py). With no note,
a feed that does not reach back, or `--full`, the cluster is rebuilt from scratch (and noted).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import history_writes
from jobs.assignor_replay import replay_assignors
from jobs.config import Config, GoldSettings
from jobs.history_changes import (
    GROUP_RECORD_TABLES,
    STEP,
    covered_silver_versions,
    silver_at,
    silver_changes,
    touched_groups,
)
from jobs.history_commits import commit_times_read_by
from jobs.history_topic_names import commit_topic_names
from jobs.runs import JobRun
from jobs.tables import (
    HISTORY_TABLES,
    SILVER_INPUTS,
    TOPIC_IDS,
    Materialize,
    cluster_rows,
    ensure_table,
    held_on_disk,
    materialized,
    table_location,
)
from jobs.watermarks import (
    ChangesUnavailable,
    current_version,
    note,
    write_noted,
)
from schemas import gold, ops
from transforms.gold import (
    assignment_math,
    departures,
    epoch_frames,
    epoch_patches,
    epochs,
    frames,
    frequency,
    generations,
    idle,
    offsets,
    rebalances,
    resume,
    streams_members,
    touched,
    whatif,
    whatif_inputs,
)
from transforms.gold.generations import GROUP, REBALANCE


def build_history(
    silver: Mapping[str, DataFrame],
    topic_ids: DataFrame,
    settings: GoldSettings,
    store: Materialize | history_writes.Store,
    groups: DataFrame | None = None,
    topic_names: DataFrame | None = None,
    settled: DataFrame | None = None,
    silent: DataFrame | None = None,
    taken_up: frames.TakenUp | None = None,
    progress: Callable[[str], None] = lambda detail: None,
) -> None:
    """Silver `offset_commits`, `group_metadata`, `group_members`, `consumer_group_records` (any clusters)
    -> every table of HISTORY_TABLES, handed to `store` in dependency order.

    `groups` (cluster, group_id): only these groups' history; topic ids are still named from every
    group's records (`topic_names`, epochs.topic_names over all of `silver` when not given). `settled`:
    rebalances kept as the tables hold them (transforms/gold/resume.py); the others read commits from
    their groups' floors, past the spans `silent` (`progress` hears from where). `taken_up`: groups
    framed from a row of the table on (transforms/gold/frames.py). With `settled`, `store` is a
    history_writes.Store: the rows kept stay in their tables and only the others are handed to it."""
    offset_commits, group_records = silver["offset_commits"], silver["consumer_group_records"]
    taken_up = taken_up or frames.nothing_taken_up(offset_commits.sparkSession)
    names = epochs.topic_names(group_records, offset_commits, topic_ids) if topic_names is None else topic_names
    if groups is not None:
        # Broadcast: a shuffle of every commit read to keep a few groups' was most of the step's time. With
        # `settled`, the commits are read by their groups' floors, a join of its own: joined with the groups
        # too, every commit read paid for a lookup more (about a second at the bench's night 7).
        listed = F.broadcast(groups)
        silver = {
            name: rows
            if name == "offset_commits" and settled is not None
            else rows.join(listed, on=list(GROUP), how="left_semi")
            for name, rows in silver.items()
        }
    # The group records are read by many plans below: held once, not scanned from Delta by each. Held on
    # disk, as the other large frames here: in the heap they took a 50M-record night's aggregations' memory.
    silver = {name: held_on_disk(rows) if name in GROUP_RECORD_TABLES else rows for name, rows in silver.items()}
    offset_commits, group_records = silver["offset_commits"], silver["consumer_group_records"]
    classic = generations.classic_generations(
        *(frames.in_frames(silver[name], taken_up.frames) for name in ("group_metadata", "group_members"))
    )
    epoch_group_records = group_records
    if taken_up.epochs is not None:
        epoch_group_records = held_on_disk(
            epoch_frames.in_epoch_frames(group_records, taken_up.epochs, taken_up.prefix)
        )
    computed_generations = frames.continued(
        classic.unionByName(epochs.consumer_group_generations(epoch_group_records, names)), taken_up.frames
    )
    kept_generations = generations_kept = assignments_kept = None
    assignment_frames = taken_up.frames
    if settled is not None:
        kept_generations = generations_kept = assignments_kept = taken_up.kept_generations()
    if taken_up.epochs is not None:
        framed_epoch_records = epochs.epoch_records(
            epoch_group_records.join(taken_up.epochs.select(*GROUP), on=list(GROUP), how="left_semi")
        )
        patched = held_on_disk(
            epoch_patches.patched_rows(taken_up.generations, taken_up.epochs, framed_epoch_records, group_records)
        )
        computed_generations = computed_generations.unionByName(patched)
        generations_kept = frames.without_keys(kept_generations, patched.select(*REBALANCE))
        assignment_frames = epoch_frames.assignment_frames(taken_up.frames, taken_up.epochs)
        assignments_kept = frames.before_frames(taken_up.generations, assignment_frames).select(*REBALANCE)
    gens = _store_beside(store, "generations", computed_generations, generations_kept)
    framed_gens = held_on_disk(frames.in_frames(gens, taken_up.frames))
    assignments = _store_beside(
        store,
        "generation_assignments",
        generations.explode_generation_assignments(frames.in_frames(gens, assignment_frames)),
        assignments_kept,
    )
    framed = held_on_disk(
        rebalances.logical_rebalances(
            framed_gens,
            assignments.join(framed_gens.select(*REBALANCE), on=list(REBALANCE), how="left_semi"),
            settings.cooperative_round_gap_ms,
        )
    )
    # A streams epoch's members read the records before its end: the frame's, with its prefix, hold them.
    members = _store_beside(
        store, "streams_members", streams_members.streams_members(framed_gens, epoch_group_records), kept_generations
    )
    commits = offsets.filter_uncounted_commits(offset_commits)
    member_own_records = epochs.member_own_records(group_records)
    if settled is None:
        to_compute, kept = framed, None
        # The commit times the departures and pauses read, in one pass over the commits and held: few rows.
        probed = commits.join(F.broadcast(to_compute.select(*GROUP).distinct()), on=list(GROUP), how="left_semi")
        commit_times = held_on_disk(departures.commit_times_read_by(to_compute, assignments, probed))
    else:
        framed_or_before = framed.select(*REBALANCE).unionByName(frames.settled_by_frames(gens, taken_up.frames))
        kept = settled.select(*REBALANCE).join(framed_or_before, on=list(REBALANCE), how="left_semi")
        to_compute = held_on_disk(framed.join(kept, on=list(REBALANCE), how="left_anti"))
        commit_times = commit_times_read_by(
            to_compute, assignments, member_own_records, commits, progress, silent=silent
        )
    changes = held_on_disk(assignment_math.partition_changes(to_compute, assignments))
    computed = rebalances.rebalances(
        to_compute,
        changes,
        assignments,
        commit_times,
        member_own_records,
        streams_members.standby_task_moves(framed, members),
        departure_slack_ms=settings.departure_slack_ms,
        default_session_timeout_ms=settings.consumer_session_timeout_ms,
        default_heartbeat_interval_ms=settings.consumer_heartbeat_interval_ms,
    )
    rebalance_rows = _store_beside(store, "rebalances", computed, kept)
    _store_beside(store, "partition_movements", rebalances.partition_movements(to_compute, changes), kept)
    store("rebalance_frequency", frequency.rebalance_frequency(rebalance_rows, settings.storm_rebalances_per_hour))
    # A settled rebalance's replay reads only its own generations, final as it is.
    replayed = rebalance_rows.join(to_compute.select(*REBALANCE), on=list(REBALANCE), how="left_semi")
    replay = held_on_disk(whatif_inputs.replay_inputs(replayed, gens))
    whatif_rows = whatif.rebalance_whatif(replay, replay_assignors(replay), replayed)
    _store_beside(store, "rebalance_whatif", whatif_rows, kept)
    # A generation's capacity reads the rows before it (idle_since) and its successor's time: computed over
    # all of the group's, those of the generations kept are kept as the table holds them.
    capacity = idle.generation_capacity(gens)
    if kept_generations is not None:
        capacity = frames.without_keys(capacity, kept_generations)
    _store_beside(store, "generation_capacity", capacity, kept_generations)


def _no_commits(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], "cluster string, group_id string")


def _store_beside(
    store: Materialize | history_writes.Store, name: str, computed: DataFrame, kept: DataFrame | None
) -> DataFrame:
    """Stores `computed` beside the table's rows of the `kept` REBALANCE keys (replacing all when None)."""
    return store(name, computed) if kept is None else store(name, computed, kept)


def history(spark: SparkSession, config: Config, run: JobRun) -> None:
    # Change feed on: the metrics step can follow what history rewrote. Deletion vectors on: a night deletes
    # its groups' rows from their frames on (history_writes.py), and without them each file holding one
    # such row was written again whole, with every kept row in it (the whole table each night).
    for name in HISTORY_TABLES:
        ensure_table(
            spark,
            config.table(name),
            gold.GOLD_SCHEMAS[name],
            partition_by=("cluster",),
            change_feed=True,
            deletion_vectors=True,
        )
    until = {name: current_version(spark, config.table(name)) for name in SILVER_INPUTS}
    commit_note = note(STEP, config.cluster, until)
    silver = {name: silver_at(spark, config, name, version) for name, version in until.items()}
    topic_ids = cluster_rows(spark, config, TOPIC_IDS, ops.topic_ids_schema)
    settings = config.gold_settings()
    covered = None if config.full else covered_silver_versions(spark, config, until)
    changes = None
    if covered is not None:
        try:
            changes = silver_changes(spark, config, covered, until)
        except ChangesUnavailable as unavailable:
            run.progress(STEP, f"rebuilding the cluster: {unavailable}")
    commit_names, continued = commit_topic_names(
        spark, config, STEP, silver["offset_commits"], until["offset_commits"], commit_note
    )
    run.counts["commit_topic_names_continued"] = int(continued)
    names = materialized(epochs.topic_names(silver["consumer_group_records"], commit_names, topic_ids))
    if changes is None:
        run.counts["groups_rebuilt"] = touched.groups_of(
            silver["group_metadata"].select(*GROUP).unionByName(silver["consumer_group_records"].select(*GROUP))
        ).count()
        run.progress(STEP, f"rebuilding all {run.counts['groups_rebuilt']:,} groups of the cluster")
        build_history(
            silver, topic_ids, settings, history_writes.cluster_store(spark, config, commit_note), topic_names=names
        )
        run.count_tables(HISTORY_TABLES)
        return
    if "offset_commits" in changes:  # nearly all the night's rows: read once, by group partition
        changes["offset_commits"] = materialized(touched.commit_change_summary(changes["offset_commits"]))
    history_rows = {name: cluster_rows(spark, config, name) for name in ("generations", "rebalances")}
    groups = materialized(touched_groups(changes, history_rows, names))
    count = run.counts["groups_rebuilt"] = groups.count()
    run.progress(STEP, f"{count:,} groups touched since silver versions {covered}")
    if count == 0:
        for name in HISTORY_TABLES:
            empty = spark.createDataFrame([], gold.GOLD_SCHEMAS[name])
            write_noted(empty, table_location(spark, config.table(name)), commit_note)
        return
    starts = materialized(
        resume.change_starts(list(changes.values()), changes.get("offset_commits", _no_commits(spark)), groups)
    )
    touched_rebalances = history_rows["rebalances"].join(groups, on=list(GROUP), how="left_semi")
    # Read before the run rewrites generations (and rebalances).
    touched_generations = held_on_disk(history_rows["generations"].join(groups, on=list(GROUP), how="left_semi"))
    settled = materialized(resume.settled_rebalances(touched_rebalances, touched_generations, starts))
    silent = materialized(resume.silent_spans(touched_rebalances, starts))
    touched_records = silver["consumer_group_records"].join(groups, on=list(GROUP), how="left_semi")
    taken_up = history_writes.taken_up(
        spark, config, touched_generations, touched_rebalances, settled, starts, touched_records
    )
    run.counts["generations_kept"] = taken_up.generations.count()
    run.counts["epoch_groups_framed_from_a_row"] = taken_up.epochs.count()
    run.counts["rebalances_kept"] = settled.count()
    store = history_writes.groups_store(spark, config, commit_note, groups, count)
    build_history(
        silver,
        topic_ids,
        settings,
        store,
        groups=groups,
        topic_names=names,
        settled=settled,
        silent=silent,
        taken_up=taken_up,
        progress=lambda detail: run.progress(STEP, detail),
    )
    run.count_tables(HISTORY_TABLES)
