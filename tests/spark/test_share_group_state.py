"""A share capture (real Kafka 4.3.1 broker) through the real ingest and decode steps, upgrading a
warehouse an earlier groupscope wrote: its raw_records has no `source_topic` and holds the capture's
`__consumer_offsets` records. The next night finds the `__share_group_state-N`
directories beside them, reads only those files, and the decode step puts every share-state record in
silver `share_group_state` (none in the offsets tables), with raw = decoded + quarantined. (One night
only, to stay small: the decode step's incremental path is the same for every table.)

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
from jobs.segment_files import as_source_file, discover_partitions
from jobs.steps.decode import decode
from jobs.steps.ingest import ingest, read_partition_directories
from jobs.tables import RAW_RECORDS, ensure_table, table_location
from lab.dump import parse_dump
from schemas.bronze import raw_records_schema
from schemas.coordinator_records import OFFSET_COMMIT_TYPES
from tests.conftest import REPO_ROOT
from transforms.bronze import SOURCE_KIND_SEGMENT

CAPTURE = REPO_ROOT / "tests" / "captures" / "kafka-4.3.1" / "share"
DATABASE = "groupscope_share_state_test"
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
def upgraded(spark, spark_config):
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    config = replace(spark_config, database=DATABASE, cluster="share-4-3-1", segment_paths=(str(CAPTURE),))
    # What an earlier groupscope left: raw_records without source_topic, holding the offsets log.
    table = config.table(RAW_RECORDS)
    earlier = StructType(EARLIER_RAW_COLUMNS)
    ensure_table(spark, table, earlier, partition_by=("cluster",), change_feed=True)
    offsets_files = [[as_source_file(f) for f in files] for files in discover_partitions([str(CAPTURE / "segments")])]
    rows = read_partition_directories(spark, offsets_files, config.cluster, "earlier-run")
    rows.select(*[field.name for field in EARLIER_RAW_COLUMNS]).write.format("delta").mode("append").save(
        table_location(spark, table)
    )
    return config, run_steps(spark, config)


def rows_of(spark, config, table):
    return spark.table(config.table(table)).where(F.col("cluster") == F.lit(config.cluster))


def test_every_share_state_record_is_in_silver_as_kafka_decoded_it(spark, upgraded):
    config, counts = upgraded
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


def test_no_share_state_record_lands_in_another_table_and_nothing_is_lost(spark, upgraded):
    config, counts = upgraded
    offsets = Counter(r.get("type") for r in kafka_records("dump-offsets.txt").values() if "marker" not in r)
    assert counts["offset_commits"] == sum(offsets[t] for t in OFFSET_COMMIT_TYPES)
    assert counts["consumer_group_records"] == sum(n for t, n in offsets.items() if t >= 3)
    assert counts["quarantine"] == 0
    assert counts["raw_records"] == sum(offsets.values()) + counts["share_group_state"]
    assert counts["raw_records"] == counts["decoded"] + counts["quarantine"]
    share_ids = rows_of(spark, config, "share_group_state").select("record_id")
    for table in ("offset_commits", "group_metadata", "consumer_group_records", "quarantine"):
        assert rows_of(spark, config, table).join(share_ids, on="record_id", how="inner").isEmpty(), table


def test_the_upgrade_keeps_earlier_raw_rows_and_reads_only_the_share_state_files(spark, upgraded):
    config, counts = upgraded
    raw = rows_of(spark, config, RAW_RECORDS)
    by_topic = dict(raw.groupBy("source_topic").count().collect())
    # Earlier rows keep a null topic (read as __consumer_offsets); the share log came in this night.
    share_state = counts["share_group_state"]
    assert by_topic == {None: counts["raw_records"] - share_state, "__share_group_state": share_state}
    runs = raw.where(F.col("source_topic").isNotNull()).select("capture_run_id", "source_kind").distinct().collect()
    assert [row["source_kind"] for row in runs] == [SOURCE_KIND_SEGMENT] and runs[0]["capture_run_id"] != "earlier-run"
    assert counts["records_decoded"] == counts["raw_records"], "a new silver table: every raw record decoded again"
