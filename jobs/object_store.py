"""S3 API object storage ([storage.s3], docs/s3.md): the Hadoop S3A settings of a session, the
environment that pyarrow reads segment files with, and a first request that fails a run early and
clearly when the store cannot be reached.

Credentials are read from the environment variables that [storage.s3] names, when the session is
built; their values go into the session's Hadoop configuration (which Spark redacts from its UI and
event logs) and into the Python workers' environment, never into a file, a log line or a message: every
message built from a store's error passes through `redact`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyarrow import fs
from pyspark.sql import SparkSession

from jobs.config import Config, ConfigError

S3_SCHEMES = ("s3a", "s3", "s3n")
# Delta's log store for S3: a commit is a put of the next N.json, which S3 cannot refuse to overwrite
# through Delta's API, so only one driver may write a table at a time (the run lock, jobs/locks.py).
DELTA_LOG_STORE = "io.delta.storage.S3SingleDriverLogStore"
# What the SQL launchers can hand to Hadoop as ${env.NAME} (credential_references).
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The SQL launchers' check of the buckets (check_buckets), bounded as conf/s3.toml bounds S3A's first request.
BUCKET_CHECK_CONNECT_TIMEOUT_S, BUCKET_CHECK_REQUEST_TIMEOUT_S, BUCKET_CHECK_ATTEMPTS = 15, 30, 2
NO_SUCH_BUCKET = "no such bucket there (a HEAD of the bucket found none), or it is not an S3 API store"


class StoreUnavailable(RuntimeError):
    """The object store refused or did not answer the first request; nothing was written."""


@dataclass(frozen=True)
class S3Settings:
    endpoint: str
    region: str
    path_style_access: bool
    access_key_env: str
    secret_key_env: str
    session_token_env: str

    def describe(self) -> str:
        return f"the S3 endpoint {self.endpoint or '(AWS)'}"

    def variables(self) -> dict[str, str]:
        """The names of the variables holding each credential ("" for one not named)."""
        return {
            "access_key": self.access_key_env,
            "secret_key": self.secret_key_env,
            "session_token": self.session_token_env,
        }


def s3_settings(config: Config) -> S3Settings:
    section = config.section("storage").get("s3", {})
    return S3Settings(
        endpoint=str(section.get("endpoint", "")),
        region=str(section.get("region", "")),
        path_style_access=bool(section.get("path_style_access", False)),
        access_key_env=str(section.get("access_key_env", "")),
        secret_key_env=str(section.get("secret_key_env", "")),
        session_token_env=str(section.get("session_token_env", "")),
    )


def is_s3(path: str) -> bool:
    return path.split("://", 1)[0] in S3_SCHEMES if "://" in path else False


def s3_paths(config: Config) -> list[str]:
    """Every place a run reads or writes that is on S3: the warehouse, inputs, the capture checkpoint."""
    checkpoint = str(config.section("capture").get("checkpoint_dir", ""))
    paths = [config.warehouse, *config.segment_paths, *config.raw_table_paths, checkpoint]
    return [path for path in paths if is_s3(path)]


def credentials(config: Config, environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """{"access_key": ..., "secret_key": ..., "session_token": ...} from the variables [storage.s3]
    names; empty when none is named (S3A and pyarrow then use the AWS default chain)."""
    environment = os.environ if environment is None else environment
    settings = s3_settings(config)
    named = settings.variables()
    if bool(settings.access_key_env) != bool(settings.secret_key_env):
        raise ConfigError("[storage.s3] access_key_env and secret_key_env are named together, or neither")
    found = {}
    for key, variable in named.items():
        if not variable:
            continue
        if variable not in environment:
            raise ConfigError(f"environment variable {variable} ([storage.s3] {key}_env) is not set")
        found[key] = environment[variable]
    return found


def credential_references(config: Config, environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """The credentials as `${env.NAME}`, for a JVM that inherits the variables: Hadoop's Configuration
    expands the reference when S3A reads the key, inside that JVM. The SQL launchers
    (jobs/sql_launch.py) pass these on spark-submit's command line, which `ps` shows to every user of
    the machine, so only the variables' names may be there. Checked like `credentials`: a variable
    that is not set is named here, before any JVM starts."""
    found = credentials(config, environment)
    named = s3_settings(config).variables()
    for key in found:
        # Hadoop expands ${...} again inside an expanded value, and reads a name up to its first "}".
        if "${" in found[key] or not _VARIABLE_NAME.fullmatch(named[key]):
            raise ConfigError(
                f"environment variable {named[key]} ([storage.s3] {key}_env) cannot be handed to the SQL "
                "shell by name: the name must be letters, digits and _, and the value must not contain '${'"
            )
    return {key: f"${{env.{named[key]}}}" for key in found}


def check_credentials(config: Config) -> None:
    """Before Spark starts: the variables a run on S3 will read are set (exit 2 names the one missing)."""
    if s3_paths(config):
        credentials(config)


def hadoop_settings(config: Config, secrets: Mapping[str, str]) -> dict[str, str]:
    """The session's spark.hadoop.fs.s3a.* settings, and Delta's log store for S3. `secrets` holds the
    credentials' values (a job's session) or references to their variables (the SQL launchers)."""
    settings = s3_settings(config)
    conf = {
        "spark.delta.logStore.s3a.impl": DELTA_LOG_STORE,
        "spark.hadoop.fs.s3a.path.style.access": str(settings.path_style_access).lower(),
        # The Hive metastore copies a warehouse folder's owner and mode onto each new database folder:
        # S3 has neither, and the attempt prints "chgrp/chmod: No such file or directory" on the console.
        "spark.hadoop.hive.warehouse.subdir.inherit.perms": "false",
    }
    if settings.endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = settings.endpoint
        # S3A reads the scheme from the endpoint; this only matters for an endpoint given without one.
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(settings.endpoint.startswith("https")).lower()
    if settings.region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = settings.region
    if secrets:
        provider = "TemporaryAWSCredentialsProvider" if "session_token" in secrets else "SimpleAWSCredentialsProvider"
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = f"org.apache.hadoop.fs.s3a.{provider}"
        conf["spark.hadoop.fs.s3a.access.key"] = secrets["access_key"]
        conf["spark.hadoop.fs.s3a.secret.key"] = secrets["secret_key"]
        if "session_token" in secrets:
            conf["spark.hadoop.fs.s3a.session.token"] = secrets["session_token"]
    return conf


def pyarrow_environment(config: Config, secrets: Mapping[str, str]) -> dict[str, str]:
    """What pyarrow's S3 filesystem reads segment files with (jobs/segment_files.py), in the driver and
    in every Python worker: the AWS SDK's standard variables."""
    settings = s3_settings(config)
    environment = {}
    if settings.endpoint:
        environment["AWS_ENDPOINT_URL"] = settings.endpoint
    if settings.region:
        environment["AWS_REGION"] = settings.region
    names = {
        "access_key": "AWS_ACCESS_KEY_ID",
        "secret_key": "AWS_SECRET_ACCESS_KEY",
        "session_token": "AWS_SESSION_TOKEN",
    }
    environment.update({names[key]: value for key, value in secrets.items()})
    return environment


