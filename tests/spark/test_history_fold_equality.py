"""The history fold (transforms/history) against today's Spark history, row by row, on every lab capture.

For each classic consumer group of the lab's tables (the session's `lab` fixture: built once, shared
with the ground-truth tests), its silver records and counted commits are collected and folded in pure
Python; every row of gold `generations`, `generation_assignments`, `generation_capacity`, `rebalances`,
`partition_movements` and `rebalance_frequency` must equal the Spark rows of that group, column for
column. Folding each group's
log in two at every cut, as a first and a continuing night would, must give the same rows again.
Its cost beside the shared fixture: 5.0 s (collecting the rows, then about 2 s of folding; 2 cores).
"""

from __future__ import annotations

from collections import defaultdict

from pyspark.sql import functions as F

from jobs.config import GoldSettings
from lab.broker import CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS, CONSUMER_GROUP_SESSION_TIMEOUT_MS
from schemas import gold
from tests.delta_compare import canonical
from tests.history_fold import fold_at_once, fold_in_two, in_order
from transforms.gold import offsets
from transforms.history.fold import TABLES
from transforms.history.records import classic_records
from transforms.history.settings import HistorySettings

GROUP = ("cluster", "group_id")
# Classic groups of the consumer protocol; Kafka 4 writes an Empty group's first record with protocol type ''.
CONSUMER_PROTOCOL_TYPES = ("consumer", "")
DEFAULTS = GoldSettings()
# The lab tables' settings (tests/lab_tables.py), as the fold takes them.
SETTINGS = HistorySettings(
    cooperative_round_gap_ms=DEFAULTS.cooperative_round_gap_ms,
    departure_slack_ms=DEFAULTS.departure_slack_ms,
    storm_rebalances_per_hour=DEFAULTS.storm_rebalances_per_hour,
    default_session_timeout_ms=CONSUMER_GROUP_SESSION_TIMEOUT_MS,
    default_heartbeat_interval_ms=CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS,
)


def table_rows(tables) -> dict[str, list]:
    """Each table's rows in a canonical, order-free form, whether collected from Spark or folded."""
    return {name: sorted((canonical(row) for row in tables[name]), key=repr) for name in TABLES}


def _by_group(rows) -> dict[tuple, list[dict]]:
    grouped = defaultdict(list)
    for row in rows:
        record = row.asDict(recursive=True)
        grouped[tuple(record[key] for key in GROUP)].append(record)
    return grouped


def _classic_groups(lab) -> list[tuple]:
    """Groups with classic records of the consumer protocol only (no Connect, no KIP-848, share or streams)."""
    metadata = lab["group_metadata"]
    is_other = ~F.col("is_tombstone") & ~F.col("protocol_type").isin(*CONSUMER_PROTOCOL_TYPES)
    others = metadata.where(is_other).select(*GROUP).unionByName(lab["consumer_group_records"].select(*GROUP))
    classic = metadata.select(*GROUP).distinct().join(others, on=list(GROUP), how="left_anti")
    return sorted(tuple(row) for row in classic.collect())


def test_the_fold_gives_the_spark_history_of_every_classic_lab_group(lab):
    groups = _classic_groups(lab)
    wanted = lab["group_metadata"].sparkSession.createDataFrame(groups, "cluster string, group_id string")

    def collected(rows):
        return _by_group(rows.join(F.broadcast(wanted), on=list(GROUP), how="left_semi").collect())

    metadata, members = collected(lab["group_metadata"]), collected(lab["group_members"])
    commits = collected(offsets.filter_uncounted_commits(lab["offset_commits"]))
    spark_rows = {name: collected(lab[name]) for name in TABLES}
    differences, compared, cut_differences = [], 0, []
    for group in groups:
        records = classic_records(metadata[group], members[group])
        expected = table_rows({name: spark_rows[name][group] for name in TABLES})
        folded = fold_at_once(records, commits[group], SETTINGS)
        for name in TABLES:
            assert all(set(row) == set(gold.GOLD_SCHEMAS[name].names) for row in folded[name]), name
        actual = table_rows(folded)
        compared += sum(len(rows) for rows in expected.values())
        for name in (name for name in TABLES if actual[name] != expected[name]):
            only_folded = [row for row in actual[name] if row not in expected[name]]
            only_spark = [row for row in expected[name] if row not in actual[name]]
            differences.append((group, name, only_folded[:1], only_spark[:1]))
        at_once = in_order(folded)
        for cut in range(len(records) + len(commits[group]) + 1):
            if in_order(fold_in_two(records, commits[group], cut, SETTINGS)) != at_once:
                cut_differences.append((group, cut))
    assert len(groups) >= 50, groups  # every capture's classic groups (55 when this was written)
    assert compared >= 2_000, compared  # 2,094 when this was written
    assert differences == []
    assert cut_differences == []
