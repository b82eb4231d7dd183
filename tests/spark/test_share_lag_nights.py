"""The share backlog continued night by night (jobs/steps/share_backlog.py) holds, after every night, the
rows one build from scratch over that night's inputs gives, and a --full run over the last night's
inputs changes nothing.

Input: the real 4.3.1 share capture. Its silver share_group_state and consumer_group_records and its
end-offset snapshots are real Delta tables with the Change Data Feed on, filled night by night as the
decode and end_offsets steps fill them: each night brings the records and snapshots up to a later moment
(each __share_group_state partition's log up to then: its records' times only grow). The moments fall
inside the scenario's bursts of share-state writes. Night 1 (from scratch) lacks one share partition's
records after the first burst: a backup that arrives on night 2, behind snapshots already evaluated.
Night 3 brings snapshots only (no state record was written meanwhile). Night 4 brings the rest and
deletes a group's records (forget).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from types import MappingProxyType

import pytest
from delta.tables import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import jobs.steps.share_backlog as share_backlog_step
from jobs.runs import JobRun
from jobs.steps.share_backlog import share_backlog, status_settings
from jobs.steps.views import view_statement
from jobs.tables import END_OFFSETS, ensure_table, table_location
from jobs.watermarks import current_version
from schemas import ops
from schemas.share_gold import SHARE_SCHEMAS
from schemas.silver import consumer_group_records_schema, share_group_state_schema
from tests.delta_compare import canonical
from tests.lab_tables import CAPTURES, Capture, decoded_captures
from tests.spark.test_share_lag import PRINTED, SHARE_CAPTURES, described, printed
from transforms import silver
from transforms.gold import share_state

CAPTURE = Capture(CAPTURES / "kafka-4.3.1" / "share")
DATABASE = "share_nights"
LATE = ("share-lab", 1)  # (group, partition): its records after the first burst arrive on night 2
FORGOTTEN = "share-lab-deleted"
# Where night 1 cuts the late partition (after the first acknowledgements), then the nights' moments:
# inside the second batch of records' writes, after the topic deletion's, a second later (snapshots
# only), the end.
FIRST_BURST_MS = 1795672412000
MOMENTS_MS = (1795672422560, 1795672433000, 1795672434000, None)
SNAPSHOTS_ONLY_NIGHT = 3
SILVER = {"share_group_state": share_group_state_schema, "consumer_group_records": consumer_group_records_schema}


@pytest.fixture(scope="module")
def inputs(spark):
    decoded = decoded_captures(spark, SHARE_CAPTURES).where(F.col("cluster") == CAPTURE.cluster)
    return {
        "share_group_state": silver.filter_share_group_state(decoded).localCheckpoint(),
        "consumer_group_records": silver.filter_consumer_group_records(decoded).localCheckpoint(),
        END_OFFSETS: spark.createDataFrame(CAPTURE.end_offset_rows(), ops.end_offsets_schema).localCheckpoint(),
    }


def _until(rows: DataFrame, column: str, moment_ms: int | None) -> DataFrame:
    if moment_ms is None:
        return rows
    return rows.where(F.col(column) <= F.lit(datetime.fromtimestamp(moment_ms / 1000, UTC)))


def night_inputs(inputs: dict[str, DataFrame], night: int) -> dict[str, DataFrame]:
    moment = MOMENTS_MS[night - 1]
    tables = {name: _until(inputs[name], "record_at", moment) for name in SILVER}
    tables[END_OFFSETS] = _until(inputs[END_OFFSETS], "observed_at", moment)
    late = (F.col("group_id") == LATE[0]) & (F.col("partition") == LATE[1])
    if night == 1:
        tables["share_group_state"] = tables["share_group_state"].where(
            ~late | (F.col("record_at") <= F.lit(datetime.fromtimestamp(FIRST_BURST_MS / 1000, UTC)))
        )
    if night == 4:
        tables["share_group_state"] = tables["share_group_state"].where(F.col("group_id") != FORGOTTEN)
    return tables


def load_night(spark, config, tables: dict[str, DataFrame]) -> None:
    """The silver and ops tables brought to the night's rows: new ones appended, gone ones deleted."""
    for name, rows in tables.items():
        schema = ops.end_offsets_schema if name == END_OFFSETS else SILVER[name]
        key = ["cluster", "topic", "partition", "observed_at"] if name == END_OFFSETS else ["cluster", "record_id"]
        held = spark.table(config.table(name))
        gone = held.join(rows, on=key, how="left_anti").select(*key).collect()
        if gone:
            condition = F.lit(False)
            for row in gone:
                condition = condition | F.struct(*key).eqNullSafe(F.struct(*[F.lit(row[k]) for k in key]))
            DeltaTable.forName(spark, config.table(name)).delete(condition)
        new = rows.join(held, on=key, how="left_anti").select(*schema.names)
        new.write.format("delta").mode("append").save(table_location(spark, config.table(name)))


