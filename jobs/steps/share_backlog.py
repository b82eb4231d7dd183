"""Share-group backlog: silver `share_group_state` (+ the share groups' topic names and the end-offset
snapshots) -> gold `share_partition_state` and `share_lag` (transforms/gold/share_state.py).

Run at the end of the metrics step. The first run (and --full) builds the cluster's rows from scratch;
later ones continue, noting in each commit the input versions covered and the [share] settings
(jobs/watermarks.py; share_lag is written last, its note is the step's; other settings start over). A
night replays again every share partition whose records changed (inserted, or deleted by forget: the
key's whole history, so late data lands where it belongs), or whose topic id got a name; and evaluates
every share partition at the snapshots taken from the earliest changed snapshot of its topic partition
on. Every other row is kept as it was: after any series of nights the tables equal one run from scratch
over the same inputs. A night with no input changed writes nothing.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.runs import JobRun
from jobs.tables import END_OFFSETS, TOPIC_IDS, cluster_rows, ensure_table, table_location
from jobs.watermarks import (
    ChangesUnavailable,
    changes_since,
    cluster_predicate,
    covered_versions,
    current_version,
    note,
    write_noted,
)
from schemas import ops, silver
from schemas.share_gold import SHARE_SCHEMAS
from transforms.gold import share_state
from transforms.gold.share_state import SHARE_KEY
from transforms.schema_check import check_declared_types

STEP = "share_backlog"
NOTE_TABLE = "share_lag"
INPUTS = ("share_group_state", "consumer_group_records", END_OFFSETS, TOPIC_IDS)
TOPIC_PARTITION = ("cluster", "topic", "partition")


def _inputs(spark: SparkSession, config: Config) -> dict[str, DataFrame]:
    return {
        "share_group_state": cluster_rows(spark, config, "share_group_state", silver.share_group_state_schema),
        "consumer_group_records": cluster_rows(
            spark, config, "consumer_group_records", silver.consumer_group_records_schema
        ),
        END_OFFSETS: cluster_rows(spark, config, END_OFFSETS, ops.end_offsets_schema),
        TOPIC_IDS: cluster_rows(spark, config, TOPIC_IDS, ops.topic_ids_schema),
    }


def _write(spark: SparkSession, config: Config, name: str, rows: DataFrame, commit_note: str) -> None:
    """The cluster's rows replaced in one commit carrying the note."""
    schema = SHARE_SCHEMAS[name]
    ensure_table(spark, config.table(name), schema, partition_by=("cluster",))
    rows = check_declared_types(rows.select(*schema.names), schema, name)
    write_noted(rows, table_location(spark, config.table(name)), commit_note, cluster_predicate(config.cluster))


def _changes(spark: SparkSession, config: Config, name: str, covered: int, now: int) -> DataFrame | None:
    """The cluster's changed rows of an input since the covered version; None when nothing changed."""
    if now == covered:
        return None
    if now < covered:
        raise ChangesUnavailable(f"{config.table(name)}: version {now} is before the covered {covered}")
    return changes_since(spark, config.table(name), covered, now).where(F.col("cluster") == F.lit(config.cluster))


def _renamed_topic_ids(changes: dict[str, DataFrame | None]) -> DataFrame | None:
    """Topic ids a changed type 15 record or topic-id row names: their share partitions are rebuilt."""
    found = []
    if changes["consumer_group_records"] is not None:
        found.append(share_state.named_topic_ids(changes["consumer_group_records"].drop("_change_type")))
    if changes[TOPIC_IDS] is not None:
        found.append(changes[TOPIC_IDS])
    if not found:
        return None
    ids = found[0].select("cluster", "topic_id")
    for more in found[1:]:
        ids = ids.unionByName(more.select("cluster", "topic_id"))
    return ids.distinct()


def _rebuilt(rows: DataFrame, keys: DataFrame, starts: DataFrame | None) -> DataFrame:
    """`rows` (with SHARE_KEY, and topic and observed_at when `starts` is given) with `is_rebuilt`: the
    key is one the night replays, or the row's snapshot is at or after its topic partition's start."""
    marked = rows.join(keys.withColumn("_is_key", F.lit(True)), on=list(SHARE_KEY), how="left")
    is_rebuilt = F.coalesce("_is_key", F.lit(False))
    if starts is not None:
        marked = marked.join(starts, on=list(TOPIC_PARTITION), how="left")
        is_rebuilt = is_rebuilt | F.coalesce(F.col("observed_at") >= F.col("start_at"), F.lit(False))
    return marked.withColumn("is_rebuilt", is_rebuilt)


