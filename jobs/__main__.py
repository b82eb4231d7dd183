"""The launcher's front door, with no Spark: `python -m jobs` lists the jobs, and
`python -m jobs check JOB [args]` refuses a mistaken command line (unknown job, missing config
file or input path, bad date, unknown setting) in one line with exit 2 before spark-submit starts;
`python -m jobs check JOB --help` prints the job's options.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Sequence

from jobs import JOBS
from jobs.command_line import parse_config
from jobs.config import EXIT_USAGE, REPO_ROOT
from jobs.embedded_metastore import derby_home_option


def usage() -> str:
    width = max(map(len, JOBS))
    lines = [f"  {name:<{width}}  {summary}" for name, summary in JOBS.items()]
    return "\n".join(
        [
            "usage: ./spark-submit.sh [--master URL] JOB [--conf conf/<env>.toml] [--cluster NAME] [...]",
            "jobs:",
            *lines,
            "JOB --help lists its options. Exit codes: 0 succeeded, 1 failed, 2 wrong command line,",
            "75 refused (another run holds the lock; retry later).",
        ]
    )


def description(job: str) -> str:
    """The job module's docstring, read without importing it (that imports pyspark)."""
    return ast.get_docstring(ast.parse((REPO_ROOT / "jobs" / f"{job}.py").read_text()), clean=False) or job


def check(job: str, argv: Sequence[str]) -> int:
    if job not in JOBS:
        print(f"groupscope: {job!r} is not a job; the jobs are: {', '.join(JOBS)}", file=sys.stderr)
        return EXIT_USAGE
    config = parse_config(argv, description(job), job=job)
    if config.remote:  # the launcher then runs the job as a Spark Connect client, with no JVM of its own
        print(f"remote {config.remote}")
    else:  # the options of the driver JVM the launcher starts, which Python cannot set once it runs
        print(f"driver_options {derby_home_option(config.warehouse_dir)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["check"] and len(args) >= 2:
        return check(args[1], args[2:])
    print(usage(), file=sys.stderr)
    return 0 if args[:1] in (["--help"], ["-h"]) else EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
