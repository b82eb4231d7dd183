"""A Hive metastore service (storage.metastore = "hive", [storage.hive], docs/hive.md): the settings that
point a session at it, and a first request that fails a run early, in bounded time and naming the
service, when it cannot be reached.

Unlike the embedded Derby metastore, a service serves many processes at once: the jobs, ./spark-sql.sh
and the Thrift server open it side by side (no embedded-metastore lock is taken). Spark's built-in Hive
2.3 client speaks to it; scripts/metastore.sh runs Hive 3.1.3, whose thrift interface keeps every call
that client makes, so no spark.sql.hive.metastore.version or .jars is set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pyspark.sql import SparkSession

from jobs.config import Config, ConfigError
from jobs.object_store import StoreUnavailable, root_cause

METASTORES = ("embedded", "hive")
URIS_KEY = "spark.hadoop.hive.metastore.uris"


class MetastoreUnavailable(StoreUnavailable):
    """The Hive metastore service did not answer the first request; nothing was written. A kind of
    StoreUnavailable: the store of the tables' definitions, reported the same way by jobs.runs."""


def metastore_uris(config: Config) -> str:
    """storage.hive.uris, or the older way of naming the service: spark.hadoop.hive.metastore.uris."""
    return str(config.section("storage").get("hive", {}).get("uris", "")) or config.spark_conf.get(URIS_KEY, "")


def check_metastore_settings(config: Config) -> None:
    """Before Spark starts: a known metastore kind, and a service to reach when it is "hive"."""
    if config.metastore not in METASTORES:
        raise ConfigError(f"storage.metastore {config.metastore!r} is not one of {', '.join(METASTORES)}")
    if config.metastore != "hive":
        return
    uris = metastore_uris(config)
    if not uris:
        raise ConfigError('storage.metastore is "hive": set storage.hive.uris to the service, thrift://host:port')
    for uri in uris.split(","):
        if not re.fullmatch(r"thrift://[^/:\s]+:\d+", uri.strip()):
            raise ConfigError(f"storage.hive.uris: {uri!r} is not thrift://host:port")
    timeout = config.section("storage").get("hive", {}).get("timeout_s", 30)
    if not isinstance(timeout, int) or timeout < 1:
        raise ConfigError(f"storage.hive.timeout_s {timeout!r} must be a whole number of seconds, at least 1")


def hive_settings(config: Config) -> dict[str, str]:
    """The session's settings for the service. Hive's client defaults wait 600 s for an answer and retry
    three times more: a metastore that does not answer held a run for many minutes. Here each attempt to
    connect or call waits at most storage.hive.timeout_s, connecting is tried twice a second apart, and a
    failed call is retried once (Spark's HiveClientImpl reads the same retry setting): a service that is down
    fails a run in seconds, one that accepts but never answers in about four timeouts."""
    check_metastore_settings(config)
    timeout = config.section("storage").get("hive", {}).get("timeout_s", 30)
    return {
        "spark.sql.catalogImplementation": "hive",
        URIS_KEY: metastore_uris(config),
        "spark.hadoop.hive.metastore.client.socket.timeout": f"{timeout}s",
        "spark.hadoop.hive.metastore.connect.retries": "2",
        "spark.hadoop.hive.metastore.client.connect.retry.delay": "1s",
        "spark.hadoop.hive.metastore.failure.retries": "1",
    }


def _innermost_cause(error: Exception) -> str:
    """Hive wraps the reason (ConnectException: Connection refused) in three layers of its own."""
    throwable = getattr(error, "_origin", None) or getattr(error, "java_exception", None)  # pyspark's, py4j's
    if throwable is None:
        return f"{type(error).__name__}: {error}".splitlines()[0]
    return root_cause(throwable)


def reach_metastore(session: SparkSession, database: str, settings: Mapping[str, str]) -> None:
    """The session's first request to the service, before anything is written: a service that is down or
    named wrongly fails the run here (the session stopped), in one line naming it and why."""
    try:
        session.catalog.databaseExists(database)
    except Exception as error:
        session.stop()
        raise MetastoreUnavailable(
            f"cannot reach the Hive metastore at {settings[URIS_KEY]}: {_innermost_cause(error)}. Nothing was "
            "written; check storage.hive.uris and that the service runs (scripts/metastore.sh status)"
        ) from None
