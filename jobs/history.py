"""History: silver group records -> gold generations, assignments, rebalances, movements, frequency.

    spark-submit.sh history [--conf conf/<env>.toml] [--cluster NAME]

Reads the silver tables (and the optional `topic_ids` table that names KIP-848 topic ids), rebuilds
every group's generations, and derives its rebalances. Each gold table's rows for the cluster are
replaced atomically, so a re-run gives the same tables. Settings come from the `[gold]` section of
the configuration files (see `jobs.config.GoldSettings`).
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
