"""History: silver group records -> gold generations, assignments, rebalances, movements, frequency,
what-if replays, idle capacity and streams groups' members.

    spark-submit.sh history [--conf conf/<env>.toml] [--cluster NAME] [--full]

Reads the silver tables (and the optional `topic_ids` table that names KIP-848 topic ids) and folds each
group whose silver rows changed since the versions its tables note, from the state where its last fold
stopped (jobs/steps/history.py); --full folds every group from its first record. Each table's rows
and its note commit together, and the states last, so a re-run gives the same tables. Settings come
from the `[gold]` section of the configuration files (see `jobs.config.GoldSettings`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobs.runs import run_job
from jobs.steps.history import history


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("history", history, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
