"""Which records of a KIP-848, share or streams group hold at each of its epochs (transforms/gold/epochs.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from transforms.gold.generations import INCARNATION


def latest_before(anchors: DataFrame, events: DataFrame, key: str) -> DataFrame:
    """For each anchor (a type 6 record), each key's latest event earlier in the log, tombstones dropped.

    An event holds for the anchors after it up to its key's next event: counting the anchors along the
    log gives each event that span, so an event meets only the anchors it holds for (joining each anchor
    with every earlier event, then ranking, grew with the square of a group's history)."""
    place = [*INCARNATION, "source_partition"]
    is_anchor = F.col("_is_anchor")
    marks = anchors.select(*place, F.col("anchor_offset").alias("source_offset"), F.lit(True).alias("_is_anchor"))
    along_log = Window.partitionBy(*place).orderBy("source_offset")
    counted = (
        events.withColumn("_is_anchor", F.lit(False))
        .unionByName(marks, allowMissingColumns=True)
        .withColumns(
            {
                "_anchors_before": F.count(F.when(is_anchor, 1)).over(
                    along_log.rowsBetween(Window.unboundedPreceding, Window.currentRow)
                ),
                "_anchors": F.count(F.when(is_anchor, 1)).over(Window.partitionBy(*place)),
            }
        )
        .where(~is_anchor)
    )
    next_of_key = F.lead("_anchors_before").over(Window.partitionBy(*place, key).orderBy("source_offset"))
    held = (
        counted.withColumns({"_first": F.col("_anchors_before") + 1, "_last": F.coalesce(next_of_key, "_anchors")})
        .where(~F.col("is_tombstone") & (F.col("_first") <= F.col("_last")))
        .withColumn("_anchor_number", F.explode(F.sequence("_first", "_last")))
        .drop("_is_anchor", "_anchors_before", "_anchors", "_first", "_last")
    )
    numbered = anchors.withColumn(
        "_anchor_number", F.row_number().over(Window.partitionBy(*place).orderBy("anchor_offset"))
    )
    return numbered.join(held, on=[*place, "_anchor_number"], how="inner").drop("_anchor_number")
