"""What the history step's notes say: the silver versions (and fold version, `topic_ids` version) each table
it writes covers, read back to decide where a night starts (jobs/steps/history.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import SparkSession

from jobs.config import Config
from jobs.history_changes import STEP
from jobs.tables import SILVER_INPUTS, TOPIC_IDS
from jobs.watermarks import current_version, newest_note


def topic_ids_version(spark: SparkSession, config: Config) -> int | None:
    """The optional `topic_ids` table's version (None: no such table): a change to it can rename topics."""
    table = config.table(TOPIC_IDS)
    return current_version(spark, table) if spark.catalog.tableExists(table) else None


def newest_notes(spark: SparkSession, config: Config, tables: Sequence[str]) -> dict[str, dict] | None:
    """The newest history note of each of `tables`; None when one has none."""
    found = {}
    for name in tables:
        found[name] = newest_note(spark, config.table(name), STEP, config.cluster)
        if found[name] is None:
            return None
    return found


def _versions(table_note: Mapping) -> dict[str, int]:
    return {name: int(version) for name, version in table_note["covered"].items()}


def is_unchanged(noted: Mapping[str, Mapping], until: Mapping[str, int], details: Mapping) -> bool:
    """Every table notes the silver versions of now, this fold's version and the topic ids of now: a run
    would fold no group (a run killed part way leaves some tables a run behind)."""
    return all(
        _versions(table_note) == until and all(table_note.get(key) == value for key, value in details.items())
        for table_note in noted.values()
    )


def covered(noted: Mapping[str, Mapping], until: Mapping[str, int]) -> dict[str, int] | None:
    """The silver versions every history table and the states cover (the oldest note of each input: a
    run killed part way leaves some a run ahead); None when one notes other inputs or is ahead of silver."""
    oldest: dict[str, int] = {}
    for table_note in noted.values():
        versions = _versions(table_note)
        if set(versions) != set(SILVER_INPUTS):
            return None
        for table, version in versions.items():
            oldest[table] = min(oldest.get(table, version), version)
    return None if any(oldest[name] > until[name] for name in SILVER_INPUTS) else oldest
