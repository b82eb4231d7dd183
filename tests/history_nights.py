"""Nights of real lab captures, for history's incremental runs (tests/spark/test_history_fold_nights.py).

Seven captures of the 4.2.1 lab (a cooperative-sticky group, a KIP-848 handover, two KIP-848 groups, a
transactional producer's group, four lifecycle groups, two Kafka Streams groups, two share groups) make
one cluster of thirteen groups.
Their silver rows are cut into nights by position in the log (source_partition, source_offset: the log as
it stood at a moment) and appended night by night to real Delta silver tables with Change Data Feed on,
the way the incremental decode appends them. Along the way:
- night 1 ends between the two rounds of a cooperative rebalance, inside the KIP-848 handover, and
  inside a streams epoch and a share epoch (after their targets, before most members reached them);
- night 2 completes the rounds and brings the group's next cooperative rebalance, appends transactional
  commits as pending, goes on with the handover and ends inside the streams and share groups' next epochs;
- night 3 resolves the transactions (a Delta UPDATE of txn_state, as decode does when the marker comes),
  brings a late backup of a partition's oldest records, forgets a group (its silver rows deleted), ends
  the handover, brings the cooperative group's last generations, the streams and share groups' last
  epochs, a second streams group from creation to deletion, the rest of a second share group up to its
  deletion, and the kip848 group's departure and last epoch;
- night 4 brings commits only;
- night 5 brings nothing new.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.config import load_config
from jobs.history_topic_names import TABLE as TOPIC_NAMES
from jobs.steps.ingest import read_inputs
from jobs.tables import HISTORY_TABLES, SILVER_INPUTS, cluster_rows, materialized
from jobs.tables import table_location as location_of
from tests.delta_compare import canonical
from tests.lab_tables import CAPTURES
from transforms import silver
from transforms.decoder.log_transactions import TXN_ABORTED, TXN_COMMITTED, TXN_PENDING

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


def table_rows(rows: DataFrame) -> list[str]:
    """Every column of every row, as text, in a stable order (delta_compare's canonical form)."""
    return sorted(repr(canonical(row)) for row in rows.collect())


def history_tables(spark, config) -> dict[str, list[str]]:
    return {name: table_rows(cluster_rows(spark, config, name)) for name in (*HISTORY_TABLES, TOPIC_NAMES)}


def cooperative_rounds(spark, config) -> list[tuple]:
    """(first round, closing generation, round count) of the cooperative-sticky group's rebalances."""
    rows = cluster_rows(spark, config, "rebalances").where(F.col("group_id") == F.lit("cooperative-sticky"))
    return sorted(tuple(row) for row in rows.select("first_round_generation", "generation", "round_count").collect())
