"""A real single-node Apache Kafka broker (KRaft, combined broker+controller, loopback only) run from the
Maven Central jars that scripts/bootstrap.sh fetched into jvm/kafka-<line>/jars.

    with Broker("4", workdir) as broker:       # Kafka 4.2.1; "3.9" 3.9.2, "4.3" 4.3.1, "4.4" 4.4.0
        broker.bootstrap_servers               # "127.0.0.1:<free port>"
        broker.describe_groups()               # kafka-consumer-groups --describe --all-groups

    Broker("4", workdir, sasl_users={"capture": password})   # plus a SASL_PLAINTEXT (PLAIN) listener:
        broker.sasl_bootstrap_servers                        # "127.0.0.1:<another free port>"

Storage is formatted fresh (`StorageTool format --standalone`, random cluster id). Ready means the port
accepts connections and a metadata request through the AdminClient lists the broker; no sleep stands in
for readiness. Stop is SIGTERM and a wait for the clean shutdown (segments closed and flushed), SIGKILL
only past a deadline; `restart()` brings a stopped broker back on its storage and ports (an outage).
`dump_offsets(files)` runs Kafka's own DumpLogSegments without any broker.

SASL passwords never reach a file: server.properties refers to environment variables of the broker
process (`${env:...}`, Kafka's EnvVarConfigProvider).
"""

from __future__ import annotations

import base64
import os
import random
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
KAFKA_VERSIONS = {"4": "4.2.1", "3.9": "3.9.2", "4.3": "4.3.1", "4.4": "4.4.0"}
JARS = {line: REPO_ROOT / "jvm" / f"kafka-{line}" / "jars" for line in KAFKA_VERSIONS}
# The Scala tool up to 4.2; 4.3 replaced it with a Java rewrite under another name (dump_log_segments_class).
DUMP_LOG_SEGMENTS = "kafka.tools.DumpLogSegments"
DUMP_LOG_SEGMENTS_BY_LINE = {line: "org.apache.kafka.tools.DumpLogSegments" for line in ("4.3", "4.4")}
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
# kafka-configs: Scala's kafka.admin.ConfigCommand up to 4.3; 4.4 moved it to kafka-tools under another name.
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
CONFIG_COMMAND_BY_LINE = {"4.4": "org.apache.kafka.tools.ConfigCommand"}
STARTUP_DEADLINE_S = 90
SHUTDOWN_DEADLINE_S = 60
TOOL_JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
DEFAULT_OFFSETS_RETENTION_MINUTES = 7 * 24 * 60  # Kafka's default
# KIP-848 members' session and heartbeat are broker settings, so the gold settings need them too.
CONSUMER_GROUP_SESSION_TIMEOUT_MS, CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS = 6000, 1000
SASL_LISTENER = "SASL_PLAINTEXT"
ENV_CONFIG_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
# Kafka 3.9's jars bind SLF4J to reload4j, which logs nothing without a configuration; 4.x uses slf4j-simple.
RELOAD4J_CONSOLE = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def _not_ready_codes() -> frozenset:
    from confluent_kafka import KafkaError

    # UNKNOWN_LEADER_EPOCH: right after a restart, metadata can be ahead of the partition's own state.
    return frozenset(
        {
            KafkaError.NOT_LEADER_FOR_PARTITION,
            KafkaError.LEADER_NOT_AVAILABLE,
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError.UNKNOWN_LEADER_EPOCH,
        }
    )


class BrokerError(RuntimeError):
    """The lab broker or one of Kafka's tools failed; the message carries the relevant log tail."""


def classpath(version: str) -> str:
    if version not in KAFKA_VERSIONS:
        raise BrokerError(f"unknown lab Kafka line {version!r}; known: {', '.join(KAFKA_VERSIONS)}")
    jars = JARS[version]
    if not any(jars.glob("kafka_2.13-*.jar")):
        raise BrokerError(f"Kafka {KAFKA_VERSIONS[version]} jars are missing in {jars}: run scripts/bootstrap.sh lab")
    return f"{jars}/*"


