"""Which member records hold at each KIP-848 epoch (transforms/gold/epoch_spans.py `latest_before`), against
its definition: each anchor paired with every earlier event of its incarnation, the latest per key kept,
tombstones dropped. Seeded records of several groups, incarnations, members and tombstones."""

from __future__ import annotations

import random
from collections import Counter

from pyspark.sql import Window
from pyspark.sql import functions as F

from transforms.gold.epoch_spans import latest_before
from transforms.gold.generations import INCARNATION

EVENTS = "cluster string, group_id string, incarnation int, source_partition int, source_offset long,"
EVENTS += " member_id string, is_tombstone boolean, detail string"
ANCHORS = "cluster string, group_id string, incarnation int, source_partition int, generation int, anchor_offset long"


def _by_definition(anchors, events, key):
    joined = anchors.join(events, on=[*INCARNATION, "source_partition"], how="inner").where(
        F.col("source_offset") < F.col("anchor_offset")
    )
    latest = Window.partitionBy(*anchors.columns, key).orderBy(F.col("source_offset").desc())
    ranked = joined.withColumn("rank", F.row_number().over(latest))
    return ranked.where((F.col("rank") == 1) & ~F.col("is_tombstone")).drop("rank")


def _log(seed: int):
    draw = random.Random(seed)
    events, anchors = [], []
    for group in range(4):
        for incarnation in range(draw.randint(1, 2)):
            offset, generation = 1000 * group + 100 * incarnation, 0
            for _ in range(draw.randint(0, 40)):
                offset += 1
                if draw.random() < 0.25:
                    generation += 1
                    anchors.append(("c", f"g{group}", incarnation, group % 2, generation, offset))
                else:
                    member = f"m{draw.randint(0, 4)}" if draw.random() < 0.95 else None
                    events.append(("c", f"g{group}", incarnation, group % 2, offset, member,
                                   draw.random() < 0.15, f"e{offset}"))  # fmt: skip
    return events, anchors


def test_each_epoch_holds_each_members_latest_record_before_it(spark):
    for seed in (7, 8, 9):
        events_rows, anchor_rows = _log(seed)
        events = spark.createDataFrame(events_rows, EVENTS)
        anchors = spark.createDataFrame(anchor_rows, ANCHORS)

        held = _rows(latest_before(anchors, events, "member_id"))

        assert held == _rows(_by_definition(anchors, events, "member_id")), seed
        assert held.total() > len(anchor_rows)


def _rows(frame) -> Counter:
    return Counter(map(tuple, frame.select(*sorted(frame.columns)).collect()))
