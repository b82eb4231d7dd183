"""Capture: a live cluster's `__consumer_offsets` -> bronze `raw_records` (new records only), with
compaction loss counted (how: jobs/steps/capture.py, docs/capture.md).

    spark-submit.sh capture [--conf conf/<env>.toml] [--cluster NAME]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobs.runs import run_job
from jobs.steps.capture import capture_and_count


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("capture", capture_and_count, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
