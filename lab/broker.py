"""A real single-node Apache Kafka broker (KRaft, combined mode, loopback only) from Maven Central jars.

    with Broker("4", workdir) as broker:     # Kafka 4.2.1; "3.9" for Kafka 3.9.2
        broker.bootstrap_servers             # "127.0.0.1:<free port>"

Readiness is a successful metadata request, not a sleep; stopping is SIGTERM and a wait for a clean
shutdown (so segments are flushed to disk), SIGKILL only past a deadline.
"""

from __future__ import annotations

import base64
import socket
import subprocess
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
KAFKA_VERSIONS = {"4": "4.2.1", "3.9": "3.9.2"}
JARS = {"4": REPO_ROOT / "jvm" / "kafka-4" / "jars", "3.9": REPO_ROOT / "jvm" / "kafka-3.9" / "jars"}
STARTUP_DEADLINE_S = 90
SHUTDOWN_DEADLINE_S = 60


class BrokerError(RuntimeError):
    pass


def jars_classpath(version: str) -> str:
    jars = JARS[version]
    if not any(jars.glob("*.jar")):
        raise BrokerError(f"Kafka {KAFKA_VERSIONS[version]} jars missing in {jars}: run scripts/bootstrap.sh")
    return f"{jars}/*"


def run_tool(version: str, main_class: str, *args: str, timeout_s: float = 300) -> str:
    """Runs one of Kafka's command-line tools (its main class) and returns what it printed."""
    command = ["java", "-Xmx256m", "-cp", jars_classpath(version), main_class, *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    if result.returncode != 0:
        raise BrokerError(f"{main_class} {' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


def dump_offsets(files: list[Path], version: str = "4") -> str:
    """Kafka's own decode of __consumer_offsets segments: DumpLogSegments --offsets-decoder."""
    return run_tool(
        version, "kafka.tools.DumpLogSegments", "--offsets-decoder", "--files", ",".join(str(file) for file in files)
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_properties(log_dir: Path, port: int, controller_port: int, offsets_retention_minutes: int) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            f"log.dirs={log_dir}",
            "num.partitions=1",
            "auto.create.topics.enable=false",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            # Scenario speed: rebalances start at once, dead members are noticed in seconds, and the
            # expiry sweep runs every second so expiring offsets can be observed in a scenario.
            "group.initial.rebalance.delay.ms=0",
            "group.min.session.timeout.ms=1000",
            "group.consumer.min.session.timeout.ms=1000",
            "group.consumer.session.timeout.ms=6000",
            "group.consumer.min.heartbeat.interval.ms=500",
            "group.consumer.heartbeat.interval.ms=500",
            "offsets.retention.check.interval.ms=1000",
            f"offsets.retention.minutes={offsets_retention_minutes}",
            "",
        ]
    )


class Broker:
    def __init__(self, version: str = "4", workdir: Path | None = None, offsets_retention_minutes: int = 10080):
        if version not in KAFKA_VERSIONS:
            raise BrokerError(f"unknown lab Kafka version {version!r}; known: {', '.join(KAFKA_VERSIONS)}")
        self.version = version
        self.kafka_version = KAFKA_VERSIONS[version]
        self.workdir = Path(workdir or REPO_ROOT / ".lab" / f"kafka-{version}")
        self.log_dir = self.workdir / "data"
        self.port = _free_port()
        self.controller_port = _free_port()
        self.offsets_retention_minutes = offsets_retention_minutes
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def broker_log(self) -> Path:
        return self.workdir / "broker.log"

    def start(self) -> Broker:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "server.properties"
        config.write_text(
            server_properties(self.log_dir, self.port, self.controller_port, self.offsets_retention_minutes)
        )
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        run_tool(self.version, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config))
        with open(self.broker_log, "wb") as log:
            self.process = subprocess.Popen(
                ["java", "-Xmx512m", "-Xms256m", "-cp", jars_classpath(self.version), "kafka.Kafka", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 2})
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerError(
                    f"Kafka {self.kafka_version} exited ({self.process.returncode}) while starting:\n{self._log_tail()}"
                )
            try:
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    return
            except Exception:  # not accepting connections yet; retried until the deadline
                continue
        self.stop()
        raise BrokerError(f"Kafka {self.kafka_version} not ready after {STARTUP_DEADLINE_S}s:\n{self._log_tail()}")

    def _log_tail(self, lines: int = 40) -> str:
        if not self.broker_log.exists():
            return "(no broker log)"
        return "\n".join(self.broker_log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(SHUTDOWN_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *_) -> None:
        self.stop()

    def consumer_groups_command(self, *args: str) -> str:
        return run_tool(
            self.version,
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server",
            self.bootstrap_servers,
            *args,
        )

    def describe_groups(self) -> str:
        return self.consumer_groups_command("--describe", "--all-groups")

    def offsets_segments(self) -> list[Path]:
        return sorted(path for path in self.log_dir.glob("__consumer_offsets-*/*.log") if path.stat().st_size)
