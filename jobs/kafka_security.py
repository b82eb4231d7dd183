"""How groupscope connects to a live Kafka cluster: the `[capture]` settings as Kafka client properties.

Capture (Spark's Kafka source, the gap probe) and the end-offset snapshots (the AdminClient) use the
same properties, so one set of security settings serves both:

- `[capture.kafka]`: client settings that are not secret (security.protocol, sasl.mechanism,
  ssl.truststore.location, ...), passed through as they are;
- `[capture.secrets]`: client setting -> NAME of the environment variable that holds its value
  (sasl.jaas.config, ssl.keystore.password, ...). Values are read when a connection is made, never
  stored, and scrubbed from every message groupscope shows or records.

The Kafka clients are the JVM's (kafka-clients, on Spark's classpath through the Kafka source jars),
called through py4j: the very classes Spark's Kafka source uses, with the very same properties.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from jobs.config import Config

CAPTURE_SECTION = "capture"
DEFAULT_TIMEOUT_S = 30
# Kafka's password-type settings and anything that looks like one: such values belong in [capture.secrets].
_SECRET_SETTING = re.compile(r"password|jaas|secret|credential|token|\.key$", re.IGNORECASE)
_QUOTED_PASSWORD = re.compile(r"""password\s*=\s*"([^"]*)"|password\s*=\s*([^\s;"]+)""", re.IGNORECASE)
REDACTED = "***"


class KafkaSettingsError(ValueError):
    """The [capture] configuration cannot be used as it is; the message says what to change."""


class KafkaUnavailable(RuntimeError):
    """The cluster could not be reached or refused access; the message carries no secret."""


@dataclass(frozen=True)
class KafkaConnection:
    """One cluster's client properties. `properties` holds secrets: never print it."""

    cluster: str
    bootstrap_servers: str
    properties: Mapping[str, str]
    secret_values: tuple[str, ...]
    timeout_s: float

    def redact(self, text: str) -> str:
        """`text` with every secret value (and any password inside one) replaced by ***."""
        for secret in sorted(self.secret_values, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text

    def describe(self) -> str:
        return f"cluster {self.cluster!r} at {self.bootstrap_servers}"


def capture_configured(config: Config) -> bool:
    """True when the configuration names a live cluster to capture ([capture] bootstrap_servers)."""
    return bool(str(config.section(CAPTURE_SECTION).get("bootstrap_servers", "")).strip())


def _secret_values(value: str) -> list[str]:
    """The value itself, plus every password quoted inside it (a JAAS line may be quoted in part)."""
    inner = [first or second for first, second in _QUOTED_PASSWORD.findall(value)]
    return [value, *(password for password in inner if password)]


def kafka_connection(config: Config, environment: Mapping[str, str] | None = None) -> KafkaConnection:
    """The [capture] settings of `config` as Kafka client properties, secrets read from the environment."""
    environment = os.environ if environment is None else environment
    section = config.section(CAPTURE_SECTION)
    bootstrap_servers = str(section.get("bootstrap_servers", "")).strip()
    if not bootstrap_servers:
        raise KafkaSettingsError("[capture] bootstrap_servers is not set: no cluster to connect to")
    plain = {str(key): str(value) for key, value in section.get("kafka", {}).items()}
    looks_secret = sorted(key for key in plain if _SECRET_SETTING.search(key))
    if looks_secret:
        raise KafkaSettingsError(
            f"[capture.kafka] holds {', '.join(looks_secret)}: secrets never go in configuration files; "
            f'name the environment variable that holds each one in [capture.secrets] (e.g. "{looks_secret[0]}" = '
            '"GROUPSCOPE_KAFKA_SECRET")'
        )
    properties = {**plain, "bootstrap.servers": bootstrap_servers}
    secret_values: list[str] = []
    for setting, variable in section.get("secrets", {}).items():
        value = environment.get(str(variable))
        if not value:
            raise KafkaSettingsError(
                f"environment variable {variable} (for the Kafka setting {setting}, [capture.secrets]) is not set"
            )
        properties[str(setting)] = value
        secret_values += _secret_values(value)
    return KafkaConnection(
        cluster=config.cluster,
        bootstrap_servers=bootstrap_servers,
        properties=properties,
        secret_values=tuple(secret_values),
        timeout_s=float(section.get("timeout_s", DEFAULT_TIMEOUT_S)),
    )


def java_properties(spark: SparkSession, settings: Mapping[str, str]):
    properties = spark._jvm.java.util.Properties()
    for key, value in settings.items():
        properties.setProperty(key, value)
    return properties


def java_list(spark: SparkSession, items: Iterable):
    values = spark._jvm.java.util.ArrayList()
    for item in items:
        values.add(item)
    return values


def client_properties(connection: KafkaConnection, client_id: str) -> dict[str, str]:
    """Properties for a JVM client of this connection: requests bounded by the connection's timeout."""
    timeout_ms = str(int(connection.timeout_s * 1000))
    return {
        "client.id": client_id,
        "request.timeout.ms": timeout_ms,
        "default.api.timeout.ms": timeout_ms,
        **connection.properties,
    }


def close_quietly(spark: SparkSession, client) -> None:
    """Closes a JVM Kafka client without waiting for a cluster that may be gone."""
    client.close(spark._jvm.java.time.Duration.ofSeconds(1))


def java_root_cause(error: Py4JJavaError) -> tuple[str, str]:
    """(simple class name, message) of the innermost Java exception behind a py4j call's failure."""
    throwable = error.java_exception
    while throwable.getCause() is not None:
        throwable = throwable.getCause()
    return throwable.getClass().getSimpleName(), str(throwable.getMessage() or "")


def unavailable(connection: KafkaConnection, action: str, kind: str, message: str) -> KafkaUnavailable:
    """A clear, secret-free error for a failed request: what to check first, then Kafka's own words."""
    if "Timeout" in kind:
        advice = (
            f"no answer within {connection.timeout_s:g} s: is the cluster up, and reachable from here on these "
            "bootstrap servers and this security.protocol?"
        )
    elif "Authentication" in kind or "Sasl" in kind or "Ssl" in kind:
        advice = "the cluster refused the credentials: check the values of the [capture.secrets] variables"
    elif "Authorization" in kind:
        advice = "the cluster refused access: grant this principal DESCRIBE and READ on the topics involved"
    else:
        advice = "the request failed"
    return KafkaUnavailable(connection.redact(f"{connection.describe()}: {action}: {advice} ({kind}: {message})"))


def call_kafka(connection: KafkaConnection, action: str, request):
    """Runs `request()` (a blocking JVM Kafka call); a Java failure becomes a KafkaUnavailable."""
    try:
        return request()
    except Py4JJavaError as error:
        kind, message = java_root_cause(error)
        raise unavailable(connection, action, kind, message) from None


@contextmanager
def admin_client(spark: SparkSession, connection: KafkaConnection, client_id: str) -> Iterator:
    """A JVM Kafka Admin for this connection, closed on exit."""
    properties = java_properties(spark, client_properties(connection, client_id))
    admin = spark._jvm.org.apache.kafka.clients.admin.Admin.create(properties)
    try:
        yield admin
    finally:
        close_quietly(spark, admin)


def future_result(spark: SparkSession, connection: KafkaConnection, action: str, future):
    """The value of a KafkaFuture, waited for no longer than the connection's timeout."""
    unit = spark._jvm.java.util.concurrent.TimeUnit.MILLISECONDS
    return call_kafka(connection, action, lambda: future.get(int(connection.timeout_s * 1000), unit))


def describe_partitions(
    spark: SparkSession, connection: KafkaConnection, admin, topics: Iterable[str]
) -> dict[str, int]:
    """{topic: partition count}. A cluster that is down or refuses the credentials fails here, within the
    connection's timeout and with a clear message, before anything else starts."""
    names = sorted(set(topics))
    if not names:
        return {}
    options = spark._jvm.org.apache.kafka.clients.admin.DescribeTopicsOptions().timeoutMs(
        int(connection.timeout_s * 1000)
    )
    future = admin.describeTopics(java_list(spark, names), options).allTopicNames()
    descriptions = future_result(spark, connection, f"describing {', '.join(names)}", future)
    return {name: descriptions.get(name).partitions().size() for name in names}
