"""Configuration: conf/defaults.toml, then one environment file, then command-line overrides.

Parsed once in a job's `main()` into a frozen dataclass; transforms receive plain values from it,
never the object itself. Secrets are never read from these files: they come from environment
variables named in the config, at the moment a connection is made.
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import Any

# Under spark-submit the code runs from a zip; the launcher says where the checkout (conf/, jvm/) is.
REPO_ROOT = Path(os.environ.get("GROUPSCOPE_HOME") or Path(__file__).resolve().parent.parent)
DEFAULTS_FILE = REPO_ROOT / "conf" / "defaults.toml"
DEFAULT_ENV_FILE = REPO_ROOT / "conf" / "local.toml"
# The database name is part of every table name in SQL text: only what needs no quoting is accepted.
_DATABASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class ConfigError(ValueError):
    """A setting that cannot work, with the key and the reason."""


def _validated(database: str, cluster: str) -> None:
    if not isinstance(database, str) or not _DATABASE_NAME.fullmatch(database):
        raise ConfigError(
            f"catalog.database {database!r} is not a plain SQL name (letters, digits and _, not starting with a digit)"
        )
    if not isinstance(cluster, str) or not cluster.strip() or not cluster.isprintable() or len(cluster) > 255:
        raise ConfigError(f"input.cluster {cluster!r} must be 1 to 255 printable characters")


@dataclass(frozen=True)
class Config:
    database: str
    warehouse_dir: Path
    metastore: str
    master: str
    spark_conf: Mapping[str, str]
    cluster: str
    segment_paths: tuple[str, ...]
    raw_table_paths: tuple[str, ...]
    raw_table_format: str
    run_date: date | None = None
    source_files: tuple[Path, ...] = field(default=())
    # Every merged section, for the jobs whose settings live in their own section ([gold], [capture], ...).
    sections: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def table(self, name: str) -> str:
        return f"{self.database}.{name}"

    def section(self, name: str) -> Mapping[str, Any]:
        return self.sections.get(name, {})


def _merge(base: dict, override: Mapping) -> dict:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = (
            _merge(merged[key], value) if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping) else value
        )
    return merged


def resolve_path(path: str) -> str:
    """Relative local paths are relative to the repository; URIs (s3a://, hdfs://) stay as they are."""
    if "://" in path or Path(path).is_absolute():
        return path
    return str(REPO_ROOT / path)


def load_config(env_file: Path | None = None, overrides: Mapping | None = None, run_date: date | None = None) -> Config:
    files = [DEFAULTS_FILE, env_file or DEFAULT_ENV_FILE]
    merged: dict = {}
    for path in files:
        with open(path, "rb") as handle:
            merged = _merge(merged, tomllib.load(handle))
    merged = _merge(merged, overrides or {})
    storage, inputs = merged["storage"], merged["input"]
    _validated(merged["catalog"]["database"], inputs["cluster"])
    return Config(
        database=merged["catalog"]["database"],
        warehouse_dir=Path(resolve_path(storage["warehouse_dir"])),
        metastore=storage["metastore"],
        master=merged["spark"]["master"],
        spark_conf={str(key): str(value) for key, value in merged["spark"].get("conf", {}).items()},
        cluster=inputs["cluster"],
        segment_paths=tuple(resolve_path(path) for path in inputs["segment_paths"]),
        raw_table_paths=tuple(resolve_path(path) for path in inputs["raw_table_paths"]),
        raw_table_format=inputs["raw_table_format"],
        run_date=run_date,
        source_files=tuple(files),
        sections=MappingProxyType(merged),
    )


def parser(description: str) -> argparse.ArgumentParser:
    arguments = argparse.ArgumentParser(description=description)
    arguments.add_argument(
        "--conf",
        type=Path,
        default=None,
        help="environment file merged over conf/defaults.toml (default: conf/local.toml)",
    )
    arguments.add_argument("--warehouse", help="override storage.warehouse_dir")
    arguments.add_argument("--database", help="override catalog.database")
    arguments.add_argument("--cluster", help="override input.cluster")
    arguments.add_argument("--segments", nargs="*", help="override input.segment_paths")
    arguments.add_argument("--raw-table", nargs="*", dest="raw_tables", help="override input.raw_table_paths")
    arguments.add_argument("--raw-table-format", choices=("parquet", "delta", "json"))
    arguments.add_argument("--run-date", type=date.fromisoformat, help="the day this run is for (YYYY-MM-DD)")
    return arguments


def config_from_args(args: argparse.Namespace) -> Config:
    overrides: dict = {"storage": {}, "catalog": {}, "input": {}}
    if args.warehouse is not None:
        overrides["storage"]["warehouse_dir"] = args.warehouse
    if args.database is not None:
        overrides["catalog"]["database"] = args.database
    if args.cluster is not None:
        overrides["input"]["cluster"] = args.cluster
    if args.segments is not None:
        overrides["input"]["segment_paths"] = args.segments
    if args.raw_tables is not None:
        overrides["input"]["raw_table_paths"] = args.raw_tables
    if args.raw_table_format:
        overrides["input"]["raw_table_format"] = args.raw_table_format
    return load_config(args.conf, overrides, args.run_date)


def parse_config(argv: Sequence[str] | None, description: str) -> Config:
    arguments = parser(description)
    try:
        return config_from_args(arguments.parse_args(argv))
    except ConfigError as error:
        arguments.error(str(error))  # exits 2 with the usage and the reason
