"""Time lag against the truth read from the topics themselves, at every end-offset snapshot of every lab
capture.

The lab snapshotted the consumed topics' end offsets about every second throughout each scenario
(end_offsets.json "series") and, at the end, read every record's timestamp from those topics
(record_timestamps.json). At a snapshot taken at time S, a group whose committed offset is c has not
consumed the record at offset c (the next one it reads; if c holds no record, e.g. a transaction marker,
the first record after it); the true time lag is S - that record's timestamp, and 0 when c is at or past
the snapshot's end offset (nothing to consume). Gold `lag` must be within the bound transforms/gold/lag.py
states for each method:
  interpolated: |time_lag_seconds - truth| <= time_lag_uncertainty_seconds + D
  lower_bound:  time_lag_seconds <= truth + D
  caught_up:    time_lag_seconds == 0 == truth
  too_few_points, committed_ahead: time_lag_seconds is null
D covers what lies between the clocks compared: a snapshot is stamped when its request is sent and the
broker reads the end offset before it answers (the lab stamped the answers too: D takes the slowest
answer of the capture's series), and a record's CreateTime is set by the lab's producer just before it
sends (linger 5 ms, then a flush, on the same host: PRODUCE_SLACK_MS).
"""

from __future__ import annotations

import bisect
import json
import statistics
from collections import defaultdict

from pyspark.sql import functions as F

from lab.snapshots import MIN_SNAPSHOTS
from tests.lab_tables import Capture, all_captures
from transforms.gold import lag as lag_transform

PRODUCE_SLACK_MS = 100
CAPTURES = all_captures()
METHODS = {
    lag_transform.METHOD_CAUGHT_UP,
    lag_transform.METHOD_INTERPOLATED,
    lag_transform.METHOD_LOWER_BOUND,
    lag_transform.METHOD_TOO_FEW_POINTS,
    lag_transform.METHOD_COMMITTED_AHEAD,
}


def record_timestamps(capture: Capture) -> dict[tuple[str, int], list[list[int]]]:
    """(topic, partition) -> [[offset, timestamp_ms], ...] in offset order, as the lab read them."""
    path = capture.path / "record_timestamps.json"
    assert path.is_file(), f"{capture.cluster} has no record_timestamps.json: re-capture it (python -m lab.capture)"
    document = json.loads(path.read_text())
    return {
        (topic, int(partition)): sorted(records)
        for topic, partitions in document.items()
        for partition, records in partitions.items()
    }


def true_time_lag_s(records: list[list[int]], committed: int, end: int, observed_ms: int) -> float | None:
    """Snapshot time - timestamp of the first record at or after the committed offset, below the snapshot's
    end offset; 0 if the group had consumed everything; None if the topic holds no such record (then the
    lab's read missed records, which is itself a failure)."""
    if committed >= end:
        return 0.0
    index = bisect.bisect_left(records, [committed, -(2**63)])
    if index == len(records) or records[index][0] >= end:
        return None
    return (observed_ms - records[index][1]) / 1000


def distribution(errors: list[float]) -> str:
    if not errors:
        return "no rows"
    ordered = sorted(errors)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"{len(ordered)} rows: min {ordered[0]:+.3f} s, median {statistics.median(ordered):+.3f} s, "
        f"p95 {p95:+.3f} s, max {ordered[-1]:+.3f} s"
    )


def check_row(row, truth: float | None, slack: float) -> str | None:
    """What is wrong with one lag row against the truth, or None."""
    method, lag_s, width = row.time_lag_method, row.time_lag_seconds, row.time_lag_uncertainty_seconds
    if truth is None:
        return "no record between the committed offset and the end offset in record_timestamps.json"
    if method == lag_transform.METHOD_INTERPOLATED:
        return None if abs(lag_s - truth) <= width + slack else f"|error| > uncertainty {width} + D"
    if method == lag_transform.METHOD_LOWER_BOUND:
        return None if lag_s <= truth + slack else "a lower bound above the truth"
    if method == lag_transform.METHOD_CAUGHT_UP:
        return None if lag_s == 0 == truth else "caught up, but not 0 on both sides"
    if method in (lag_transform.METHOD_TOO_FEW_POINTS, lag_transform.METHOD_COMMITTED_AHEAD):
        return None if lag_s is None else "a value where none is known"
    return f"unknown time_lag_method {method!r}"


def slack_s(capture: Capture) -> float:
    """D for one capture: the slowest answer to a snapshot of its series, plus the producer's slack."""
    series = json.loads((capture.path / "end_offsets.json").read_text()).get("series", [])
    assert len(series) >= MIN_SNAPSHOTS, f"{capture.cluster}: {len(series)} snapshots in the series; re-capture it"
    assert all(s["answered_at_ms"] >= s["observed_at_ms"] for s in series), capture.cluster
    return (max(s["answered_at_ms"] - s["observed_at_ms"] for s in series) + PRODUCE_SLACK_MS) / 1000


def test_time_lag_is_within_the_stated_bound_of_the_truth_at_every_snapshot(lab):
    truth_by_cluster = {capture.cluster: record_timestamps(capture) for capture in CAPTURES}
    slack_by_cluster = {capture.cluster: slack_s(capture) for capture in CAPTURES}
    rows = (
        lab["lag"]
        .select(
            "cluster",
            "group_id",
            "topic",
            "partition",
            F.unix_millis("observed_at").alias("observed_ms"),
            "committed_offset",
            "end_offset",
            "time_lag_seconds",
            "time_lag_method",
            "time_lag_uncertainty_seconds",
        )
        .collect()
    )
    errors: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    widths: list[float] = []
    failures = []
    for row in rows:
        records = truth_by_cluster[row.cluster].get((row.topic, row.partition), [])
        truth = true_time_lag_s(records, row.committed_offset, row.end_offset, row.observed_ms)
        counts[row.time_lag_method] += 1
        if truth is not None and row.time_lag_seconds is not None:
            errors[row.time_lag_method].append(row.time_lag_seconds - truth)
        if row.time_lag_method == lag_transform.METHOD_INTERPOLATED:
            widths.append(row.time_lag_uncertainty_seconds)
        problem = check_row(row, truth, slack_by_cluster[row.cluster])
        if problem:
            failures.append(
                f"{row.cluster} {row.group_id} {row.topic}-{row.partition} at {row.observed_ms}: "
                f"{row.time_lag_method} {row.time_lag_seconds} vs truth {truth}: {problem}"
            )
    report = "error = time_lag_seconds - truth, per time_lag_method:\n" + "\n".join(
        f"  {method}: {distribution(errors[method])} ({counts[method]} rows)" for method in sorted(counts)
    )
    report += f"\n  uncertainty of the interpolated rows: {distribution(widths)}"
    assert not failures, (
        f"{len(failures)} of {len(rows)} rows off the bound:\n" + "\n".join(failures[:20]) + "\n" + report
    )
    assert set(counts) <= METHODS, report
    # The check has teeth only if the captures hold lagging snapshots of each kind the lab can produce.
    # (The captures of 2026-11-24 hold 108 interpolated, 59 lower-bound and 2,222 caught-up rows.)
    for method, least in (
        (lag_transform.METHOD_INTERPOLATED, 50),
        (lag_transform.METHOD_LOWER_BOUND, 20),
        (lag_transform.METHOD_CAUGHT_UP, 500),
    ):
        assert counts[method] >= least, report
    print(report)
