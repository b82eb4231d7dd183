"""Incremental history equals a from-scratch rebuild, night after night, on real lab captures.

Seven captures of the 4.2.1 lab (a cooperative-sticky group, a KIP-848 handover, two KIP-848 groups, a
transactional producer's group, four lifecycle groups, two Kafka Streams groups, two share groups) make
one cluster of thirteen groups.
Their silver rows are cut into nights by position in the log (source_partition, source_offset: the log as
it stood at a moment) and appended night by night to real Delta silver tables with Change Data Feed on,
the way the incremental decode appends them; the history step runs after each night. Along the way:
- night 1 ends between the two rounds of a cooperative rebalance, inside the KIP-848 handover, and
  inside a streams epoch and a share epoch (after their targets, before most members reached them);
- night 2 completes the rounds and brings the group's next cooperative rebalance, appends transactional
  commits as pending, goes on with the handover and ends inside the streams and share groups' next epochs;
- night 3 resolves the transactions (a Delta UPDATE of txn_state, as decode does when the marker comes),
  brings a late backup of a partition's oldest records, forgets a group (its silver rows deleted), ends
  the handover, brings the cooperative group's last generations (it is framed from a row of the table:
  transforms/gold/frames.py), the streams and share groups' last epochs, a second streams group from
  creation to deletion, the rest of a second share group up to its deletion, and the kip848 group's
  departure and last epoch (it, share-lab and streams-lab are framed from a row too:
  transforms/gold/epoch_frames.py);
- night 4 brings commits that no rebalance reads (their group is not rebuilt);
- night 5 brings nothing new: the same run as night 4's again.
Night 1 rebuilds the cluster (no note yet). After the last night each history table equals, row by row
and column by column, what `--full` (a rebuild from scratch over the same silver) gives.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs import history_writes
from jobs.config import load_config
from jobs.history_topic_names import TABLE as TOPIC_NAMES
from jobs.runs import JobRun
from jobs.steps import history as history_step
from jobs.steps.decode import SILVER_SCHEMAS
from jobs.steps.ingest import read_inputs
from jobs.tables import HISTORY_TABLES, SILVER_INPUTS, cluster_rows, ensure_table, materialized
from jobs.tables import table_location as location_of
from jobs.watermarks import changes_since, current_version
from tests.delta_compare import canonical
from tests.delta_log import file_changes
from tests.lab_tables import CAPTURES
from transforms import silver
from transforms.decoder.log_transactions import TXN_ABORTED, TXN_COMMITTED, TXN_PENDING

DATABASE = "groupscope_incremental_history"
CLUSTER = "nights"
SCENARIOS = ("cooperative-sticky", "kip848-handover", "kip848", "transactions", "lifecycle", "streams", "share")
NIGHTS = 5
NEVER = 99  # the night of rows a scenario never appends (none today; keeps night_of total)


def _night(position: Column, cuts: list[tuple[int, int]]) -> Column:
    """The first night whose cut (night, last source_offset) the position is at or before."""
    night = F.lit(NEVER)
    for number, last_offset in reversed(cuts):
        night = F.when(position <= F.lit(last_offset), F.lit(number)).otherwise(night)
    return night


def night_of() -> Column:
    """Each record's night, by its place in its partition's log (see the module docstring)."""
    partition, offset = F.col("source_partition"), F.col("source_offset")
    return (
        # cooperative-sticky: generation 2 (offset 12) revokes, 3 (13) assigns: the two rounds fall on
        # two nights. Night 2 ends after the next rebalance's rounds (4 and 5); night 3 brings generations
        # 6 and 7 (offset 24, its last group record). After it only commits.
        F.when(partition == 37, _night(offset, [(1, 12), (2, 15), (3, 24), (4, 10**9)]))
        # kip848-handover: night 1 ends after the newcomer's first current assignment (11), before the
        # old member releases (16, 17); night 2 ends on the next epoch's bump (20), before its target.
        .when(partition == 27, _night(offset, [(1, 11), (2, 20), (3, 10**9)]))
        # kip848: epochs 1-2 on night 1, 3-5 on night 2 (anchor 41, its members' reconciliations 42, 43);
        # night 3 brings a member's departure (51) and epoch 6. kip848-regex: its first epoch on night 1.
        .when(partition == 8, _night(offset, [(1, 18), (2, 43), (3, 10**9)]))
        .when(partition == 24, _night(offset, [(1, 5), (2, 10**9)]))
        # transactions: the group's first generation on night 1, its commits and its end on night 2.
        .when(partition == 28, _night(offset, [(1, 1), (2, 10**9)]))
        # lifecycle: life-empty's first two records (offsets 0 and 1 of partition 32) are a backup
        # found on night 3, after its later records came on night 1; partition 10 comes on night 2.
        .when(partition == 32, F.when(offset <= 1, F.lit(3)).otherwise(F.lit(1)))
        .when(partition == 10, F.lit(2))
        .when(partition == 16, F.lit(1))
        # streams: streams-lab's epoch 5 (target at 29) is cut after its newcomer's first current
        # assignments (30, 31); night 2 ends on epoch 7's target (59), before its member reaches it (60-62):
        # night 3 frames the group from epoch 5, whose member 8__fJ3 holds tasks since its current
        # assignment at 7 (epoch 3), carried from epoch 4's row. Partition 21 (streams-lab-deleted, created
        # to deleted) comes on night 3; partition 17 (streams-lab-grow) never.
        .when(partition == 47, _night(offset, [(1, 31), (2, 59), (3, 10**9)]))
        .when(partition == 21, F.lit(3))
        # share: share-lab's epoch 4 (target at 22) is cut before its members' current assignments (23-26);
        # night 2 ends after epoch 7's target (40). share-lab-deleted (partition 19): its first two epochs
        # on night 1, the rest and its deletion on night 3.
        .when(partition == 15, _night(offset, [(1, 22), (2, 40), (3, 10**9)]))
        .when(partition == 19, _night(offset, [(1, 10), (3, 10**9)]))
        .otherwise(F.lit(NEVER))
    )


FORGOTTEN_GROUP = "life-expired"  # forgotten on night 3
PENDING_NIGHT = 2  # transactional commits resolved on that night are appended as pending, resolved the next


_LAB_SILVER: dict[int, dict[str, DataFrame]] = {}


def lab_silver(spark) -> dict[str, DataFrame]:
    """The scenarios' silver rows (as decode makes them) in one cluster, each with its `night`; made once
    per session (tests/spark/test_vacuumed_changes.py takes them too)."""
    if id(spark) not in _LAB_SILVER:
        _LAB_SILVER[id(spark)] = _decoded_lab_silver(spark)
    return _LAB_SILVER[id(spark)]


def _decoded_lab_silver(spark) -> dict[str, DataFrame]:
    raw = None
    for scenario in SCENARIOS:
        path = CAPTURES / "kafka-4.2.1" / scenario
        config = load_config(overrides={"input": {"cluster": scenario, "segment_paths": [str(path)]}})
        rows = read_inputs(spark, config, "incremental-history")
        raw = rows if raw is None else raw.unionByName(rows)
    decoded = materialized(silver.decode_raw_records(raw).withColumn("cluster", F.lit(CLUSTER)))
    tables = {
        "offset_commits": silver.filter_offset_commits(decoded),
        "group_metadata": silver.filter_group_metadata(decoded),
        "group_members": silver.explode_group_members(decoded),
        "consumer_group_records": silver.filter_consumer_group_records(decoded),
    }
    return {name: materialized(rows.withColumn("night", night_of())) for name, rows in tables.items()}


def append_night(spark, config, lab: dict[str, DataFrame], night: int) -> None:
    """Appends the night's rows to each silver table; transactional commits whose marker the capture has
    are appended pending on PENDING_NIGHT."""
    for name, rows in lab.items():
        tonight = rows.where(F.col("night") == night)
        if name == "offset_commits" and night == PENDING_NIGHT:
            is_resolved = F.col("txn_state").isin(TXN_COMMITTED, TXN_ABORTED)
            tonight = tonight.withColumn("txn_state", F.when(is_resolved, F.lit(TXN_PENDING)).otherwise("txn_state"))
        tonight.drop("night").write.format("delta").mode("append").save(location_of(spark, config.table(name)))


def resolve_transactions(spark, config, lab: dict[str, DataFrame]) -> None:
    """The markers of PENDING_NIGHT's commits arrive: decode updates their txn_state in place."""
    resolved = (
        lab["offset_commits"]
        .where((F.col("night") == PENDING_NIGHT) & F.col("txn_state").isin(TXN_COMMITTED, TXN_ABORTED))
        .select("record_id", "txn_state")
        .collect()
    )
    table = DeltaTable.forName(spark, config.table("offset_commits"))
    for state in (TXN_COMMITTED, TXN_ABORTED):
        ids = [row["record_id"] for row in resolved if row["txn_state"] == state]
        assert ids, f"the transactions capture has {state} commits"
        table.update((F.col("cluster") == F.lit(CLUSTER)) & F.col("record_id").isin(ids), {"txn_state": F.lit(state)})


