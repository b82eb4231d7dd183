"""The benchmark's nightly cuts of a generated log are logs a broker once held: each partition's batches
up to a point in log order, even where a batch's timestamp runs ahead of those written after it."""

from __future__ import annotations

from bench.batch_builder import Rec, batch_v2
from bench.log_nights import cut_at, index_segments

HOUR_MS = 3_600_000


def _segment(directory, base_offset: int, timestamps_ms: list[int]) -> list[int]:
    """A segment file of one-record batches stamped `timestamps_ms`; the byte offset each batch ends at."""
    batches = [
        batch_v2(base_offset + index, [Rec(b"k", b"v")], base_timestamp=at) for index, at in enumerate(timestamps_ms)
    ]
    (directory / f"{base_offset:020d}.log").write_bytes(b"".join(batches))
    ends, end = [], 0
    for batch in batches:
        end += len(batch)
        ends.append(end)
    return ends


def test_a_batch_stamped_ahead_of_later_ones_does_not_hold_back_the_log_after_it(tmp_path):
    partition = tmp_path / "__consumer_offsets-4"
    partition.mkdir()
    # the second segment opens with a batch stamped days ahead, as the generator wrote partition 4
    first = _segment(partition, 0, [1 * HOUR_MS, 2 * HOUR_MS])
    second = _segment(partition, 2, [300 * HOUR_MS, 3 * HOUR_MS, 5 * HOUR_MS])
    third = _segment(partition, 5, [6 * HOUR_MS])
    segments = index_segments(tmp_path)

    at_four = cut_at(segments, 4 * HOUR_MS)
    at_seven = cut_at(segments, 7 * HOUR_MS)
    at_one = cut_at(segments, 1 * HOUR_MS)

    names = [f"__consumer_offsets-4/{base:020d}.log" for base in (0, 2, 5)]
    # by 4h the broker had written the stamped-ahead batch (the one after it is from 3h) and that one
    assert at_four.kept == {names[0]: first[-1], names[1]: second[1]} and at_four.records == 4
    assert at_seven.kept == {names[0]: first[-1], names[1]: second[-1], names[2]: third[-1]}
    assert at_seven.records == 6
    assert at_one.kept == {names[0]: first[0]} and at_one.records == 1
