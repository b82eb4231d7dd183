"""A continuing fold equals a fold from scratch: for every cut point of each scenario's log (records and
commits in log order), folding the prefix, storing its state as JSON and folding the rest from it gives
the same final tables as folding everything at once. No Spark."""

from __future__ import annotations

import pytest

from tests.history_epochs import NAMES
from tests.history_fold import fold_at_once, fold_in_two, in_order
from tests.unit.test_history_epochs import SETTINGS, crash_with_a_join, epoch_written_again, handover
from tests.unit.test_history_fold import SCENARIOS

EPOCH_SCENARIOS = {
    "kip848_crash_with_a_join": crash_with_a_join,
    "kip848_handover": handover,
    # The epoch before the latest is folded again when the latest's type 6 is written again.
    "kip848_epoch_written_again": epoch_written_again,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_folding_in_two_at_every_cut_equals_folding_at_once(name):
    records, commits = SCENARIOS[name]()
    at_once = in_order(fold_at_once(records, commits))
    assert sum(len(rows) for rows in at_once.values()) > len(records)
    cuts = range(len(records) + len(commits) + 1)
    differing = [cut for cut in cuts if in_order(fold_in_two(records, commits, cut)) != at_once]
    assert differing == []


@pytest.mark.parametrize("name", sorted(EPOCH_SCENARIOS))
def test_a_kip848_group_folded_in_two_at_every_cut_equals_folding_at_once(name):
    records, commits = EPOCH_SCENARIOS[name]()
    at_once = in_order(fold_at_once(records, commits, SETTINGS, NAMES))
    assert sum(len(rows) for rows in at_once.values()) > len(records) / 2
    cuts = range(len(records) + len(commits) + 1)
    differing = [cut for cut in cuts if in_order(fold_in_two(records, commits, cut, SETTINGS, NAMES)) != at_once]
    assert differing == []


def test_a_cut_between_cooperative_rounds_first_stores_a_rebalance_that_the_second_round_replaces():
    records, commits = SCENARIOS["cooperative_two_rounds"]()
    prefix = fold_at_once(records[:2], [])
    assert sorted(row["generation"] for row in prefix["rebalances"]) == [1, 2]  # round one, alone, closes
    assert sorted(row["generation"] for row in fold_in_two(records, commits, cut=2)["rebalances"]) == [1, 3]
