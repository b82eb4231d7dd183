"""Fault injection through the Spark pipeline: over ten thousand damaged records, each one accounted for.

The corpus (tests/fault_corpus.py) damages the log layer and the record layer in every way the
issue lists; the ingest and decode jobs must succeed, quarantine each damaged item with a reason
that names its damage, decode every intact record, and balance raw = decoded + quarantined.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.sql import functions as F

from jobs.decode import decode
from jobs.ingest import ingest
from jobs.runs import JobRun
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
    assert len(corpus.kinds()) == 15 and min(corpus.kinds().values()) >= 40, corpus.kinds()


def test_the_run_succeeds_and_accounts_for_every_record(faults):
    corpus, _, run, quarantine = faults
    assert run.exit_code == 0
    assert run.counts["quarantine"] == len(quarantine) == len(corpus.damaged)
    assert run.counts["decoded"] == len(corpus.intact)
    assert run.counts["raw_records"] == run.counts["decoded"] + run.counts["quarantine"]


def test_every_damaged_record_is_quarantined_with_a_reason_naming_its_damage(faults):
    corpus, _, _, quarantine = faults
    assert set(quarantine) == set(corpus.damaged)
    wrong = [
        (damage.kind, row.stage, row.reason)
        for position, damage in corpus.damaged.items()
        if (row := quarantine[position]).stage != damage.stage or damage.reason not in row.reason
    ]
    assert wrong == []


def test_the_damaged_bytes_are_kept(faults):
    _, _, _, quarantine = faults
    empty = [row for row in quarantine.values() if not (row.value if row.stage == "read" else row.key is not None)]
    assert empty == []


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