def forget(spark, config, group_id: str) -> None:
    for name in SILVER_INPUTS:
        DeltaTable.forName(spark, config.table(name)).delete(
            (F.col("cluster") == F.lit(CLUSTER)) & (F.col("group_id") == F.lit(group_id))
        )


def run_history(spark, config) -> dict[str, int]:
    with JobRun(spark, config, "history") as run:
        history_step.history(spark, config, run)
    assert run.exit_code == 0, "the history run failed; its traceback is in logs/"
    return dict(run.counts)


def table_rows(rows: DataFrame) -> list[str]:
    """Every column of every row, as text, in a stable order (delta_compare's canonical form)."""
    return sorted(repr(canonical(row)) for row in rows.collect())


def history_tables(spark, config) -> dict[str, list[str]]:
    return {name: table_rows(cluster_rows(spark, config, name)) for name in (*HISTORY_TABLES, TOPIC_NAMES)}


def cooperative_rounds(spark, config) -> list[tuple]:
    """(first round, closing generation, round count) of the cooperative-sticky group's rebalances."""
    rows = cluster_rows(spark, config, "rebalances").where(F.col("group_id") == F.lit("cooperative-sticky"))
    return sorted(tuple(row) for row in rows.select("first_round_generation", "generation", "round_count").collect())


