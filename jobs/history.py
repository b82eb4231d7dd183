"""History: silver group records -> gold generations, assignments, rebalances, movements, frequency.

    spark-submit.sh history [--conf conf/<env>.toml] [--cluster NAME] [--full]

Reads the silver tables (and the optional `topic_ids` table that names KIP-848 topic ids) and rebuilds
only the groups whose silver records changed since the versions its tables note (plus groups whose
rebalances read a changed commit, or whose topic ids are now named otherwise), replacing just their
rows: each is framed again from its group records, its settled rebalances kept, the others computed
from the commits where their readings start; --full rebuilds the cluster. Each table's rows and its note
commit together, so a re-run gives the same tables. Settings come from the `[gold]` section of
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
