"""A share capture (real Kafka 4.3.1 broker) through the real ingest and decode steps: the capture
directory holds `__consumer_offsets-N` and `__share_group_state-N` directories, and every share-state
record ends in silver `share_group_state` (none in the offsets tables), with raw = decoded + quarantined.
And the upgrade: a raw_records table an earlier groupscope wrote, without `source_topic`, gains it, its
rows read as `__consumer_offsets` records.

Expected records come from Kafka's own DumpLogSegments output committed with the capture.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.runs import JobRun
from jobs.steps.decode import decode
from jobs.steps.ingest import ingest
from jobs.tables import RAW_RECORDS, ensure_table, table_location
from lab.dump import parse_dump
from schemas.bronze import raw_records_schema
from schemas.coordinator_records import OFFSET_COMMIT_TYPES
from tests.conftest import REPO_ROOT
from transforms import silver
from transforms.bronze import SOURCE_KIND_SEGMENT

CAPTURE = REPO_ROOT / "tests" / "captures" / "kafka-4.3.1" / "share"
EARLIER_RAW_COLUMNS = [field for field in raw_records_schema.fields if field.name != "source_topic"]


def in_capture(path: str) -> str:
    """`<partition directory>/<file>`: the committed dumps name the files where the lab staged them."""
    return f"{Path(path).parent.name}/{Path(path).name}"


def kafka_records(dump: str) -> dict[tuple[str, int], dict]:
    return {(in_capture(r["file"]), r["offset"]): r for r in parse_dump((CAPTURE / dump).read_text())}


def run_steps(spark, config) -> dict:
    with JobRun(spark, config, "nightly") as run:
        ingest(spark, config, run)
        decode(spark, config, run)
    assert run.exit_code == 0, "the run failed; see its job_runs row"
    return run.counts


@pytest.fixture(scope="module")
def share_run(spark, spark_config):
    config = replace(spark_config, cluster="share-4-3-1", segment_paths=(str(CAPTURE),))
    return config, run_steps(spark, config)


def rows_of(spark, config, table):
    return spark.table(config.table(table)).where(F.col("cluster") == F.lit(config.cluster))


def test_every_share_state_record_is_in_silver_as_kafka_decoded_it(spark, share_run):
    config, counts = share_run
    kafka = kafka_records("dump-share-state.txt")
    assert kafka and counts["share_group_state"] == len(kafka)
    rows = rows_of(spark, config, "share_group_state").join(
        rows_of(spark, config, RAW_RECORDS).select("record_id", "source_file"), on="record_id", how="inner"
    )
    silver = {(in_capture(row["source_file"]), row["source_offset"]): row for row in rows.collect()}
    assert sorted(silver) == sorted(kafka)
    for position, record in kafka.items():
        row, value = silver[position], record["value"] or {}
        assert (row["record_type"], row["is_tombstone"]) == (record["type"], record["value"] is None), position
        assert (row["group_id"], row["topic_id"], row["partition"]) == tuple(record["key"].values()), position
        assert row["start_offset"] == value.get("startOffset"), position
        assert row["state_epoch"] == value.get("stateEpoch"), position
        batches = [batch.asDict() for batch in row["state_batches"] or []]
        assert batches == [
            {"first_offset": b["firstOffset"], "last_offset": b["lastOffset"],
             "delivery_state": b["deliveryState"], "delivery_count": b["deliveryCount"]}
            for b in value.get("stateBatches", [])
        ], position  # fmt: skip
        if "createTimestamp" in value:
            assert int(row["state_created_at"].timestamp() * 1000) == value["createTimestamp"], position


def test_no_share_state_record_lands_in_another_table_and_nothing_is_lost(spark, share_run):
    config, counts = share_run
    offsets = Counter(r.get("type") for r in kafka_records("dump-offsets.txt").values() if "marker" not in r)
    assert counts["offset_commits"] == sum(offsets[t] for t in OFFSET_COMMIT_TYPES)
    assert counts["consumer_group_records"] == sum(n for t, n in offsets.items() if t >= 3)
    assert counts["quarantine"] == 0
    assert counts["raw_records"] == sum(offsets.values()) + counts["share_group_state"]
    assert counts["raw_records"] == counts["decoded"] + counts["quarantine"]
    share_ids = rows_of(spark, config, "share_group_state").select("record_id")
    for table in ("offset_commits", "group_metadata", "consumer_group_records", "quarantine"):
        assert rows_of(spark, config, table).join(share_ids, on="record_id", how="inner").isEmpty(), table


def test_every_record_was_read_with_its_topic_in_one_night(spark, share_run):
    config, counts = share_run
    raw = rows_of(spark, config, RAW_RECORDS)
    by_topic = dict(raw.groupBy("source_topic").count().collect())
    share_state = counts["share_group_state"]
    assert by_topic == {"__consumer_offsets": counts["raw_records"] - share_state, "__share_group_state": share_state}
    assert counts["records_decoded"] == counts["raw_records"]


def test_an_earlier_raw_records_table_gains_source_topic_and_its_rows_stay_offsets_records(spark, spark_config):
    table = spark_config.table("raw_records_before_source_topic")
    ensure_table(spark, table, StructType(EARLIER_RAW_COLUMNS), partition_by=("cluster",), change_feed=True)
    key = bytes.fromhex("000100086d792d67726f757000066f726465727300000003")  # an offset commit's key
    earlier_row = {field.name: None for field in EARLIER_RAW_COLUMNS} | {
        "cluster": "earlier", "record_id": "earlier/3/0", "source_partition": 3, "source_offset": 0, "key": key,
        "source_kind": SOURCE_KIND_SEGMENT, "capture_run_id": "earlier-run",
    }  # fmt: skip
    rows = spark.createDataFrame([tuple(earlier_row.values())], StructType(EARLIER_RAW_COLUMNS))
    rows.write.format("delta").mode("append").save(table_location(spark, table))
    ensure_table(spark, table, raw_records_schema, partition_by=("cluster",), change_feed=True)
    held = spark.table(table)
    assert held.columns == raw_records_schema.names
    decoded = silver.decode_raw_records(held).collect()
    assert [(row.record_id, row.destination, row.is_tombstone) for row in decoded] == [
        ("earlier/3/0", "offset_commit", True)
    ]