def run_tool(
    version: str, main_class: str, *args: str, timeout_s: float = 300, environment: Mapping[str, str] | None = None
) -> str:
    """Runs one of Kafka's command-line tools by its main class; returns its stdout."""
    command = ["java", *TOOL_JVM_OPTIONS, "-cp", classpath(version), main_class, *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False, env=environment)
    if result.returncode != 0:
        raise BrokerError(
            f"{main_class} {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}{result.stdout[-1000:]}"
        )
    return result.stdout


def dump_log_segments_class(version: str) -> str:
    """DumpLogSegments' main class in the jars of Kafka line `version`."""
    return DUMP_LOG_SEGMENTS_BY_LINE.get(version, DUMP_LOG_SEGMENTS)


def dump_offsets(files: Iterable[Path | str], version: str = "4") -> str:
    """Kafka's own decode of __consumer_offsets segment files (DumpLogSegments --offsets-decoder), one JVM."""
    paths = [str(path) for path in files]
    if not paths:
        raise BrokerError("dump_offsets needs at least one segment file")
    return run_tool(version, dump_log_segments_class(version), "--offsets-decoder", "--files", ",".join(paths))


def dump_share_state(files: Iterable[Path | str], version: str = "4") -> str:
    """Kafka's own decode of __share_group_state segment files (DumpLogSegments --share-group-state-decoder)."""
    paths = [str(path) for path in files]
    if not paths:
        raise BrokerError("dump_share_state needs at least one segment file")
    decoder = "--share-group-state-decoder"
    return run_tool(version, dump_log_segments_class(version), decoder, "--files", ",".join(paths))


def free_port() -> int:
    """A loopback port nothing is bound to, below the kernel's ephemeral range.

    A port the kernel hands out for binding port 0 comes from the ephemeral range, where any process's
    outgoing connection may take it as its source port before the service we pick it for binds it (a
    metastore service's start failed that way in a busy suite); below the range only listeners compete.
    """
    first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    below = range(10_000, first_ephemeral)
    candidates = random.sample(below, min(200, len(below)))
    for port in candidates:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise BrokerError(f"no free port among {len(candidates)} tried below {first_ephemeral}")


def port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def sasl_password_variable(user: str) -> str:
    """The broker process's environment variable that holds `user`'s SASL/PLAIN password."""
    return "LAB_SASL_PASSWORD_" + base64.b32encode(user.encode()).decode().rstrip("=")


def plain_jaas_config(user: str, password: str) -> str:
    """A client's sasl.jaas.config for SASL/PLAIN (a secret: pass it through the environment)."""
    return f'{PLAIN_LOGIN_MODULE} required username="{user}" password="{password}";'


def _sasl_properties(sasl_port: int, users: Iterable[str]) -> dict[str, object]:
    credentials = " ".join(f'user_{user}="${{env:{sasl_password_variable(user)}}}"' for user in users)
    listener = SASL_LISTENER.lower()
    return {
        "sasl.enabled.mechanisms": "PLAIN",
        f"listener.name.{listener}.plain.sasl.jaas.config": f"{PLAIN_LOGIN_MODULE} required {credentials};",
        "config.providers": "env",
        "config.providers.env.class": ENV_CONFIG_PROVIDER,
    }


