"""Metrics: silver offsets + `end_offsets` snapshots + gold history -> lag, status and daily tables.

    spark-submit.sh metrics [--conf conf/<env>.toml] [--cluster NAME] [--run-date YYYY-MM-DD]

Lag and status are evaluated at the end-offset snapshots held in the `end_offsets` table (cluster,
topic, partition, end_offset, observed_at), written by a capture job; without that table they are
empty and only the daily group view is filled. Run after `history` (it reads `generations` and
`rebalances`). `--run-date` is the last day of `group_daily` (default: the last day in the data).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobs.runs import run_job
from jobs.steps.metrics import metrics


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("metrics", metrics, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
