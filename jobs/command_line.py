"""A job's command line: its options, merged over the configuration files (jobs/config.py), checked.

Every mistake found here exits 2 with one line, before any session starts. A job's `--help` lists the
options that job takes, and `--verbose`, which ./spark-submit.sh reads before the job starts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from jobs.config import EXIT_USAGE, Config, ConfigError, check_inputs, load_config

# Jobs that read no input and rebuild nothing from scratch: the input and run options mean nothing to them.
_NO_INPUT_JOBS = {"forget"}


def _run_date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date; write it as YYYY-MM-DD") from None


def _job_options(arguments: argparse.ArgumentParser, job: str | None) -> None:
    if job == "end_offsets":
        arguments.add_argument(
            "--from-files",
            nargs="+",
            type=Path,
            metavar="PATH",
            help="load end_offsets.json files (or directories holding them) instead of asking the cluster",
        )
    if job == "forget":
        arguments.add_argument(
            "--source-file",
            nargs="+",
            dest="source_files",
            metavar="PATH",
            default=(),
            help="segment files (each file, as raw_records.source_file names it) or landed tables' paths",
        )
        arguments.add_argument(
            "--capture-run",
            nargs="+",
            dest="capture_runs",
            metavar="RUN_ID",
            default=(),
            help="runs that read the records (raw_records.capture_run_id, job_runs.run_id)",
        )
    if job == "report":
        arguments.add_argument("--group", metavar="GROUP_ID", help="report this group only")
        arguments.add_argument("--out", metavar="DIR", help="the site's directory (default: report.out_dir/<cluster>)")


def parser(description: str, job: str | None = None) -> argparse.ArgumentParser:
    arguments = _OneLineParser(
        prog=f"./spark-submit.sh {job}" if job else None,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _job_options(arguments, job)
    arguments.add_argument(
        "--conf",
        type=Path,
        default=None,
        help="environment file merged over conf/defaults.toml (default: conf/local.toml)",
    )
    arguments.add_argument("--warehouse", help="override storage.warehouse_dir")
    arguments.add_argument("--database", help="override catalog.database")
    arguments.add_argument("--cluster", help="override input.cluster")
    if job not in _NO_INPUT_JOBS:
        arguments.add_argument(
            "--segments", nargs="*", metavar="PATH", help="override input.segment_paths (none: read no segments)"
        )
        arguments.add_argument(
            "--raw-table",
            nargs="*",
            dest="raw_tables",
            metavar="PATH",
            help="override input.raw_table_paths (none: read no landed table)",
        )
        arguments.add_argument("--raw-table-format", choices=("parquet", "delta", "json"))
        arguments.add_argument("--run-date", type=_run_date, help="the day this run is for (YYYY-MM-DD)")
        arguments.add_argument(
            "--full",
            action="store_true",
            help="rebuild silver and gold from what raw_records holds now, not only what is new (the upgrade path)",
        )
    if job:
        arguments.add_argument(
            "--verbose",
            action="store_true",
            help="show Spark's own info lines on the console too (they always go to logs/spark-<time>-<pid>.log)",
        )
    return arguments


def config_from_args(args: argparse.Namespace) -> Config:
    overrides: dict = {"storage": {}, "catalog": {}, "input": {}}
    if args.warehouse is not None:
        overrides["storage"]["warehouse_dir"] = args.warehouse
    if args.database is not None:
        overrides["catalog"]["database"] = args.database
    if args.cluster is not None:
        overrides["input"]["cluster"] = args.cluster
    if getattr(args, "segments", None) is not None:
        overrides["input"]["segment_paths"] = args.segments
    if getattr(args, "raw_tables", None) is not None:
        overrides["input"]["raw_table_paths"] = args.raw_tables
    if getattr(args, "raw_table_format", None):
        overrides["input"]["raw_table_format"] = args.raw_table_format
    return load_config(args.conf, overrides, getattr(args, "run_date", None), getattr(args, "full", False))


def check_emptied_inputs(args: argparse.Namespace, config: Config) -> None:
    """`--segments` or `--raw-table` with no path clears that input, to read only the other one; with no
    input left (nor a cluster to capture) the run would read nothing and succeed."""
    from jobs.kafka_security import capture_configured  # imports pyspark; the refusals above need none

    flags = {"--segments": getattr(args, "segments", None), "--raw-table": getattr(args, "raw_tables", None)}
    emptied = [flag for flag, paths in flags.items() if paths == []]
    if emptied and not (config.segment_paths or config.raw_table_paths or capture_configured(config)):
        raise ConfigError(
            f"{emptied[0]} was given no path, which leaves nothing to read: put the paths after it,"
            " or leave it out to read input.segment_paths and input.raw_table_paths"
        )


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints the whole usage; one line says more
        refuse(f"{message} (--help lists the options)")


def refuse(message: str) -> None:
    print(f"groupscope: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def parse_arguments(
    argv: Sequence[str] | None, description: str, job: str | None = None
) -> tuple[Config, argparse.Namespace]:
    """The command line and configuration files, checked; a mistake exits 2 with one line."""
    arguments = parser(description, job)
    args = arguments.parse_args(argv)
    try:
        config = config_from_args(args)
        check_inputs(config)
        check_emptied_inputs(args, config)
        if job == "forget" and not (args.source_files or args.capture_runs):
            raise ConfigError("forget needs --source-file PATH or --capture-run RUN_ID: what to forget")
        for path in getattr(args, "from_files", None) or ():
            if not path.exists():
                raise ConfigError(f"--from-files: {path} does not exist; give end_offsets.json files or their folders")
    except ConfigError as error:
        refuse(str(error))
    return config, args


def parse_config(argv: Sequence[str] | None, description: str, job: str | None = None) -> Config:
    return parse_arguments(argv, description, job)[0]