def server_properties(
    version: str,
    log_dir: Path,
    port: int,
    controller_port: int,
    settings: Mapping[str, object],
    sasl_port: int | None = None,
    sasl_users: Iterable[str] = (),
) -> str:
    listeners = {"PLAINTEXT": port} | ({SASL_LISTENER: sasl_port} if sasl_port else {})
    advertised = ",".join(f"{name}://127.0.0.1:{listener_port}" for name, listener_port in listeners.items())
    properties: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "listeners": f"{advertised},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": advertised,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(f"{name}:{name}" for name in listeners) + ",CONTROLLER:PLAINTEXT",
        "log.dirs": log_dir,
        "num.partitions": 1,
        "auto.create.topics.enable": "false",
        # offsets.topic.num.partitions stays at Kafka's 50: which partition a group lands in is real data.
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        # Rebalances start at once; members may use session timeouts of a few seconds, so a crashed
        # member is noticed quickly; the offset-expiry sweep runs every second.
        "group.initial.rebalance.delay.ms": 0,
        "group.min.session.timeout.ms": 1000,
        "offsets.retention.check.interval.ms": 1000,
        "offsets.retention.minutes": DEFAULT_OFFSETS_RETENTION_MINUTES,
    }
    if version != "3.9":
        properties |= {
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
        }
    # KIP-848 groups: session and heartbeat are broker settings (defaults 45 s and 5 s, minimums as large).
    properties |= {
        "group.consumer.min.session.timeout.ms": 1000,
        "group.consumer.session.timeout.ms": CONSUMER_GROUP_SESSION_TIMEOUT_MS,
        "group.consumer.min.heartbeat.interval.ms": 500,
        "group.consumer.heartbeat.interval.ms": CONSUMER_GROUP_HEARTBEAT_INTERVAL_MS,
    }
    if sasl_port:
        properties |= _sasl_properties(sasl_port, sasl_users)
    properties |= dict(settings)
    return "".join(f"{key}={value}\n" for key, value in properties.items())


