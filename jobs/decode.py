"""Decode: bronze `raw_records` -> silver tables and `quarantine`, checking raw = decoded + quarantined.

    spark-submit.sh decode [--conf conf/<env>.toml] [--cluster NAME] [--full]

Decodes only the raw records no earlier run decoded: each silver table notes, in the same commit as
its rows, the raw_records version it covers, so a re-run (or a run after a crash) continues where the
last commit left off and leaves the same tables. Transactions resolved since are updated in place.
--full decodes every raw record again and replaces the cluster's rows (records raw retention has
deleted are then no longer in silver: the run says how many).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobs.runs import run_job
from jobs.steps.decode import decode


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("decode", decode, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