def configure_workers(spark: SparkSession, environment: Mapping[str, str]) -> None:
    """The driver's own pyarrow (listing segment files) and the Python workers (reading them) see the
    store: SparkContext.environment travels with every Python function to the executors."""
    os.environ.update(environment)
    spark.sparkContext.environment.update(environment)


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def root_cause(throwable) -> str:
    """A Java exception's innermost cause, as its class's simple name and its message's first line."""
    cause = throwable
    while cause.getCause() is not None and cause.getCause() != cause:
        cause = cause.getCause()
    first_line = (str(cause.getMessage() or "")).splitlines()[:1]
    return f"{cause.getClass().getSimpleName()}: {first_line[0] if first_line else ''}".strip()


def _unusable(bucket: str, config: Config, reason: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"cannot use {bucket} at {s3_settings(config).describe()}: {reason.rstrip('.')}. Nothing was written; check "
        "[storage.s3] (endpoint, region, path_style_access) and the credentials in the environment variables it names"
    )


def check_reachable(spark: SparkSession, config: Config, secrets: Mapping[str, str]) -> None:
    """One request to each S3 bucket the run uses, before anything is written: a wrong endpoint or
    wrong credentials fail here, in the bounded time of S3A's retry settings, naming the store."""
    jvm = spark.sparkContext._jvm
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    first_path_per_bucket = {"/".join(path.split("/", 3)[:3]): path for path in reversed(s3_paths(config))}
    for bucket, path in first_path_per_bucket.items():
        try:
            # A real request (S3A answers for a bucket's root without asking the store): HEAD and LIST.
            probe = jvm.org.apache.hadoop.fs.Path(path)
            probe.getFileSystem(hadoop_conf).exists(probe)
        except Py4JJavaError as error:
            raise _unusable(bucket, config, redact(root_cause(error.java_exception), secrets.values())) from None


def check_buckets(config: Config, secrets: Mapping[str, str]) -> None:
    """Before a SQL launcher starts its JVM (jobs/sql_launch.py): each bucket the shell or server will open is
    asked for, with pyarrow's S3 client, which only reads (a HEAD of the bucket). Their JVM's first request
    to the store is its metastore's, which fails inside Hive with a Java stack; and an endpoint that answers
    HTTP but is not S3 passes an object's HEAD (404 reads as "no such object"), not a bucket's."""
    settings = s3_settings(config)
    store = fs.S3FileSystem(
        access_key=secrets.get("access_key"),
        secret_key=secrets.get("secret_key"),
        session_token=secrets.get("session_token"),
        region=settings.region or None,
        endpoint_override=settings.endpoint or None,
        scheme="https" if settings.endpoint.startswith("https") or not settings.endpoint else "http",
        force_virtual_addressing=not settings.path_style_access,
        connect_timeout=BUCKET_CHECK_CONNECT_TIMEOUT_S,
        request_timeout=BUCKET_CHECK_REQUEST_TIMEOUT_S,
        retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=BUCKET_CHECK_ATTEMPTS),
    )
    buckets = sorted({"/".join(path.split("/", 3)[:3]) for path in s3_paths(config)})
    for bucket in buckets:
        try:
            found = store.get_file_info(bucket.split("://", 1)[1]).type
        except OSError as error:
            raise _unusable(bucket, config, redact(str(error).splitlines()[0], secrets.values())) from None
        if found != fs.FileType.Directory:
            raise _unusable(bucket, config, NO_SUCH_BUCKET)