def from_scratch(spark, config, tables: dict[str, DataFrame]) -> dict[str, list[str]]:
    states = share_state.share_partition_states(tables["share_group_state"]).localCheckpoint()
    names = share_state.share_topic_names(
        tables["consumer_group_records"], spark.createDataFrame([], ops.topic_ids_schema)
    )
    built = {
        "share_partition_state": states,
        "share_lag": share_state.share_lag(states, tables[END_OFFSETS], names, **status_settings(config)),
    }
    return {name: _rows(built[name].select(*SHARE_SCHEMAS[name].names)) for name in SHARE_SCHEMAS}


def _rows(rows: DataFrame) -> list[str]:
    return sorted(repr(canonical(row)) for row in rows.collect())


def run_step(spark, config) -> None:
    with JobRun(spark, config, "metrics") as run:
        share_backlog(spark, config, run)
    assert run.exit_code == 0, "the share backlog run failed; see its job_runs row"


@pytest.fixture(scope="module")
def nights(spark, spark_config, inputs):
    """Every night run, then --full: per night the tables held and the build from scratch, the nights
    that continued, and the share-state rows each night's inputs held."""
    config = replace(spark_config, database=DATABASE, cluster=CAPTURE.cluster)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    for name, schema in {**SILVER, END_OFFSETS: ops.end_offsets_schema}.items():
        ensure_table(spark, config.table(name), schema, partition_by=("cluster",), change_feed=True)
    continued, held, expected, state_rows = [], [], [], []
    original = share_backlog_step.continue_share_backlog
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(share_backlog_step, "continue_share_backlog", lambda *a: continued.append(1) or original(*a))
        for night in range(1, len(MOMENTS_MS) + 1):
            tables = night_inputs(inputs, night)
            state_rows.append(tables["share_group_state"].count())
            load_night(spark, config, tables)
            run_step(spark, config)
            held.append({name: _rows(spark.table(config.table(name))) for name in SHARE_SCHEMAS})
            expected.append(from_scratch(spark, config, tables))
    version = current_version(spark, config.table("share_lag"))
    run_step(spark, config)  # the same night again
    again = {name: _rows(spark.table(config.table(name))) for name in SHARE_SCHEMAS}
    unwritten = current_version(spark, config.table("share_lag")) == version
    run_step(spark, replace(config, full=True))
    after_full = {name: _rows(spark.table(config.table(name))) for name in SHARE_SCHEMAS}
    # A storm at the first redelivery (the capture redelivers records): a change of setting the inputs do
    # not show.
    share = {**config.section("share"), "redelivery_limit": 1}
    resettled_config = replace(config, sections=MappingProxyType({**config.sections, "share": share}))
    run_step(spark, resettled_config)
    resettled = {name: _rows(spark.table(config.table(name))) for name in SHARE_SCHEMAS}
    expected_resettled = from_scratch(spark, resettled_config, tables)
    return {"config": config, "held": held, "expected": expected, "continued": continued,
            "state_rows": state_rows, "after_full": after_full, "again": again, "unwritten": unwritten,
            "resettled": resettled, "expected_resettled": expected_resettled}  # fmt: skip


def test_nights_hold_what_one_build_from_scratch_gives(nights):
    for night, (held, expected) in enumerate(zip(nights["held"], nights["expected"], strict=True), start=1):
        assert held == expected, f"night {night}"
    assert len(nights["continued"]) == len(MOMENTS_MS) - 1, "a night started over instead of continuing"
    lag_rows = [len(held["share_lag"]) for held in nights["held"]]
    assert 0 < lag_rows[0] < lag_rows[1] < lag_rows[2] < lag_rows[3]
    state_rows = nights["state_rows"]
    assert state_rows[SNAPSHOTS_ONLY_NIGHT - 1] == state_rows[SNAPSHOTS_ONLY_NIGHT - 2]


def test_full_run_after_the_nights_changes_nothing(nights):
    assert nights["after_full"] == nights["held"][-1]


def test_changed_share_settings_rebuild_the_tables(nights):
    assert nights["resettled"] == nights["expected_resettled"] != nights["held"][-1]


def test_a_night_with_nothing_new_writes_nothing(nights):
    assert nights["again"] == nights["held"][-1] and nights["unwritten"]


def test_current_share_lag_view_is_what_kafka_share_groups_printed_at_the_end(spark, nights):
    """The last night holds the whole capture: the view's latest snapshot is the one taken just before
    the tool ran."""
    config = nights["config"]
    spark.sql(view_statement("current_share_lag", config.database))
    header, kafka_rows = described(CAPTURE)
    rows = spark.table(config.table("current_share_lag")).where(F.col("cluster") == config.cluster).collect()
    assert {row["observed_at"] for row in rows} == {CAPTURE.final_observed_at.replace(tzinfo=None)}
    assert sorted(tuple(printed(row[PRINTED[name]]) for name in header) for row in rows) == sorted(kafka_rows)
