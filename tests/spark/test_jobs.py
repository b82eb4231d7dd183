"""The ingest and decode jobs on real segments, in a real Delta warehouse with a real metastore.

Checks what a user relies on: every record accounted for (raw = decoded + quarantined), counts that
equal what Kafka's own DumpLogSegments reports for the same files, corrupt bytes quarantined without
stopping the run, landed raw tables accepted, and a second run changing nothing.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from bench.generate import main as generate
from jobs.runs import InvariantViolation, JobRun
from jobs.segment_files import as_source_file, discover_partitions, read_paths
from jobs.steps.decode import LANDING_TABLES, check_nothing_lost, decode
from jobs.steps.ingest import ingest, inputs_may_repeat_records, read_partition_directories
from jobs.watermarks import current_version
from tests.conftest import PUBLIC_FIXTURES, REPO_ROOT
from tests.generated_sample import SAMPLE_ARGS
from tests.kafka_oracle import kafka_by_position, run_dump_log_segments
from tests.scan_metrics import files_read_since, last_execution_id
from transforms.bronze import arrow_batches

DANIEL = PUBLIC_FIXTURES / "DanielMorales9__kafkafun" / "677fd1af" / "data" / "kafka"
MSCALDAS = PUBLIC_FIXTURES / "mscaldas2012__kafka-connect-spooldir" / "369b2776" / "kafka-data"
QUICKSTART = REPO_ROOT / "tests" / "captures" / "kafka-4.2.1" / "quickstart" / "segments"
KONSUMER = PUBLIC_FIXTURES / "kafkesc__konsumer_offsets" / "52fcd348" / "fixtures" / "tests"


def run_nightly_steps(spark, config) -> dict[str, int]:
    with JobRun(spark, config, "nightly") as run:
        ingest(spark, config, run)
        decode(spark, config, run)
    assert run.exit_code == 0, "the run failed; see its job_runs row"
    return run.counts


def cluster_rows(spark, config, table):
    return spark.table(config.table(table)).where(F.col("cluster") == F.lit(config.cluster))


@pytest.fixture(scope="module")
def daniel(spark, spark_config):
    config = replace(spark_config, cluster="daniel", segment_paths=(str(DANIEL),))
    return config, run_nightly_steps(spark, config)


def test_counts_equal_kafkas_own_decoder(daniel):
    _, counts = daniel
    files = sorted(DANIEL.glob("__consumer_offsets-*/*.log"))
    kafka = kafka_by_position(run_dump_log_segments(files))
    by_type = Counter(entry["record_type"] for entry in kafka.values())
    assert counts["raw_records"] == len(kafka)
    assert counts["offset_commits"] == by_type[1]
    assert counts["group_metadata"] == by_type[2]
    assert counts["quarantine"] == 0
    assert counts["decoded"] + counts["quarantine"] == counts["raw_records"]


def test_members_and_assignments_follow_group_records(spark, daniel):
    config, _ = daniel
    members = cluster_rows(spark, config, "group_members")
    live_groups = cluster_rows(spark, config, "group_metadata").where(~F.col("is_tombstone"))
    assert members.count() == live_groups.agg(F.sum("member_count")).first()[0]
    assignments = cluster_rows(spark, config, "member_assignments")
    expected = members.select(F.explode("assigned_partitions").alias("a")).select(F.size("a.partitions").alias("n"))
    assert assignments.count() == expected.agg(F.sum("n")).first()[0]


def test_a_second_run_changes_nothing(spark, daniel):
    config, _ = daniel
    tables = ("raw_records", "offset_commits", "group_metadata", "group_members", "member_assignments", "quarantine")
    before = {table: cluster_rows(spark, config, table).collect() for table in tables}
    run_nightly_steps(spark, config)
    for table in tables:
        after = cluster_rows(spark, config, table).collect()
        assert sorted(map(repr, after)) == sorted(map(repr, before[table])), table


def test_job_runs_record_each_run_with_its_counts(spark, daniel):
    config, _ = daniel
    runs = spark.table(config.table("job_runs")).where(F.col("cluster") == "daniel").collect()
    assert runs and all(run.outcome == "succeeded" for run in runs)
    assert all(run.raw_count == run.decoded_count + run.quarantined_count for run in runs)


def test_corrupt_segment_is_quarantined_and_the_rest_decoded(spark, spark_config, tmp_path):
    source = MSCALDAS / "__consumer_offsets-29" / "00000000000000000000.log"
    corrupt_dir = tmp_path / "logs" / "__consumer_offsets-29"
    corrupt_dir.mkdir(parents=True)
    data = bytearray(source.read_bytes())
    data[600] ^= 0x40  # inside the second batch (the first is 515 bytes): its CRC-32C no longer matches
    truncated = bytes(data[:-30])  # and a torn tail, as an active segment copied mid-write has
    (corrupt_dir / "00000000000000000000.log").write_bytes(truncated)
    config = replace(spark_config, cluster="corrupt", segment_paths=(str(tmp_path / "logs"),))

    counts = run_nightly_steps(spark, config)

    quarantine = cluster_rows(spark, config, "quarantine").collect()
    reasons = sorted(row.reason for row in quarantine)
    assert len(quarantine) == 2 and all(row.stage == "read" for row in quarantine)
    assert "CRC-32C mismatch" in reasons[0] or "CRC-32C mismatch" in reasons[1]
    assert any("unreadable from here" in reason for reason in reasons), reasons
    assert sum(len(row.value) for row in quarantine) > 30  # the bad bytes are kept, not dropped
    clean_records = len(kafka_by_position(run_dump_log_segments([source])))
    assert counts["decoded"] >= clean_records - 3  # only the damaged batch and the torn tail are lost to decoding
    assert counts["raw_records"] == counts["decoded"] + counts["quarantine"]


def test_landed_json_lines_with_base64_are_ingested(spark, spark_config, tmp_path):
    lines = []
    for offset, key_file in enumerate(sorted(KONSUMER.glob("*/*.key"))):
        lines.append(
            {
                "partition": 7,
                "offset": offset,
                "timestamp": 1672870000000 + offset,
                "key": base64.b64encode(key_file.read_bytes()).decode(),
                "value": base64.b64encode(key_file.with_suffix(".payload").read_bytes()).decode(),
            }
        )
    lines.append(
        {
            "partition": 7,
            "offset": 99,
            "timestamp": 1672870000099,
            "key": base64.b64encode(b"\x00\x63junk").decode(),
            "value": None,
        }
    )
    landed = tmp_path / "landed.json"
    landed.write_text("\n".join(json.dumps(line) for line in lines))
    config = replace(
        spark_config, cluster="landed", segment_paths=(), raw_table_paths=(str(landed),), raw_table_format="json"
    )

    counts = run_nightly_steps(spark, config)

    assert (counts["offset_commits"], counts["group_metadata"], counts["quarantine"]) == (5, 5, 1)
    (bad,) = cluster_rows(spark, config, "quarantine").collect()
    assert bad.record_id == "landed/7/99" and "unknown record type 99" in bad.reason


def test_missing_input_fails_the_run_clearly(spark, spark_config, tmp_path):
    config = replace(spark_config, cluster="missing", segment_paths=(str(tmp_path / "nope"),))
    with JobRun(spark, config, "nightly") as run:
        ingest(spark, config, run)
    assert run.exit_code == 1
    (row,) = spark.table(config.table("job_runs")).where(F.col("cluster") == "missing").collect()
    assert row.outcome == "failed" and "no such file or directory" in row.message
    traceback_file = Path(re.search(r"\(traceback in (.+\.log)\)", row.message)[1])
    assert traceback_file.read_text().startswith("Traceback (most recent call last)")


def test_a_jvm_failure_is_recorded_in_its_own_words_its_frames_in_the_traceback_file(spark, spark_config):
    config = replace(spark_config, cluster="jvm-failure")
    with JobRun(spark, config, "nightly"):
        spark._jvm.java.io.FileInputStream("/nonexistent/groupscope")  # py4j's text carries the JVM's frames
    (row,) = spark.table(config.table("job_runs")).where(F.col("cluster") == "jvm-failure").collect()
    assert "java.io.FileNotFoundException: /nonexistent/groupscope (No such file or directory)" in row.message
    assert "\n" not in row.message and " at java." not in row.message
    traceback_file = Path(re.search(r"\(traceback in (.+\.log)\)", row.message)[1])
    assert "\tat java.base/java.io.FileInputStream.open" in traceback_file.read_text()


def test_fixture_copy_is_complete():
    assert shutil.which("java"), "java is required for the Kafka oracle"
    assert len(list(Path(PUBLIC_FIXTURES).rglob("__consumer_offsets-*/*.log"))) == 19


@pytest.mark.parametrize("table_format", ["parquet", "delta"])
def test_landed_tables_in_the_kafka_source_shape_are_ingested(spark, spark_config, tmp_path, table_format):
    from datetime import UTC, datetime

    rows = [
        (
            "__consumer_offsets",
            3,
            offset,
            datetime(2026, 11, 1, tzinfo=UTC),
            0,
            key_file.read_bytes(),
            key_file.with_suffix(".payload").read_bytes(),
        )
        for offset, key_file in enumerate(sorted(KONSUMER.glob("offset_commit/*.key")))
    ]
    landed = spark.createDataFrame(
        rows,
        "topic string, partition int, offset long, timestamp timestamp, timestampType int, key binary, value binary",
    )
    path = str(tmp_path / table_format)
    landed.write.format(table_format).save(path)
    config = replace(
        spark_config,
        cluster=f"landed-{table_format}",
        segment_paths=(),
        raw_table_paths=(path,),
        raw_table_format=table_format,
    )

    counts = run_nightly_steps(spark, config)

    assert (counts["raw_records"], counts["offset_commits"], counts["quarantine"]) == (5, 5, 0)
    offsets = sorted(row.committed_offset for row in cluster_rows(spark, config, "offset_commits").collect())
    assert offsets == sorted([97507, 97554, 106, 99158, 15134])


def test_a_backup_beside_the_live_log_adds_no_record_twice(spark, spark_config, tmp_path):
    live = DANIEL / "__consumer_offsets-0"
    backup = tmp_path / "backup" / "__consumer_offsets-0"
    shutil.copytree(live, backup)
    config = replace(spark_config, cluster="backup", segment_paths=(str(live), str(backup.parent)))
    assert inputs_may_repeat_records(config)

    counts = run_nightly_steps(spark, config)

    assert counts["raw_records"] == len(kafka_by_position(run_dump_log_segments(sorted(live.glob("*.log")))))
    ids = cluster_rows(spark, config, "raw_records").select("record_id")
    assert ids.distinct().count() == counts["raw_records"]


def test_only_inputs_that_can_hold_copies_are_searched_for_them(spark_config, tmp_path):
    for partition in (0, 1):
        (tmp_path / "logs" / f"__consumer_offsets-{partition}").mkdir(parents=True)
        (tmp_path / "logs" / f"__consumer_offsets-{partition}" / f"{0:020d}.log").write_bytes(b"")
    one_log = replace(spark_config, segment_paths=(str(tmp_path / "logs"),), raw_table_paths=())
    assert not inputs_may_repeat_records(one_log)
    shutil.copytree(tmp_path / "logs" / "__consumer_offsets-1", tmp_path / "copy" / "__consumer_offsets-1")
    assert inputs_may_repeat_records(replace(one_log, segment_paths=(str(tmp_path / "logs"), str(tmp_path / "copy"))))
    assert inputs_may_repeat_records(replace(one_log, raw_table_paths=(str(tmp_path / "landed"),)))
    assert inputs_may_repeat_records(replace(one_log, segment_paths=("s3a://bucket/logs",)))


def split_after_first_transactional_batch(logs: Path, into: Path) -> Path:
    """A real partition, cut into two segments between a transactional batch and its marker."""
    first = next(record for record in read_paths([logs]) if record.is_transactional)
    data = Path(first.source_file).read_bytes()
    (batch_length,) = struct.unpack_from(">i", data, first.batch_position + 8)
    cut = first.batch_position + 12 + batch_length
    directory = into / Path(first.source_file).parent.name
    directory.mkdir(parents=True)
    (directory / f"{0:020d}.log").write_bytes(data[:cut])
    (directory / f"{first.offset + 1:020d}.log").write_bytes(data[cut:])
    return directory


@pytest.mark.parametrize("as_uri", [False, True], ids=["path", "file URI"])
def test_segments_stream_out_in_small_batches_with_every_record_as_the_reader_gives_it(spark, tmp_path, as_uri):
    """Tiny batches cut through a transaction that spans two segments; nothing may change for that."""
    directory = split_after_first_transactional_batch(QUICKSTART, tmp_path)
    path = directory.as_uri() if as_uri else str(directory)
    partitions = [[as_source_file(file) for file in files] for files in discover_partitions([path])]
    assert [len(files) for files in partitions] == [2]

    rows = read_partition_directories(spark, partitions, "c", "run", records_per_batch=4)

    expected = {
        f"c/{record.partition}/{record.offset}": (record.key, record.value, record.txn_state)
        for record in read_paths([directory])
    }
    got = {row.record_id: (row.key, row.value, row.txn_state) for row in rows.collect()}
    assert got == expected and len(got) > 4
    first = next(record for record in read_paths([directory]) if record.is_transactional)
    assert got[f"c/{first.partition}/{first.offset}"][2] in ("committed", "aborted"), "its marker is in file 2"


def test_a_partition_leaves_its_task_in_batches_no_larger_than_asked():
    records = list(read_paths([QUICKSTART]))
    sizes = [batch.num_rows for batch in arrow_batches(iter(records), "c", "run", records_per_batch=16)]
    assert sum(sizes) == len(records)
    assert max(sizes) == 16 and len(sizes) == -(-len(records) // 16)


def test_the_check_fails_when_a_record_is_missing_or_landed_twice(spark, spark_config):
    config = replace(spark_config, cluster="tampered", segment_paths=(str(DANIEL),))
    run_nightly_steps(spark, config)
    commits = config.table("offset_commits")
    first, second = (row.record_id for row in cluster_rows(spark, config, "offset_commits").limit(2).collect())

    # One record in two places and another in none: every count still adds up.
    spark.sql(f"UPDATE {commits} SET record_id = '{first}' WHERE cluster = 'tampered' AND record_id = '{second}'")
    with JobRun(spark, config, "decode") as run, pytest.raises(InvariantViolation, match="landed twice"):
        check_nothing_lost(spark, config, run)

    spark.sql(f"DELETE FROM {commits} WHERE cluster = 'tampered' AND record_id = '{first}'")
    with JobRun(spark, config, "decode") as run, pytest.raises(InvariantViolation, match="!= decoded"):
        check_nothing_lost(spark, config, run)


def test_each_reading_task_writes_its_own_raw_files(spark, daniel):
    """Not one task for the whole run (Delta would repartition a MERGE by the cluster column)."""
    config, _ = daniel
    assert len(cluster_rows(spark, config, "raw_records").inputFiles()) > 1


def test_tables_keep_statistics_for_their_leading_columns_only(spark, daniel):
    config, _ = daniel
    properties = spark.sql(f"DESCRIBE DETAIL {config.table('offset_commits')}").first()["properties"]
    assert properties.get("delta.dataSkippingNumIndexedCols") == "8"


def test_a_nights_check_fails_when_its_records_did_not_land_once_each(spark, spark_config):
    """The incremental check reads the night's rows only: what the run added to the landing tables must
    be exactly the raw records it decoded, even where the totals still add up."""
    config = replace(spark_config, cluster="tampered-night", segment_paths=(str(DANIEL),))
    run_nightly_steps(spark, config)
    commits = config.table("offset_commits")
    before = {name: current_version(spark, config.table(name)) for name in LANDING_TABLES}
    first, second = (row.record_id for row in cluster_rows(spark, config, "offset_commits").limit(2).collect())
    with JobRun(spark, config, "decode") as run:
        check_nothing_lost(spark, config, run, own_records=(0, 0), landed_before=before)  # a night with nothing

    # A night that landed one record a second time and lost another: the counts add up, the night does not.
    spark.sql(
        f"INSERT INTO {commits} SELECT * FROM {commits} WHERE cluster = 'tampered-night' AND record_id = '{first}'"
    )
    spark.sql(f"DELETE FROM {commits} WHERE cluster = 'tampered-night' AND record_id = '{second}'")
    with JobRun(spark, config, "decode") as run, pytest.raises(InvariantViolation, match="landed twice"):
        check_nothing_lost(spark, config, run, own_records=(0, 0), landed_before=before)


def test_commits_are_written_in_files_by_partition_then_time(spark, spark_config, tmp_path):
    """History reads one `__consumer_offsets` partition's commits from a time days back (a group's floor):
    Delta skips the files of the other partitions by their statistics, where files by time alone each
    held every partition (the 50M-record night read every commit file for one partition)."""
    sample = tmp_path / "generated"  # 40 groups committing side by side, in many partitions
    generate([str(sample), *SAMPLE_ARGS])
    config = replace(spark_config, cluster="layout", segment_paths=(str(sample / "segments"),))
    several = {"spark.sql.shuffle.partitions": "4", "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    before = {name: spark.conf.get(name) for name in several}
    for name, value in several.items():
        spark.conf.set(name, value)
    try:
        run_nightly_steps(spark, config)
    finally:
        for name, value in before.items():
            spark.conf.set(name, value)
    commits = cluster_rows(spark, config, "offset_commits")
    files = len(commits.inputFiles())
    by_size = commits.groupBy("source_partition").count().orderBy("count").collect()
    partition = by_size[len(by_size) // 2]["source_partition"]
    since = commits.agg(F.min("record_at")).first()[0]

    started = last_execution_id(spark)
    one_partition = commits.where((F.col("source_partition") == partition) & (F.col("record_at") >= since)).count()
    read = files_read_since(spark, started)["offset_commits"]

    assert files >= 3 and one_partition == by_size[len(by_size) // 2]["count"]
    assert read == [1], f"{read} of {files} files read for one partition"
