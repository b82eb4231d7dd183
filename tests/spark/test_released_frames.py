"""A step's held frames are released when it ends; what was held before it stays held and readable."""

from __future__ import annotations

from jobs.tables import held_frames, held_on_disk, materialized, releasing_held


def test_a_step_releases_what_it_held_and_keeps_what_was_held_before(spark):
    before_step = materialized(spark.range(5))
    held_before = set(held_frames(spark))
    with releasing_held(spark):
        in_memory, on_disk = materialized(spark.range(7)), held_on_disk(spark.range(9))
        held_in_step = set(held_frames(spark)) - held_before
        assert in_memory.count() == 7 and on_disk.count() == 9
    held_after = set(held_frames(spark))
    assert len(held_in_step) >= 2, held_in_step
    assert not held_in_step & held_after, "the step's frames are still held"
    assert held_before <= held_after and before_step.count() == 5
