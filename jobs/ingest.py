"""Ingest: segment files and landed raw records -> bronze `raw_records` (new rows only).

spark-submit.sh ingest [--conf conf/<env>.toml] [--segments PATH...] [--raw-table PATH...]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobs.runs import run_job
from jobs.steps.ingest import ingest


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("ingest", ingest, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
