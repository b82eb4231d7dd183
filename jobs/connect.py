"""The jobs' session through a Spark Connect server (`spark.remote = "sc://host:port"`, docs/connect.md).

The job's process is then a thin client: the server runs Spark, Delta and the decoder's Java fast path, which
it registers itself (groupscope.DecoderExtension in its spark.sql.extensions; py4j, the classic way, does
not exist here). A server without it still decodes every record, in Python: the run says so on the console,
naming the missing setting, and goes on. The server owns the warehouse, the metastore and every static
setting; only runtime settings of [spark.conf] are sent from here.
"""

from __future__ import annotations

import socket
import sys
import threading
from urllib.parse import urlparse

import grpc
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.config import Config, ConfigError
from jobs.object_store import StoreUnavailable, s3_paths
from schemas.coordinator_records import OFFSET_COMMIT_VALUE
from transforms import silver

DEFAULT_PORT = 15002  # Spark Connect's own default
# How long the server may take to accept a connection and answer the first request before the run fails.
REACH_TIMEOUT_S = 30
VERSIONS_FUNCTION = f"{silver.FAST_PATH_FUNCTION}_versions"
EXTENSION_CLASS = "groupscope.DecoderExtension"


class ConnectUnavailable(StoreUnavailable):
    """The Spark Connect server refused or did not answer the first request; nothing was written."""


def endpoint(remote: str) -> tuple[str, int]:
    """sc://host[:port][/;parameters] -> (host, port)."""
    parsed = urlparse(remote)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise ConfigError(f"spark.remote {remote!r} is not a Spark Connect address: write sc://host:port")
    return parsed.hostname, parsed.port or DEFAULT_PORT


def check_remote_settings(config: Config) -> None:
    """What the jobs cannot do through a server, refused before anything starts (exit 2, one line)."""
    if not config.remote:
        return
    endpoint(config.remote)
    if config.section("capture").get("bootstrap_servers"):
        raise ConfigError(
            "capture.bootstrap_servers with spark.remote: live capture and live end offsets call Kafka's clients "
            "in the job's own Spark driver, which a Spark Connect client has not; capture without spark.remote"
        )
    if s3_paths(config):
        raise ConfigError(
            "an s3a:// path with spark.remote: the run lock and the S3 checks need the job's own Spark driver; "
            "use a local or shared warehouse with Spark Connect, or run without spark.remote (docs/connect.md)"
        )


def build_remote_session(config: Config, app_name: str) -> SparkSession:
    """A session on the server: reached within REACH_TIMEOUT_S or ConnectUnavailable, the decoder registered."""
    host, port = endpoint(config.remote)
    try:
        socket.create_connection((host, port), timeout=REACH_TIMEOUT_S).close()
    except OSError as error:
        raise _unavailable(config.remote, error.strerror or str(error) or type(error).__name__) from None
    _await_grpc(config.remote, host, port)
    session = _first_request(SparkSession.builder.remote(config.remote).appName(app_name), config.remote)
    settings = {"spark.sql.session.timeZone": "UTC", **config.spark_conf}
    for key, value in settings.items():
        # Static settings are the server's (scripts/connect.sh starts it with the same file); these may differ.
        if session.conf.isModifiable(key):
            session.conf.set(key, value)
    register_remote_decoder(session, config.remote)
    if not session.catalog.databaseExists(config.database):  # as jobs.session.build_session
        session.sql(f"CREATE DATABASE IF NOT EXISTS `{config.database}`").collect()
    return session


def _unavailable(remote: str, reason: str) -> ConnectUnavailable:
    return ConnectUnavailable(
        f"cannot reach the Spark Connect server at {remote}: {reason}. Nothing was written; check spark.remote "
        "and that the server runs (scripts/connect.sh status)"
    )


def _await_grpc(remote: str, host: str, port: int) -> None:
    """A gRPC channel of our own, closed after: a port that accepts TCP but never speaks HTTP/2 (the session's
    own channel would wait for ever, and keep the process from exiting) fails after REACH_TIMEOUT_S."""
    secure = "use_ssl=true" in remote.lower()
    target = f"{host}:{port}"
    channel = grpc.secure_channel(target, grpc.ssl_channel_credentials()) if secure else grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=REACH_TIMEOUT_S)
    except grpc.FutureTimeoutError:
        raise _unavailable(remote, f"no gRPC answer within {REACH_TIMEOUT_S} s") from None
    finally:
        channel.close()


def _first_request(builder: SparkSession.Builder, remote: str) -> SparkSession:
    """The session and the server's version, in a thread: a port that accepts connections but never answers
    gRPC (the client would wait for ever) fails the run after REACH_TIMEOUT_S."""
    outcome: list[BaseException | SparkSession] = []

    def ask() -> None:
        try:
            session = builder.getOrCreate()
            session.version  # noqa: B018 - the first request that must be answered
            outcome.append(session)
        except BaseException as error:  # handed to the caller's thread
            outcome.append(error)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    asker.join(REACH_TIMEOUT_S)
    if not outcome:
        raise _unavailable(remote, f"no answer within {REACH_TIMEOUT_S} s")
    if isinstance(outcome[0], BaseException):
        reason = str(outcome[0]).strip().splitlines()[0] if str(outcome[0]).strip() else type(outcome[0]).__name__
        raise _unavailable(remote, reason)
    return outcome[0]


def register_remote_decoder(session: SparkSession, remote: str) -> None:
    """The fast path, checked as CommonOffsetCommits.register checks it; without it a loud Python fallback."""
    fast_path = OFFSET_COMMIT_VALUE.fast_path
    probe = (
        f"SELECT {VERSIONS_FUNCTION}() AS versions,"
        f" {silver.FAST_PATH_FUNCTION}(CAST(NULL AS BINARY), CAST(NULL AS BINARY), CAST(NULL AS STRING)) AS fields"
    )
    try:
        found = session.sql(probe)
        versions, returned = found.first()["versions"], found.schema["fields"].dataType
    except AnalysisException as error:
        if "UNRESOLVED_ROUTINE" not in (error.getCondition() or str(error)):
            raise
        _fall_back_to_python(session, remote)
        return
    if returned != silver.FAST_PATH_TYPE or versions != fast_path.versions:
        raise RuntimeError(
            f"{EXTENSION_CLASS} on {remote} returns {returned.simpleString()} for versions {versions}; this "
            f"groupscope expects {silver.FAST_PATH_TYPE.simpleString()} for {fast_path.versions}: the server "
            "loads another groupscope-decoder.jar than this checkout's (restart it: scripts/connect.sh)"
        )


def _fall_back_to_python(session: SparkSession, remote: str) -> None:
    """Registers a stand-in that finds no record common, so the reference decoder (Python) decodes them all:
    the same rows, at the reference decoder's speed."""
    print(
        f"groupscope: WARNING: the Spark Connect server at {remote} has no {silver.FAST_PATH_FUNCTION}: its "
        f"spark.sql.extensions lacks {EXTENSION_CLASS} (with jvm/spark/jars/groupscope-decoder.jar on its class "
        "path). Every record is decoded in Python instead: the same rows, several times slower. Start the server "
        "with scripts/connect.sh, or add the extension to its spark.sql.extensions",
        file=sys.stderr,
        flush=True,
    )
    no_common_record = F.udf(lambda key, value, read_error: None, silver.FAST_PATH_TYPE).asNondeterministic()
    session.udf.register(silver.FAST_PATH_FUNCTION, no_common_record)
