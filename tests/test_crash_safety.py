"""A nightly run killed with SIGKILL part-way, then run again, leaves exactly an uninterrupted run's tables.

The reference is the quick-start nightly that won the lock test (conftest `contended_nightly`). The
killed run gets a warehouse of its own; it is killed, process group and all, when its log shows a
progress line picked at random from the reference's (so any stage can be hit, and the seed in the
failure message replays it), then run again to the end. Every table but `job_runs` must hold the
reference's rows. bench/crash_safety.py does the same ten times and more (too slow for CI).
"""

from __future__ import annotations

import random
import subprocess

from tests.conftest import nightly_command
from tests.delta_compare import differing_tables
from tests.kill import progress_lines, run_until_progress_line

DATABASE = "groupscope"  # the quick start's


def test_a_run_killed_at_a_random_point_then_run_again_leaves_the_uninterrupted_tables(
    spark, contended_nightly, tmp_path
):
    reference = progress_lines(contended_nightly.winner.output)
    seed = random.SystemRandom().randrange(1 << 32)
    # The last line is the summary, written after every table: killing there would prove nothing.
    kill_at = random.Random(seed).randrange(1, len(reference))
    warehouse = tmp_path / "warehouse"
    killed_at = run_until_progress_line(nightly_command(warehouse), tmp_path / "killed.log", kill_at)
    context = f"seed {seed}: killed at progress line {kill_at} of {len(reference)} ({killed_at})"
    assert killed_at.startswith("[nightly"), context

    rerun = subprocess.run(nightly_command(warehouse), capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, f"{context}; the rerun failed: {rerun.stdout[-3000:]}"
    assert differing_tables(spark, contended_nightly.warehouse, warehouse, DATABASE) == [], context
