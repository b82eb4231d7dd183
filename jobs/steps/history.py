"""History: silver group records -> gold generations, assignments, rebalances, movements, frequency."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from jobs.config import Config, GoldSettings
from jobs.runs import JobRun
from jobs.tables import SILVER_INPUTS, TOPIC_IDS, Materialize, cluster_rows, materialized, write_gold
from schemas import ops
from transforms.gold import assignment_math, epochs, frequency, generations, offsets, rebalances


def build_history(
    silver: Mapping[str, DataFrame], topic_ids: DataFrame, settings: GoldSettings, store: Materialize
) -> None:
    """Silver `offset_commits`, `group_metadata`, `group_members`, `consumer_group_records` (any clusters)
    -> every table of HISTORY_TABLES, handed to `store` in dependency order."""
    offset_commits, group_records = silver["offset_commits"], silver["consumer_group_records"]
    names = epochs.topic_names(group_records, offset_commits, topic_ids)
    all_generations = generations.classic_generations(silver["group_metadata"], silver["group_members"]).unionByName(
        epochs.consumer_group_generations(group_records, names)
    )
    gens = store("generations", all_generations)
    assignments = store("generation_assignments", generations.explode_generation_assignments(gens))
    framed = materialized(rebalances.logical_rebalances(gens, assignments, settings.cooperative_round_gap_ms))
    changes = materialized(assignment_math.partition_changes(framed, assignments))
    rebalance_rows = store(
        "rebalances",
        rebalances.rebalances(
            framed,
            changes,
            assignments,
            offsets.filter_uncounted_commits(offset_commits),
            departure_slack_ms=settings.departure_slack_ms,
            default_session_timeout_ms=settings.consumer_session_timeout_ms,
            default_heartbeat_interval_ms=settings.consumer_heartbeat_interval_ms,
        ),
    )
    store("partition_movements", rebalances.partition_movements(framed, changes))
    store("rebalance_frequency", frequency.rebalance_frequency(rebalance_rows, settings.storm_rebalances_per_hour))


def history(spark: SparkSession, config: Config, run: JobRun) -> None:
    build_history(
        {name: cluster_rows(spark, config, name) for name in SILVER_INPUTS},
        cluster_rows(spark, config, TOPIC_IDS, ops.topic_ids_schema),
        config.gold_settings(),
        lambda name, rows: write_gold(spark, config, run, name, rows),
    )
