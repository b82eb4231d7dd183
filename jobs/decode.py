"""Decode: bronze `raw_records` -> silver tables and `quarantine`, checking raw = decoded + quarantined.

    spark-submit.sh decode [--conf conf/<env>.toml] [--cluster NAME]

Each silver table's rows for the cluster are replaced atomically, so a re-run (or a run after a
crash) leaves the same tables.
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