@pytest.fixture(scope="module")
def nights(spark, spark_config):
    """Runs the nights; per night: the run's counts, its tables, the cooperative group's rounds, and each
    history table's version after the run."""
    return _run_nights(spark, replace(spark_config, database=DATABASE, cluster=CLUSTER))


def _run_nights(spark, config):
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    for name in SILVER_INPUTS:
        ensure_table(spark, config.table(name), SILVER_SCHEMAS[name], partition_by=("cluster",), change_feed=True)
    lab = lab_silver(spark)
    results = []
    for night in range(1, NIGHTS + 1):
        append_night(spark, config, lab, night)
        if night == PENDING_NIGHT + 1:
            resolve_transactions(spark, config, lab)
        if night == 3:
            forget(spark, config, FORGOTTEN_GROUP)
        listed = history_writes.MAX_LISTED_GROUPS
        if night == 3:  # more groups touched than listed: the run rewrites the cluster, keeping the others
            history_writes.MAX_LISTED_GROUPS = 1
        try:
            counts = run_history(spark, config)
        finally:
            history_writes.MAX_LISTED_GROUPS = listed
        versions = {name: current_version(spark, config.table(name)) for name in HISTORY_TABLES}
        results.append((counts, history_tables(spark, config), cooperative_rounds(spark, config), versions))
    return config, lab, results


def test_the_first_night_rebuilds_every_group_and_later_nights_only_the_touched(nights):
    _, _, results = nights
    rebuilt = [counts["groups_rebuilt"] for counts, *_ in results]
    # 1: no note yet, every group of the night (11: life-expired's partition comes on night 2, and
    #    streams-lab-deleted's on night 3).
    # 2: cooperative-sticky and handover-1 (new records), txn-app (its commits and end), life-expired (new),
    #    streams-lab, share-lab, kip848 and kip848-regex (new records).
    # 3: handover-1 (its end), txn-app (its commits resolved: its leaving member's departure reads them),
    #    life-empty (a backup of its oldest records), life-expired (forgotten), cooperative-sticky,
    #    streams-lab, streams-lab-deleted, share-lab, share-lab-deleted and kip848 (new records).
    # 4: none: cooperative-sticky's new commits come after the commits any of its rebalances reads.
    # 5: nothing new.
    assert rebuilt == [11, 8, 10, 0, 0]
    kept = [counts.get("rebalances_kept", 0) for counts, *_ in results]
    print("rebalances kept per night:", kept)
    # The rebuilt groups' settled rebalances are kept, not recomputed (none on night 1: no table yet);
    # the last test shows the kept rows are what a rebuild from scratch gives.
    assert kept[0] == 0 and kept[1] > 0 and kept[2] > 0, kept


def test_later_nights_name_topic_ids_from_the_kept_pairs_and_their_own_commits(nights):
    """The streams groups' commits carry topic ids (night 1 and night 3 bring some); the forget of night 3
    deletes commits without one, so no pair can be gone: every later night continues from the table."""
    _, _, results = nights
    assert [counts["commit_topic_names_continued"] for counts, *_ in results] == [0, 1, 1, 1, 1]
    pairs = [len(tables[TOPIC_NAMES]) for _, tables, *_ in results]
    assert 0 < pairs[0] <= pairs[2] == pairs[3] == pairs[4], pairs


