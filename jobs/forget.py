"""Forget: undo a mistaken input. Removes the raw records read from a file (or landed table) or by a
run, and every silver and gold row derived from them, leaving the tables as if it had never been read.

    spark-submit.sh forget --source-file PATH... [--conf conf/<env>.toml] [--cluster NAME]
    spark-submit.sh forget --capture-run RUN_ID...

PATH is a segment file read (a local path or URI: each .log file, not the directory given to --segments),
or a landed table's path; RUN_ID a `capture_run_id` of raw_records (the ingest or capture run that read
the records, in job_runs). The raw records go in one commit; decode, history and metrics then bring the
derived tables up to date, as a nightly does. Killed at any point, running the same command again (or
the next nightly) completes it. Names that match no raw record and no earlier forget are refused (exit 2,
nothing changed). Take the file out of input.segment_paths first, or the next ingest reads it again.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import partial

from jobs.command_line import parse_arguments
from jobs.runs import run_job
from jobs.steps.forget import forget


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv, __doc__, "forget")[1]
    step = partial(forget, source_files=tuple(args.source_files or ()), capture_runs=tuple(args.capture_runs or ()))
    return run_job("forget", step, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
