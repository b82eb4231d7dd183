"""Fault injection through the Spark pipeline: over ten thousand damaged records, each one accounted for.

The corpus (tests/fault_corpus.py) damages the log layer and the record layer in every way the
issue lists, batch headers (lengths, magic bytes, attributes) included; the ingest and decode jobs
must succeed, quarantine each damaged item (or run of items a damaged length leaves unframed) with a
reason that names its damage and exactly its bytes, decode every intact record, those after a damaged
header too, and balance raw = decoded + quarantined. `jobs.dump` must report the same.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.sql import functions as F

from jobs.dump import dump_lines
from jobs.runs import JobRun
from jobs.steps.decode import decode
from jobs.steps.ingest import ingest
from tests.fault_corpus import write_corpus


@pytest.fixture(scope="module")
def faults(spark, spark_config, tmp_path_factory):
    corpus = write_corpus(tmp_path_factory.mktemp("faults") / "logs")
    config = replace(spark_config, cluster="faults", segment_paths=(str(corpus.root),))
    with JobRun(spark, config, "nightly") as run:
        ingest(spark, config, run)
        decode(spark, config, run)
    quarantine = {
        (row.source_partition, row.source_offset): row
        for row in spark.table(config.table("quarantine")).where(F.col("cluster") == config.cluster).collect()
    }
    return corpus, config, run, quarantine


def test_the_corpus_holds_every_kind_of_damage_ten_thousand_times_over(faults):
    corpus, *_ = faults
    assert len(corpus.damaged) >= 10_000
    assert len(corpus.kinds()) == 21 and min(corpus.kinds().values()) >= 40, corpus.kinds()
    # Runs of unsound batches with a damaged length, each one quarantine row of several batches.
    merged = [row for row in corpus.expected.values() if "unreadable fragment" in row.reasons]
    assert len(merged) >= 500 and sum(row.raw_size > 130 for row in merged) >= 100


def test_the_run_succeeds_and_accounts_for_every_record(faults):
    corpus, _, run, quarantine = faults
    assert run.exit_code == 0
    assert run.counts["quarantine"] == len(quarantine) == len(corpus.expected)
    assert run.counts["decoded"] == len(corpus.intact)
    assert run.counts["raw_records"] == run.counts["decoded"] + run.counts["quarantine"]


def test_every_damaged_record_is_quarantined_with_a_reason_naming_its_damage(faults):
    corpus, _, _, quarantine = faults
    assert set(quarantine) == set(corpus.expected)
    wrong = [
        (position, expected, row.stage, row.reason)
        for position, expected in corpus.expected.items()
        if (row := quarantine[position]).stage != expected.stage
        or not all(fragment in row.reason for fragment in expected.reasons)
    ]
    assert wrong == []


def test_the_damaged_bytes_are_kept_exactly(faults):
    corpus, _, _, quarantine = faults
    wrong = [
        (position, expected.raw_size, row.value and len(row.value))
        for position, expected in corpus.expected.items()
        if (row := quarantine[position]).stage == "read" and (row.value is None or len(row.value) != expected.raw_size)
    ]
    assert wrong == []
    assert all(row.key is not None for row in quarantine.values() if row.stage != "read")


def test_every_intact_record_is_decoded(spark, faults):
    corpus, config, _, _ = faults
    decoded = {
        (row.source_partition, row.source_offset)
        for table in ("offset_commits", "group_metadata")
        for row in spark.table(config.table(table))
        .where(F.col("cluster") == config.cluster)
        .select("source_partition", "source_offset")
        .collect()
    }
    assert decoded == corpus.intact


def test_dump_reports_the_same_records_and_errors(faults):
    corpus, *_ = faults
    lines = list(dump_lines([str(corpus.root)]))
    assert {(line["partition"], line["offset"]) for line in lines if "error" in line} == set(corpus.expected)
    assert {(line["partition"], line["offset"]) for line in lines if "error" not in line} == corpus.intact
    assert len(lines) == len(corpus.expected) + len(corpus.intact)
