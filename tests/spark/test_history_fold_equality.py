"""The history fold (transforms/history) against today's Spark history, row by row, on every lab capture.

For each classic group (consumer protocol and Connect's), each KIP-848 consumer group, and each share and
streams group of the lab's tables (the session's `lab` fixture: built once, shared with the ground-truth
tests), its silver records and counted commits are collected and folded in pure Python (an epoch group
with the topic names Spark's history resolves: transforms.gold.topic_names over the lab's records and
commits); every row of gold `generations`, `generation_assignments`, `generation_capacity`, `rebalances`,
`partition_movements`, `rebalance_frequency` and `streams_members` must equal the Spark rows of that
group, column for column. Folding each group's log in two at every cut, as a first and a continuing night
would, must give the same rows again.
Its cost beside the shared fixture: 5.0 s for the classic groups (collecting the rows, then about 2 s of
folding; 2 cores, quiet). The epoch groups' test took 16.5 s for the KIP-848 groups alone and 25.3 s with
the share and streams groups (one set of collects for all three kinds), on a busy machine where the
classic groups' took 11-12 s.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from pyspark.sql import functions as F

from jobs.config import GoldSettings
from lab.broker import CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS, CONSUMER_GROUP_SESSION_TIMEOUT_MS
from schemas import gold
from tests.delta_compare import canonical
from tests.history_fold import fold_at_once, fold_in_two, in_order
from transforms.gold import offsets, topic_names
from transforms.history import twins
from transforms.history.fold import TABLES
from transforms.history.records import CONSUMER_GROUP_RECORD_TYPES, classic_records, consumer_records
from transforms.history.settings import HistorySettings

GROUP = ("cluster", "group_id")
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
    """Groups with classic records only (consumer protocol and Connect's; no KIP-848, share or streams)."""
    others = lab["consumer_group_records"].select(*GROUP)
    classic = lab["group_metadata"].select(*GROUP).distinct().join(others, on=list(GROUP), how="left_anti")
    return sorted(tuple(row) for row in classic.collect())


def _collector(lab, groups: list[tuple]):
    wanted = lab["group_metadata"].sparkSession.createDataFrame(groups, "cluster string, group_id string")

    def collected(rows):
        return _by_group(rows.join(F.broadcast(wanted), on=list(GROUP), how="left_semi").collect())

    return collected


def _differences(groups, records_of, commits, spark_rows, names_of=lambda group: None) -> tuple[list, int, list]:
    """(rows that differ, rows compared, cuts whose fold in two differs) over the groups' folds."""
    differences, compared, cut_differences = [], 0, []
    for group in groups:
        records, names = records_of(group), names_of(group)
        expected = table_rows({name: spark_rows[name].get(group, []) for name in TABLES})
        folded = fold_at_once(records, commits.get(group, []), SETTINGS, names)
        for name in TABLES:
            assert all(set(row) == set(gold.GOLD_SCHEMAS[name].names) for row in folded[name]), name
        actual = table_rows(folded)
        compared += sum(len(rows) for rows in expected.values())
        for name in (name for name in TABLES if actual[name] != expected[name]):
            only_folded = [row for row in actual[name] if row not in expected[name]]
            only_spark = [row for row in expected[name] if row not in actual[name]]
            differences.append((group, name, only_folded[:1], only_spark[:1]))
        at_once = in_order(folded)
        for cut in range(len(records) + len(commits.get(group, [])) + 1):
            if in_order(fold_in_two(records, commits.get(group, []), cut, SETTINGS, names)) != at_once:
                cut_differences.append((group, cut))
    return differences, compared, cut_differences


def test_the_fold_gives_the_spark_history_of_every_classic_lab_group(lab):
    groups = _classic_groups(lab)
    collected = _collector(lab, groups)
    metadata, members = collected(lab["group_metadata"]), collected(lab["group_members"])
    commits = collected(offsets.filter_uncounted_commits(lab["offset_commits"]))
    spark_rows = {name: collected(lab[name]) for name in TABLES}
    differences, compared, cut_differences = _differences(
        groups, lambda group: classic_records(metadata[group], members[group]), commits, spark_rows
    )
    assert len(groups) >= 59, groups  # every capture's classic groups (55, and 4 of Connect, when this was written)
    assert compared >= 2_000, compared  # 2,094 when this was written
    assert differences == []
    assert cut_differences == []


def _epoch_groups(lab) -> dict[tuple, str]:
    """Groups with epoch records only (no classic record) -> their kind: consumer (KIP-848), share or streams."""
    typed = lab["consumer_group_records"].select(*GROUP, "record_type").distinct()
    kinds: dict[tuple, set] = defaultdict(set)
    for row in typed.join(lab["group_metadata"].select(*GROUP), on=list(GROUP), how="left_anti").collect():
        kind = twins.group_protocol(row["record_type"])
        if kind is None and row["record_type"] in CONSUMER_GROUP_RECORD_TYPES:
            kind = twins.GROUP_PROTOCOL_CONSUMER
        kinds[(row["cluster"], row["group_id"])].add(kind)
    return {group: next(kind for kind in found if kind is not None) for group, found in kinds.items()}


def _cluster_topic_names(lab) -> dict[str, dict]:
    """cluster -> topic id -> (topic, topic_name_source), as the lab's history named them (no topic-id table)."""
    spark = lab["consumer_group_records"].sparkSession
    no_topic_ids = spark.createDataFrame([], "cluster string, topic_id string, topic string, source string")
    names: dict[str, dict] = defaultdict(dict)
    for row in topic_names.topic_names(lab["consumer_group_records"], lab["offset_commits"], no_topic_ids).collect():
        names[row["cluster"]][row["topic_id"]] = (row["topic"], row["topic_name_source"])
    return names


def test_the_fold_gives_the_spark_history_of_every_kip848_share_and_streams_lab_group(lab):
    kinds = _epoch_groups(lab)
    groups = sorted(kinds)
    collected = _collector(lab, groups)
    records = collected(lab["consumer_group_records"])
    commits = collected(offsets.filter_uncounted_commits(lab["offset_commits"]))
    spark_rows = {name: collected(lab[name]) for name in TABLES}
    names = _cluster_topic_names(lab)
    differences, compared, cut_differences = _differences(
        groups, lambda group: consumer_records(records[group]), commits, spark_rows, lambda group: names[group[0]]
    )
    counts = Counter(kinds.values())
    # every capture's KIP-848 groups, and its share and streams groups (4.2.1-4.4.0): 18, 6 and 12 when written
    assert counts["consumer"] >= 12 and counts["share"] >= 6 and counts["streams"] >= 9, counts
    assert compared >= 1_100, compared  # 1,210 when this was written without the 3 streams-topology groups
    members = [row for rows in spark_rows["streams_members"].values() for row in rows]
    standby_moves = [row["moved_standby_task_count"] or 0 for rows in spark_rows["rebalances"].values() for row in rows]
    assert len(members) >= 40 and max(standby_moves) > 0  # compared, and not all empty
    assert differences == []
    assert cut_differences == []
