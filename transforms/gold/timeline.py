"""As-of lookups on event streams: for each probe, the latest event at or before its time (or the
earliest event after it), with the same keys.

Done as one sort per key (union probes and events, then a running `last(..., ignorenulls)` over the
ordered stream) instead of a range join, whose size grows with events x probes per key.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

_PROBE, _EVENT, _TIME, _KIND = "_probe", "_event", "_time", "_kind"


def _stream(
    probes: DataFrame,
    events: DataFrame,
    keys: Sequence[str],
    probe_time: str,
    event_time: str,
    event_order: Sequence[str],
    event_kind: int,
) -> DataFrame:
    event_type = events.select(F.struct(*events.columns).alias(_EVENT)).schema[_EVENT].dataType
    probe_type = probes.select(F.struct(*probes.columns).alias(_PROBE)).schema[_PROBE].dataType
    order_columns = [F.col(name).alias(f"_order_{index}") for index, name in enumerate(event_order)]
    no_order = [
        F.lit(None).cast(events.schema[name].dataType).alias(f"_order_{i}") for i, name in enumerate(event_order)
    ]
    probe_rows = probes.select(
        *[F.col(key) for key in keys],
        F.col(probe_time).alias(_TIME),
        F.lit(1 - event_kind).alias(_KIND),
        *no_order,
        F.struct(*probes.columns).alias(_PROBE),
        F.lit(None).cast(event_type).alias(_EVENT),
    )
    event_rows = events.select(
        *[F.col(key) for key in keys],
        F.col(event_time).alias(_TIME),
        F.lit(event_kind).alias(_KIND),
        *order_columns,
        F.lit(None).cast(probe_type).alias(_PROBE),
        F.struct(*events.columns).alias(_EVENT),
    )
    return probe_rows.unionByName(event_rows)


def latest_at_or_before(
    probes: DataFrame,
    events: DataFrame,
    keys: Sequence[str],
    probe_time: str,
    event_time: str,
    as_name: str,
    event_order: Sequence[str] = (),
) -> DataFrame:
    """probes + `as_name`: the struct of the latest event (by event_time, then event_order) with the same
    keys and event_time <= probe_time, or null. An event at the probe's very time counts."""
    stream = _stream(probes, events, keys, probe_time, event_time, event_order, event_kind=0)
    ordered = [F.col(_TIME), F.col(_KIND), *[F.col(f"_order_{i}") for i in range(len(event_order))]]
    running = Window.partitionBy(*keys).orderBy(*ordered).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return (
        stream.withColumn(as_name, F.last(_EVENT, ignorenulls=True).over(running))
        .where(F.col(_PROBE).isNotNull())
        .select(f"{_PROBE}.*", as_name)
    )


def earliest_after(
    probes: DataFrame,
    events: DataFrame,
    keys: Sequence[str],
    probe_time: str,
    event_time: str,
    as_name: str,
    event_order: Sequence[str] = (),
) -> DataFrame:
    """probes + `as_name`: the struct of the earliest event with the same keys and event_time > probe_time."""
    stream = _stream(probes, events, keys, probe_time, event_time, event_order, event_kind=1)
    ordered = [F.col(_TIME).desc(), F.col(_KIND), *[F.col(f"_order_{i}").desc() for i in range(len(event_order))]]
    running = Window.partitionBy(*keys).orderBy(*ordered).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return (
        stream.withColumn(as_name, F.last(_EVENT, ignorenulls=True).over(running))
        .where(F.col(_PROBE).isNotNull())
        .select(f"{_PROBE}.*", as_name)
    )
