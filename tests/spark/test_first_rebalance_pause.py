"""An eager rebalance after no generation of the log (a group's or an incarnation's first) has no
generation before it for the group to have committed in, so no pause (docs/sql.md: none when the group
committed nothing in the generation before the join), whatever commits precede it. So computing it
reads no commit (transforms/gold/resume.commit_floors gives its group no floor): a first rebalance on a
night made that night read every commit of its partition."""

from __future__ import annotations

from datetime import datetime, timedelta

from transforms.gold.departures import PAUSE_NO_COMMIT_BEFORE, pause_estimates

T0 = datetime(2026, 11, 1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_first_rebalance_has_no_pause_whatever_commits_precede_it(spark):
    framed = spark.createDataFrame(
        [
            ("c", "first", 0, 1, "eager", at(100), at(101), None),
            ("c", "later", 0, 2, "eager", at(100), at(101), at(10)),
        ],
        "cluster string, group_id string, incarnation int, generation int, rebalance_protocol string,"
        " join_completed_at timestamp, recorded_at timestamp, before_recorded_at timestamp",
    )
    # both groups committed before the join (the first one too: offsets of an earlier life) and after it
    commits = spark.createDataFrame(
        [("c", group, at(seconds)) for group in ("first", "later") for seconds in (50, 160)],
        "cluster string, group_id string, record_at timestamp",
    )

    pauses = {row.group_id: row for row in pause_estimates(framed, commits).collect()}

    assert (pauses["first"].estimated_pause_ms, pauses["first"].pause_estimate_method) == (None, PAUSE_NO_COMMIT_BEFORE)
    assert (pauses["later"].estimated_pause_ms, pauses["later"].pause_estimate_method) == (110_000, "commit_gap")
