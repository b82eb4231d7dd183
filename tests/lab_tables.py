"""Every lab capture through the whole pipeline at once, one `cluster` per capture, kept in memory.

The ground-truth tests compare these tables with what the lab's clients saw (scenario.json) and with
`kafka-consumer-groups --describe` taken at the end of each scenario. Running the jobs' own builders
(`history_from_scratch`, `build_metrics`) over all captures in one pass keeps that to one pipeline's cost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from jobs.config import GoldSettings, load_config
from jobs.steps.end_offsets import end_offset_file_rows
from jobs.steps.history import history_from_scratch
from jobs.steps.ingest import read_inputs
from jobs.steps.metrics import build_metrics
from jobs.tables import gold_rows, materialized
from lab.broker import CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS, CONSUMER_GROUP_SESSION_TIMEOUT_MS
from schemas import ops
from transforms import silver

CAPTURES = Path(__file__).resolve().parent / "captures"


@dataclass(frozen=True)
class Capture:
    path: Path

    @property
    def cluster(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"

    @property
    def scenario(self) -> dict:
        return json.loads((self.path / "scenario.json").read_text())

    def end_offset_rows(self) -> list[tuple]:
        """Every snapshot of the capture (the series and the final one), read as `end_offsets --from-files`
        reads them."""
        document = json.loads((self.path / "end_offsets.json").read_text())
        return [(self.cluster, *row) for row in end_offset_file_rows(document)]

    @property
    def final_observed_at(self) -> datetime:
        """The snapshot taken just before kafka-consumer-groups --describe."""
        document = json.loads((self.path / "end_offsets.json").read_text())
        return datetime.fromtimestamp(document["observed_at_ms"] / 1000, UTC)


def all_captures() -> list[Capture]:
    return [Capture(path.parent) for path in sorted(CAPTURES.glob("*/*/scenario.json"))]


_DECODED: dict[tuple, DataFrame] = {}


def decoded_captures(spark: SparkSession, captures: list[Capture]) -> DataFrame:
    """The captures' records as the ingest job reads them, decoded, each capture its own cluster; decoded
    once per session (the modules that read the same captures share it)."""
    key = (id(spark), *(capture.path for capture in captures))
    if key not in _DECODED:
        _DECODED[key] = _decode(spark, captures)
    return _DECODED[key]


def _decode(spark: SparkSession, captures: list[Capture]) -> DataFrame:
    raw = None
    for capture in captures:
        config = load_config(overrides={"input": {"cluster": capture.cluster, "segment_paths": [str(capture.path)]}})
        rows = read_inputs(spark, config, "lab-tables")
        raw = rows if raw is None else raw.unionByName(rows)
    return materialized(silver.decode_raw_records(raw))


def build_lab_tables(spark: SparkSession, captures: list[Capture]) -> dict[str, DataFrame]:
    decoded = decoded_captures(spark, captures)
    members = silver.explode_group_members(decoded)
    tables = {
        "offset_commits": materialized(silver.filter_offset_commits(decoded)),
        "group_metadata": silver.filter_group_metadata(decoded),
        "group_members": members,
        "consumer_group_records": silver.filter_consumer_group_records(decoded),
        "share_group_state": silver.filter_share_group_state(decoded),
        "quarantine": silver.filter_quarantine(decoded),
        "end_offsets": spark.createDataFrame(
            [row for capture in captures for row in capture.end_offset_rows()], ops.end_offsets_schema
        ),
    }

    def store(name: str, rows: DataFrame) -> DataFrame:
        tables[name] = materialized(gold_rows(name, rows))
        return tables[name]

    settings = GoldSettings(
        consumer_session_timeout_ms=CONSUMER_GROUP_SESSION_TIMEOUT_MS,
        consumer_heartbeat_interval_ms=CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS,
    )
    no_topic_ids = spark.createDataFrame([], ops.topic_ids_schema)
    for name, rows in history_from_scratch(tables, no_topic_ids, settings).items():
        store(name, rows)
    build_metrics(tables["offset_commits"], tables["end_offsets"], tables, settings, None, store)
    return tables