def test_a_cooperative_rebalance_whose_rounds_fall_on_two_nights_is_one_rebalance(nights):
    _, _, results = nights
    night_one, night_two = results[0][2], results[1][2]
    # Night 1 ends with generation 2, a revoke round with nothing after it yet: it closes a rebalance.
    assert (2, 2, 1) in night_one
    # Night 2 brings generation 3: generations 2 and 3 are one rebalance.
    assert (2, 3, 2) in night_two and (2, 2, 1) not in night_two


def test_a_night_with_nothing_new_changes_nothing(nights):
    _, _, results = nights
    assert results[4][1] == results[3][1]


def test_a_full_run_gives_the_same_tables(spark, nights):
    config, _, results = nights
    incremental = results[-1][1]
    run_history(spark, replace(config, full=True))
    from_scratch = history_tables(spark, config)
    for name in (*HISTORY_TABLES, TOPIC_NAMES):
        assert from_scratch[name] == incremental[name], f"{name}: the nights' rows differ from a --full rebuild"
    assert run_history(spark, config)["groups_rebuilt"] == 0  # the full run noted what it covered


def test_the_what_if_and_capacity_tables_are_rebuilt_with_the_groups(nights):
    _, _, results = nights
    tables = results[-1][1]
    # the equality above would hold for empty tables too: the cooperative-sticky group's rebalances are
    # replayed by its protocol's four assignors, and its generations have capacity rows
    cooperative = "('group_id', 'cooperative-sticky')"
    assert sum(cooperative in row for row in tables["rebalance_whatif"]) >= 4
    assert any(cooperative in row for row in tables["generation_capacity"])


def test_streams_members_follow_their_group_across_nights(nights):
    """streams_members' rows of the group cut inside two epochs: every epoch of it, standby tasks among them."""
    _, _, results = nights
    night_one, last = results[0][1]["streams_members"], results[-1][1]["streams_members"]
    streams_lab = "('group_id', 'streams-lab')"
    assert 0 < sum(streams_lab in row for row in night_one) < sum(streams_lab in row for row in last)
    assert any(streams_lab in row and "('standby_tasks', ())" not in row for row in last), last[:2]


def test_share_groups_follow_their_epochs_across_nights(nights):
    """The share group cut inside two epochs: more generations after the last night than after the first,
    and the deleted one ends deleted."""
    _, _, results = nights
    night_one, last = results[0][1]["generations"], results[-1][1]["generations"]
    share_lab, deleted = "('group_id', 'share-lab')", "('group_id', 'share-lab-deleted')"
    assert 0 < sum(share_lab in row for row in night_one) < sum(share_lab in row for row in last)
    assert any(deleted in row and "('state', 'deleted')" in row for row in last)
    assert not any(deleted in row and "('state', 'deleted')" in row for row in night_one)


def test_a_classic_group_is_taken_up_from_a_row_of_the_table(nights):
    """cooperative-sticky on night 3: its changes start at generation 6. Its rebalances closing at 1 and 3
    are settled (two later generations, 4 and 5, before the changes); the one closing at 5 (rounds 4, 5)
    is computed again, so the group is framed from that one's `before`, generation 3: the rows of
    generations 0, 1 and 2 are kept as the table holds them (the full run's equality above shows them
    right). On night 2 its first rebalance is not settled yet: framed from its first row, nothing kept."""
    _, _, results = nights
    kept = [counts.get("generations_kept", 0) for counts, *_ in results]
    # Epoch groups too (tests below): share-lab keeps epoch 1 on night 2 and epochs 1-3 on night 3, kip848
    # its epochs 1 and 2 on night 3, streams-lab its epochs 3 and 4 on night 3.
    assert kept == [0, 1, 10, 0, 0], kept


def _changed_generations(spark, config, results, night: int, name: str, group_id: str) -> set[int]:
    before, after = results[night - 2][3], results[night - 1][3]
    rows = changes_since(spark, config.table(name), before[name], after[name]).where(
        (F.col("cluster") == F.lit(CLUSTER)) & (F.col("group_id") == F.lit(group_id))
    )
    return {row["generation"] for row in rows.select("generation").collect()}


