"""Configuration: conf/defaults.toml, then one environment file, then command-line overrides.

Parsed once in a job's `main()` (with its command line: jobs/command_line.py) into a frozen dataclass;
transforms receive plain values from it, never the object itself. Secrets are never read from these
files: they come from environment variables named in the config, at the moment a connection is made.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import Any

from transforms.history.settings import HistorySettings

# Under spark-submit the code runs from a zip; the launcher says where the checkout (conf/, jvm/) is.
REPO_ROOT = Path(os.environ.get("GROUPSCOPE_HOME") or Path(__file__).resolve().parent.parent)
DEFAULTS_FILE = REPO_ROOT / "conf" / "defaults.toml"
DEFAULT_ENV_FILE = REPO_ROOT / "conf" / "local.toml"
# The database name is part of every table name in SQL text: only what needs no quoting is accepted.
_DATABASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


EXIT_USAGE = 2  # a wrong command line or configuration: nothing ran
# Tables whose keys are free (Spark and Kafka client settings), and keys that are optional with no default.
_FREE_SECTIONS = {"spark.conf", "capture.kafka", "capture.secrets"}
_OPTIONAL_KEYS = {"maintenance.vacuum_retain_hours"}


class ConfigError(ValueError):
    """A setting that cannot work, with the key and the reason."""


@dataclass(frozen=True)
class GoldSettings:
    """The `[gold]` section of conf/*.toml; every key is optional (these are the defaults)."""

    storm_rebalances_per_hour: int = 6  # an hour with this many rebalances is a storm
    departure_slack_ms: int = 30_000  # silence beyond the session timeout still read as a timeout
    consumer_session_timeout_ms: int = 45_000  # KIP-848 members (a broker setting, not in the records)
    consumer_heartbeat_interval_ms: int = 5_000  # KIP-848 members (a broker setting, not in the records)
    cooperative_round_gap_ms: int = 300_000  # max gap between cooperative rounds when no member states one
    status_intervals: int = 10  # Burrow's window: commits (slots) per partition
    status_min_distance_ms: int = 1_000  # Burrow's min-distance: commits closer than this share a slot
    status_allowed_lag: int = 0
    status_minimum_complete: float = 0.0
    status_window_minutes: int = 10  # group roll-up windows
    stale_after_days: int = 7
    offsets_retention_minutes: int = 10_080  # the cluster's offsets.retention.minutes
    expiry_warning_hours: int = 24

    def history_settings(self) -> HistorySettings:
        """What the history fold reads of these (transforms/history never reads a config)."""
        return HistorySettings(
            cooperative_round_gap_ms=self.cooperative_round_gap_ms,
            departure_slack_ms=self.departure_slack_ms,
            default_session_timeout_ms=self.consumer_session_timeout_ms,
            default_heartbeat_interval_ms=self.consumer_heartbeat_interval_ms,
            storm_rebalances_per_hour=self.storm_rebalances_per_hour,
        )


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
    # Where the tables live: a local path (str(warehouse_dir)) or an object store URI (s3a://bucket/path);
    # warehouse_dir is then the local directory of the embedded metastore (storage.metastore_dir).
    warehouse: str = ""
    # Rebuild every derived table from what raw_records holds, instead of continuing from the tables.
    full: bool = False
    # "sc://host:port": the jobs run through that Spark Connect server (jobs/connect.py), not a driver of their own.
    remote: str = ""
    source_files: tuple[Path, ...] = field(default=())
    # Every merged section, for the jobs whose settings live in their own section ([gold], [capture], ...).
    sections: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not self.warehouse:  # built without load_config: the local warehouse
            object.__setattr__(self, "warehouse", str(self.warehouse_dir))

    def table(self, name: str) -> str:
        return f"{self.database}.{name}"

    def section(self, name: str) -> Mapping[str, Any]:
        return self.sections.get(name, {})

    def gold_settings(self) -> GoldSettings:
        return GoldSettings(**self.section("gold"))


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


def load_config(
    env_file: Path | None = None, overrides: Mapping | None = None, run_date: date | None = None, full: bool = False
) -> Config:
    files = [DEFAULTS_FILE, env_file or DEFAULT_ENV_FILE]
    defaults, *environment = [_read_toml(path) for path in files]
    for path, settings in zip(files[1:], environment, strict=True):
        _check_keys(settings, defaults, str(path))
    merged = defaults
    for settings in environment:
        merged = _merge(merged, settings)
    merged = _merge(merged, overrides or {})
    storage, inputs = merged["storage"], merged["input"]
    _validated(merged["catalog"]["database"], inputs["cluster"])
    warehouse = resolve_path(storage["warehouse_dir"])
    return Config(
        database=merged["catalog"]["database"],
        warehouse_dir=Path(_local_home(warehouse, storage)),
        warehouse=warehouse,
        metastore=storage["metastore"],
        master=merged["spark"]["master"],
        remote=merged["spark"].get("remote", ""),
        spark_conf={str(key): str(value) for key, value in merged["spark"].get("conf", {}).items()},
        cluster=inputs["cluster"],
        segment_paths=tuple(resolve_path(path) for path in inputs["segment_paths"]),
        raw_table_paths=tuple(resolve_path(path) for path in inputs["raw_table_paths"]),
        raw_table_format=inputs["raw_table_format"],
        run_date=run_date,
        full=full,
        source_files=tuple(files),
        sections=MappingProxyType(merged),
    )


def _local_home(warehouse: str, storage: Mapping) -> str:
    """The local directory beside the tables: the warehouse itself, or for a warehouse on an object store
    the embedded metastore's home (Derby keeps files that only a local disk can hold)."""
    if "://" not in warehouse:
        return warehouse
    scheme = warehouse.split("://", 1)[0]
    if scheme in ("s3", "s3n"):
        raise ConfigError(f"storage.warehouse_dir {warehouse!r}: write s3a://, the scheme of Hadoop's S3 filesystem")
    if storage["metastore"] == "embedded" and not storage.get("metastore_dir"):
        raise ConfigError(
            f"storage.warehouse_dir is {warehouse!r}: the embedded metastore needs a local directory, "
            "set storage.metastore_dir (or use a Hive metastore service)"
        )
    return resolve_path(storage.get("metastore_dir") or "metastore")


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path} does not exist; environment files are conf/<env>.toml") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"configuration file {path} is not valid TOML: {error}") from None


def _check_keys(settings: Mapping, defaults: Mapping, source: str, prefix: str = "") -> None:
    """A misspelt key would otherwise be ignored and its default used in silence."""
    for key, value in settings.items():
        path = f"{prefix}{key}"
        if path in _FREE_SECTIONS or path in _OPTIONAL_KEYS:
            continue
        if path == "gold":
            known = {setting.name for setting in fields(GoldSettings)}
            if unknown := sorted(set(value) - known):
                raise ConfigError(f"{source}: unknown [gold] settings {unknown}; the settings are {sorted(known)}")
            continue
        if key not in defaults:
            raise ConfigError(f"{source}: unknown setting {path!r}; conf/defaults.toml lists every setting")
        if isinstance(defaults[key], list) and not _is_list_of_strings(value):
            raise ConfigError(f"{source}: {path} must be a list of strings, e.g. {key} = {_as_list(value)}")
        if isinstance(value, Mapping) and isinstance(defaults[key], Mapping):
            _check_keys(value, defaults[key], source, f"{path}.")


def _is_list_of_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _as_list(value: Any) -> str:
    """A setting written as one string (read as a list, it would be one path per character) as a list."""
    items = value if isinstance(value, list) else [value]
    return json.dumps([str(item) for item in items])


def check_inputs(config: Config) -> None:
    """Local input paths exist: a mistyped path fails now, not a minute into a run."""
    named = [
        *(("--segments / input.segment_paths", path) for path in config.segment_paths),
        *(("--raw-table / input.raw_table_paths", path) for path in config.raw_table_paths),
        *(("end_offsets.files", resolve_path(path)) for path in config.section("end_offsets").get("files", [])),
    ]
    for setting, path in named:
        if "://" not in path and not Path(path).exists():
            raise ConfigError(f"{setting}: {path} does not exist; give an existing file or directory")
    # Imported here: both modules build on this one.
    from jobs.connect import check_remote_settings
    from jobs.hive_metastore import check_metastore_settings
    from jobs.object_store import check_credentials

    check_credentials(config)
    check_metastore_settings(config)
    check_remote_settings(config)