class Broker:
    """One broker process of Kafka `version` ("4" = 4.2.1, "3.9" = 3.9.2, "4.3" = 4.3.1, "4.4" = 4.4.0) with
    its data in `workdir`.

    `settings` override or add server.properties entries (e.g. `offsets.retention.minutes`, or
    `group.coordinator.rebalance.protocols` to enable KIP-848 groups on 3.9). `sasl_users` (user ->
    password) adds a SASL_PLAINTEXT listener with the PLAIN mechanism for those users.
    """

    def __init__(
        self,
        version: str = "4",
        workdir: Path | str = REPO_ROOT / ".lab" / "broker",
        port: int | None = None,
        *,
        offsets_retention_minutes: int = DEFAULT_OFFSETS_RETENTION_MINUTES,
        settings: Mapping[str, object] | None = None,
        sasl_users: Mapping[str, str] | None = None,
    ):
        classpath(version)  # fail early, with the bootstrap hint, if the jars are missing
        self.version = version
        self.kafka_version = KAFKA_VERSIONS[version]
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.controller_port = free_port()
        self.settings = {"offsets.retention.minutes": offsets_retention_minutes, **(settings or {})}
        self._sasl_passwords = dict(sasl_users or {})
        self.sasl_port = free_port() if self._sasl_passwords else None
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        if self.sasl_port is None:
            raise BrokerError("this broker has no SASL listener: pass sasl_users")
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_file(self) -> Path:
        return self.workdir / "broker.log"

    @property
    def config_file(self) -> Path:
        return self.workdir / "server.properties"

    def start(self) -> Broker:
        if self.log_dir.exists() and any(self.log_dir.iterdir()):
            raise BrokerError(f"{self.log_dir} is not empty; a lab broker always starts from fresh storage")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(
            server_properties(
                self.version,
                self.log_dir,
                self.port,
                self.controller_port,
                self.settings,
                self.sasl_port,
                self._sasl_passwords,
            )
        )
        if self.version == "3.9":
            (self.workdir / "log4j.properties").write_text(RELOAD4J_CONSOLE)
        # Passed as --cluster-id=ID: a random id may start with "-", which would read as an option.
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        run_tool(
            self.version,
            "kafka.tools.StorageTool",
            "format",
            "--standalone",
            f"--cluster-id={cluster_id}",
            "-c",
            str(self.config_file),
            environment=self._environment(),
        )
        return self._launch()

    def restart(self) -> Broker:
        """Stops the broker if it runs and starts it again on the same storage and ports (an outage)."""
        self.stop()
        return self._launch()

    def _environment(self) -> dict[str, str]:
        return os.environ | {sasl_password_variable(user): password for user, password in self._sasl_passwords.items()}

    def _launch(self) -> Broker:
        logging = []
        if self.version == "3.9":
            logging = [f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}"]
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                [
                    "java",
                    "-Xmx512m",
                    "-Xms128m",
                    *logging,
                    "-cp",
                    classpath(self.version),
                    "kafka.Kafka",
                    str(self.config_file),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._environment(),
            )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + STARTUP_DEADLINE_S
        admin = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerError(
                    f"Kafka {self.kafka_version} exited with {self.process.returncode} while starting; "
                    f"{self.log_file}:\n{self.log_tail()}"
                )
            if not port_accepts(self.port):
                time.sleep(0.2)  # poll interval while the JVM starts; readiness is the checks around it
                continue
            admin = admin or AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
            try:
                if admin.list_topics(timeout=5).brokers:
                    return
            except Exception:  # the listener is up before the broker is unfenced: ask again
                time.sleep(0.2)
        raise BrokerError(
            f"Kafka {self.kafka_version} not ready after {STARTUP_DEADLINE_S}s; {self.log_file}:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_file.exists():
            return "(no broker log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM and wait: Kafka's controlled shutdown closes (and flushes) every segment."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(SHUTDOWN_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise BrokerError(
                f"Kafka {self.kafka_version} did not stop within {SHUTDOWN_DEADLINE_S}s and was killed; "
                f"its segments may be incomplete:\n{self.log_tail()}"
            ) from None

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *_) -> None:
        self.stop()

    def run_tool(self, main_class: str, *args: str) -> str:
        return run_tool(self.version, main_class, *args)

    def dump_offsets(self, files: Iterable[Path | str]) -> str:
        return dump_offsets(files, self.version)

    def configs(self, *args: str) -> str:
        """kafka-configs against this broker (the main class of the broker's line)."""
        main_class = CONFIG_COMMAND_BY_LINE.get(self.version, CONFIG_COMMAND)
        return self.run_tool(main_class, "--bootstrap-server", self.bootstrap_servers, *args)

    def consumer_groups(self, *args: str) -> str:
        """kafka-consumer-groups against this broker."""
        return self.run_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", self.bootstrap_servers, *args)

    def describe_groups(self) -> str:
        return self.consumer_groups("--describe", "--all-groups")

    def describe_members(self) -> str:
        return self.consumer_groups("--describe", "--all-groups", "--members", "--verbose")

    def describe_state(self) -> str:
        return self.consumer_groups("--describe", "--all-groups", "--state")

    def end_offsets(self, topics: Iterable[str], deadline_s: float = 60) -> dict[str, dict[int, int]]:
        """{topic: {partition: end offset}} (the log end offset, what a read_uncommitted reader sees)."""
        from confluent_kafka import KafkaException, TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        retriable = _not_ready_codes()
        deadline = time.monotonic() + deadline_s
        while True:
            metadata = admin.list_topics(timeout=30)
            request = {
                TopicPartition(topic, partition): OffsetSpec.latest()
                for topic in topics
                for partition in metadata.topics[topic].partitions
            }
            try:
                ends = (
                    {
                        (partition.topic, partition.partition): future.result().offset
                        for partition, future in admin.list_offsets(request, request_timeout=30).items()
                    }
                    if request
                    else {}
                )
                break
            except KafkaException as error:  # e.g. a new partition whose leader is not known yet
                if error.args[0].code() not in retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        result: dict[str, dict[int, int]] = {}
        for (topic, partition), end in sorted(ends.items()):
            result.setdefault(topic, {})[partition] = end
        return result

    def dump_share_state(self, files: Iterable[Path | str]) -> str:
        return dump_share_state(files, self.version)

    def offsets_segments(self, topic: str = "__consumer_offsets") -> list[Path]:
        """The non-empty <topic>-N/*.log segment files, in partition then offset order (`topic` is
        `__share_group_state` for the share coordinator's log)."""
        segments = [path for path in self.log_dir.glob(f"{topic}-*/*.log") if path.stat().st_size]
        return sorted(segments, key=lambda path: (int(path.parent.name.rsplit("-", 1)[1]), path.name))