def share_backlog(spark: SparkSession, config: Config, run: JobRun) -> None:
    """Continues from the tables when their note covers every input and the changes since can be read;
    else (first run, --full, changes gone) from scratch. Nothing to do for a cluster with no share state."""
    inputs = _inputs(spark, config)
    exists = spark.catalog.tableExists(config.table(NOTE_TABLE))
    if inputs["share_group_state"].isEmpty() and not any(
        spark.catalog.tableExists(config.table(name)) and not cluster_rows(spark, config, name).isEmpty()
        for name in SHARE_SCHEMAS
    ):
        return  # no share state and no rows: the tables (if any) hold what they would be rebuilt to, nothing
    versions = {
        name: current_version(spark, config.table(name)) if spark.catalog.tableExists(config.table(name)) else -1
        for name in INPUTS
    }
    settings = status_settings(config)
    commit_note = note(STEP, config.cluster, {**versions, **settings})
    covered = None
    if exists and not config.full:
        covered = covered_versions(spark, config.table(NOTE_TABLE), STEP, config.cluster)
    if covered is not None and any(covered.get(name) != value for name, value in settings.items()):
        run.progress(STEP, "the [share] settings changed: building the share backlog from scratch")
        covered = None
    if covered is not None and all(covered.get(name) == versions[name] for name in INPUTS):
        # The tables are a function of these inputs and the settings: they would be written as they are.
        run.progress(STEP, "no input changed since the versions the share tables cover")
        _count(spark, config, run)
        return
    if covered is not None and set(covered) >= set(INPUTS):
        try:
            changes = {name: _changes(spark, config, name, covered[name], versions[name]) for name in INPUTS}
        except ChangesUnavailable as error:
            run.progress(STEP, f"{error}: building the share backlog from scratch")
        else:
            continue_share_backlog(spark, config, inputs, changes, commit_note)
            _count(spark, config, run)
            return
    states = share_state.share_partition_states(inputs["share_group_state"]).localCheckpoint()
    _write(spark, config, "share_partition_state", states, commit_note)
    names = share_state.share_topic_names(inputs["consumer_group_records"], inputs[TOPIC_IDS])
    stored = cluster_rows(spark, config, "share_partition_state")
    _write(
        spark,
        config,
        NOTE_TABLE,
        share_state.share_lag(stored, inputs[END_OFFSETS], names, **status_settings(config)),
        commit_note,
    )
    _count(spark, config, run)


def status_settings(config: Config) -> dict[str, int]:
    """The [share] settings of the status rules, as share_state.share_lag takes them."""
    share = config.section("share")
    return {name: int(share[name]) for name in ("stuck_after_minutes", "redelivery_limit")}


def _count(spark: SparkSession, config: Config, run: JobRun) -> None:
    for name in SHARE_SCHEMAS:
        run.counts[name] = cluster_rows(spark, config, name).count()


def continue_share_backlog(
    spark: SparkSession,
    config: Config,
    inputs: dict[str, DataFrame],
    changes: dict[str, DataFrame | None],
    commit_note: str,
) -> None:
    """One night: see the module docstring."""
    old_states = cluster_rows(spark, config, "share_partition_state")
    touched = old_states.select(*SHARE_KEY).limit(0)
    if changes["share_group_state"] is not None:
        touched = changes["share_group_state"].select(*SHARE_KEY).distinct()
    touched = touched.localCheckpoint()
    replayed = share_state.share_partition_states(
        inputs["share_group_state"].join(touched, on=list(SHARE_KEY), how="left_semi")
    )
    states = old_states.join(touched, on=list(SHARE_KEY), how="left_anti").unionByName(replayed).localCheckpoint()
    _write(spark, config, "share_partition_state", states, commit_note)

    keys = touched
    if (renamed := _renamed_topic_ids(changes)) is not None:
        keys = keys.unionByName(
            states.select(*SHARE_KEY).join(renamed, on=["cluster", "topic_id"], how="left_semi")
        ).distinct()
    keys = keys.localCheckpoint()
    starts = None
    if changes[END_OFFSETS] is not None:
        starts = changes[END_OFFSETS].groupBy(*TOPIC_PARTITION).agg(F.min("observed_at").alias("start_at"))
        starts = starts.localCheckpoint()
    names = share_state.share_topic_names(inputs["consumer_group_records"], inputs[TOPIC_IDS])
    reached = keys.join(names, on=["cluster", "topic_id"], how="inner").select(*TOPIC_PARTITION)
    if starts is not None:
        reached = reached.unionByName(starts.select(*TOPIC_PARTITION))
    snapshots = inputs[END_OFFSETS].join(reached.distinct(), on=list(TOPIC_PARTITION), how="left_semi")
    stored = cluster_rows(spark, config, "share_partition_state")
    new_rows = _rebuilt(share_state.share_lag(stored, snapshots, names, **status_settings(config)), keys, starts).where(
        "is_rebuilt"
    )
    old_rows = cluster_rows(spark, config, NOTE_TABLE)
    kept = _rebuilt(old_rows, keys, starts).where(~F.col("is_rebuilt")).select(*old_rows.columns)
    _write(spark, config, NOTE_TABLE, kept.unionByName(new_rows.select(*old_rows.columns)).localCheckpoint(),
           commit_note)  # fmt: skip
