"""Which member records hold at each KIP-848 epoch, against their definitions on seeded records (several
groups, incarnations, members, tombstones): transforms/gold/epoch_spans.py `latest_before` (each anchor
paired with every earlier event of its incarnation, the latest per key kept, tombstones dropped) and
transforms/gold/ownership.py `ending_states` (each epoch member's latest current assignment before the
next epoch)."""

from __future__ import annotations

import random
from collections import Counter

from pyspark.sql import Window
from pyspark.sql import functions as F

from transforms.gold.epoch_spans import latest_before
from transforms.gold.epochs import ANCHOR as EPOCH_ANCHOR
from transforms.gold.generations import INCARNATION
from transforms.gold.ownership import MEMBER, ending_states

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


STATES = "cluster string, group_id string, incarnation int, member_id string, seq int, source_offset long,"
STATES += " is_tombstone boolean"
MEMBERS_AT = "cluster string, group_id string, incarnation int, generation int, anchor_offset long,"
MEMBERS_AT += " member_id string, next_anchor_offset long"


def test_each_epoch_ends_on_each_members_latest_state_before_the_next_epoch(spark):
    draw = random.Random(11)
    states, members_at = [], []
    for member in range(6):
        offsets = sorted(draw.sample(range(1, 400), draw.randint(0, 30)))
        states += [("c", "g", 0, f"m{member}", seq, offset, draw.random() < 0.1)
                   for seq, offset in enumerate(offsets, start=1)]  # fmt: skip
    anchor_offsets = sorted(draw.sample(range(1, 400), 25))
    for number, offset in enumerate(anchor_offsets):
        next_offset = anchor_offsets[number + 1] if number + 1 < len(anchor_offsets) else None
        members_at += [("c", "g", 0, number, offset, f"m{member}", next_offset) for member in range(6)
                       if draw.random() < 0.8]  # fmt: skip
    states = [row for row in states if row[5] not in anchor_offsets]  # one offset, one record
    state_frame = spark.createDataFrame(states, STATES)
    members_frame = spark.createDataFrame(members_at, MEMBERS_AT)

    walked = _rows(ending_states(state_frame, members_frame, EPOCH_ANCHOR))

    joined = members_frame.join(state_frame.where(~F.col("is_tombstone")), on=list(MEMBER), how="inner").where(
        F.col("next_anchor_offset").isNull() | (F.col("source_offset") < F.col("next_anchor_offset"))
    )
    latest = Window.partitionBy(*EPOCH_ANCHOR, "member_id").orderBy(F.col("source_offset").desc())
    by_definition = joined.withColumn("rank", F.row_number().over(latest)).where(F.col("rank") == 1)
    assert walked == _rows(by_definition.select(*EPOCH_ANCHOR, "member_id", "seq"))
    assert walked.total() > 20
