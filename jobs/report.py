"""Report: a static site of the cluster's consumer groups, for people to look at in a browser.

    spark-submit.sh report [--conf conf/<env>.toml] [--cluster NAME] [--group GROUP_ID] [--out DIR]

Reads the gold tables the nightly wrote (and the what-if and idle-member tables when the warehouse holds
them) and writes DIR/index.html, the groups with their health, rebalances per day, lag and status, and
DIR/groups/<group>.html per group: generations and rebalances with their causes, partition ownership
over time with the moves, offset lag and time lag, status, what-if and idle members. Every script and
style is beside the pages, so the site opens from disk with no network. DIR defaults to
report.out_dir/<cluster>; an earlier report there is replaced whole. --group writes that group only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import partial

from jobs.command_line import parse_arguments
from jobs.runs import run_job
from jobs.steps.report import report


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv, __doc__, "report")[1]
    return run_job("report", partial(report, out=args.out, group=args.group), argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
