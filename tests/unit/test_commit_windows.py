"""The spans of each __consumer_offsets partition an incremental history run reads commits from
(jobs/history_commits.py): the union of its groups' windows, from their floors on, past their silent spans."""

from __future__ import annotations

from jobs.history_commits import _merged, _partition_windows


def _group(floor: str, partitions: list[int], after: str | None = None, until: str | None = None) -> dict:
    return {"commit_floor_at": floor, "silent_after": after, "silent_until": until, "partitions": partitions}


def test_two_groups_of_a_partition_from_one_floor_one_of_them_silent_for_a_while():
    # The benchmark's night 6 (2026-11-27): two groups of a partition with the same floor, one with a
    # silent span, made the windows (floor, None) and (floor, after), which sorted by comparing None with
    # a time and failed the night.
    groups = [
        _group("2026-11-06 08:00:00", [7]),
        _group("2026-11-06 08:00:00", [7, 9], after="2026-11-06 09:00:00", until="2026-11-06 20:00:00"),
    ]

    windows = _partition_windows(groups)

    assert windows == {
        7: (("2026-11-06 08:00:00", None),),
        9: (("2026-11-06 08:00:00", "2026-11-06 09:00:00"), ("2026-11-06 20:00:00", None)),
    }


def test_windows_are_merged_where_they_meet_and_kept_apart_where_they_do_not():
    windows = [("10", "12"), ("11", "13"), ("15", "16"), ("15", None), ("20", "21")]

    assert _merged(windows) == (("10", "13"), ("15", None))
    assert _merged([("10", "12"), ("14", "15")]) == (("10", "12"), ("14", "15"))
