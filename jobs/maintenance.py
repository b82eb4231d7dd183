"""Maintenance: compact the cluster's Delta tables, drop files no version needs, and forget old raw records.

    spark-submit.sh maintenance [--conf conf/<env>.toml] [--cluster NAME]

Settings, `[maintenance]`:
- `vacuum_retain_hours`: files that no table version has needed for this long are deleted, including
  files a killed run wrote and never committed. Set as each table's `delta.deletedFileRetentionDuration`
  (Delta's VACUUM takes its retention from there); left out, tables keep Delta's default of 7 days.
  Delta refuses less than 168 hours unless its safety check is turned off, which this job never does:
  a reader of a week-old version, or a run still writing, must not lose its files.
- `raw_retention_days`: 0 (the default) keeps every raw record; otherwise this cluster's raw records
  older than that are deleted, except each segment file's last batch (where the next ingest reads on
  from) and records of transactions still pending. Silver and gold keep every row derived from them:
  nightlies only add to them. Only `nightly --full` rebuilds from raw, and then covers what raw holds.
Run it weekly, never at the same time as nightly: it holds the cluster's lock like every writing job.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobs.runs import run_job
from jobs.steps.maintenance import maintenance


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("maintenance", maintenance, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
