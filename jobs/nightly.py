"""Nightly: capture and ingest what is new, decode it, rebuild the groups' history and metrics, refresh
the SQL views, and summarise. Capture and the live end-offset snapshot run when [capture] names a
cluster; [end_offsets] files are loaded too (the embedded default loads the sample's).

    spark-submit.sh nightly [--conf conf/<env>.toml] [--run-date YYYY-MM-DD] [--full] [--verbose]

Each night costs what it brought: ingest reads what the logs gained, decode what raw_records gained,
history and metrics rebuild only the groups that new records and snapshots touch. --full rebuilds
every derived table from what raw_records holds (the upgrade path after a groupscope update).

With no arguments it runs on the embedded default (conf/local.toml): the lab capture shipped in
samples/, a local warehouse and an embedded metastore.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobs.runs import run_job
from jobs.steps.nightly import nightly


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("nightly", nightly, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