def test_an_epoch_group_is_taken_up_from_a_row_and_its_open_holdings_closed_before_it(spark, nights):
    """share-lab on night 3: its changes start at offset 41, where member yPIH releases topic ngOl's
    partitions, held since epoch 2. Epochs 6 and 7, recorded before the change, settle the rebalance
    closing at 4, so the group is framed from epoch 4 (after its prefix: the records before that anchor
    that still count) and epochs 1-3 are kept; but epochs 2 and 3 list that holding open (owned_until
    null), and the run closes it there: their rows are written again, epoch 1's is not. Epoch 3, the
    row before the frame, gets its assignment rows again (valid_until follows the holdings it hands on);
    epochs 1 and 2 keep theirs. The full run's equality above shows the values right."""
    config, _, results = nights
    written = _changed_generations(spark, config, results, 3, "generations", "share-lab")
    assert {2, 3} <= written and 1 not in written, written
    assigned = _changed_generations(spark, config, results, 3, "generation_assignments", "share-lab")
    assert 3 in assigned and not {1, 2} & assigned, assigned
    framed = _changed_generations(spark, config, results, 3, "generations", "kip848")
    assert 3 in framed and not {1, 2} & framed, framed
    # share-lab on night 2 (from epoch 2), share-lab, kip848 and streams-lab on night 3.
    assert [counts.get("epoch_groups_framed_from_a_row", 0) for counts, *_ in results] == [0, 1, 3, 0, 0]


def test_a_streams_group_is_taken_up_from_a_row_with_its_members(spark, nights):
    """streams-lab on night 3 is framed from epoch 5 (the rebalances closing at 6 and 7 are computed
    again): its members' active tasks (value_json) are carried from the row before the frame as a KIP-848
    member's partitions are (8__fJ3 holds tasks since epoch 3). Epochs 3 and 4 keep their generation and
    streams_members rows as the tables hold them; the group's later epochs are written again in both. The
    full run's equality above shows the values right (ownership and standby tasks among them)."""
    config, _, results = nights
    tables_before = results[1][3]
    epochs_before = {
        row["generation"]
        for row in spark.read.format("delta")
        .option("versionAsOf", tables_before["generations"])
        .table(config.table("generations"))
        .where((F.col("cluster") == F.lit(CLUSTER)) & (F.col("group_id") == F.lit("streams-lab")))
        .select("generation")
        .collect()
    }
    written = _changed_generations(spark, config, results, 3, "generations", "streams-lab")
    kept = epochs_before - written
    assert kept == {3, 4} and written, (epochs_before, written)
    members_written = _changed_generations(spark, config, results, 3, "streams_members", "streams-lab")
    assert members_written and not kept & members_written, (kept, members_written)


def test_rows_kept_stay_where_the_tables_hold_them(spark, nights):
    """Night 3 keeps cooperative-sticky's generations 0-2 and its rebalances closing at 1 and 3: the run
    neither deletes nor adds their generation, assignment, capacity, rebalance, movement or what-if rows
    (rewriting them every night made a night's writes grow with the history), and it does replace the
    group's others."""
    config, _, results = nights
    before, after = results[1][3], results[2][3]
    kept_keys = {
        "generations": [0, 1, 2],
        "generation_assignments": [0, 1, 2],
        "generation_capacity": [0, 1, 2],
        "rebalances": [1, 3],
        "partition_movements": [1, 3],
        "rebalance_whatif": [1, 3],
    }
    for name, generations in kept_keys.items():
        changed = (
            changes_since(spark, config.table(name), before[name], after[name])
            .where((F.col("cluster") == F.lit(CLUSTER)) & (F.col("group_id") == F.lit("cooperative-sticky")))
            .select("generation", "_change_type")
            .collect()
        )
        assert not [row for row in changed if row["generation"] in generations], (name, changed)
        assert any(row["generation"] not in generations for row in changed), f"{name}: the group's others replaced"


def test_a_night_writes_no_kept_row_again(spark, nights):
    """Night 2 deletes the touched groups' rows from their frames on and adds the recomputed ones: the rows
    deleted are marked in deletion vectors, so no kept row is copied into a new file. Without them every
    file holding a deleted row was written again whole (at the bench's night 7 nearly every row of
    generation_assignments, a cost that grew with the history)."""
    config, _, results = nights
    night_2 = results[1][3]
    changes = {
        name: file_changes(spark, config.table(name), night_2[name])
        for name in ("generations", "generation_assignments", "generation_capacity", "rebalances", "rebalance_whatif")
    }
    assert not {name: found.rewritten for name, found in changes.items() if found.rewritten}, changes
    deleted = {name: len(found.marked) for name, found in changes.items()}
    assert deleted["generations"] > 0 and deleted["generation_assignments"] > 0, deleted
