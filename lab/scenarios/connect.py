"""A real Kafka Connect cluster: a group of protocol type `connect` next to the consumer groups.

Two distributed workers (org.apache.kafka.connect.cli.ConnectDistributed from the broker's own jars;
Connect protocol `sessioned`, KIP-415 incremental cooperative rebalancing with KIP-507 sessions)
share group `connect-lab`. A tiny sink connector (lab/connect/LabSinkConnector.java, compiled here
with javac against the line's connect-api) runs with two tasks on topic `connect-input`; the tasks'
consumers form a second, classic consumer group `connect-lab-sink` (Kafka's Java client, `range`
protocol, offsets committed by the worker every second).

worker-1 starts and takes the connector and both tasks; worker-2 joins and the cooperative protocol
moves tasks to it (a revoking round, then an assigning round); worker-2 stops cleanly and, after
scheduled.rebalance.max.delay.ms (3 s here), worker-1 takes its tasks back. worker-1 runs on.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from lab.broker import JARS, TOOL_JVM_OPTIONS, Broker, classpath, free_port
from lab.driver import Lab, ScenarioError, ScenarioLog

VERSIONS = ("4", "3.9", "4.3", "4.4")
GROUP = "connect-lab"
CONNECTOR = "lab-sink"
SINK_GROUP = f"connect-{CONNECTOR}"
TOPICS = ("connect-input",)
SOURCE = Path(__file__).resolve().parent.parent / "connect" / "LabSinkConnector.java"

WORKER_PROPERTIES = """bootstrap.servers={bootstrap}
group.id={group}
client.id={name}
listeners=http://127.0.0.1:{port}
rest.advertised.host.name=127.0.0.1
rest.advertised.port={port}
plugin.path={plugins}
plugin.discovery=service_load
key.converter=org.apache.kafka.connect.converters.ByteArrayConverter
value.converter=org.apache.kafka.connect.converters.ByteArrayConverter
config.storage.topic=connect-configs
offset.storage.topic=connect-offsets
status.storage.topic=connect-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
offset.storage.partitions=1
status.storage.partitions=1
offset.flush.interval.ms=1000
session.timeout.ms=6000
heartbeat.interval.ms=1000
scheduled.rebalance.max.delay.ms=3000
consumer.session.timeout.ms=6000
consumer.heartbeat.interval.ms=1000
"""


def build_connector(version: str, workdir: Path) -> Path:
    """javac LabSinkConnector.java into a plugin directory; returns the plugin.path."""
    plugins, classes = workdir / "plugins", workdir / "connector-classes"
    shutil.rmtree(plugins, ignore_errors=True)
    (plugins / "lab-connector").mkdir(parents=True)
    compile_path = ":".join(
        str(jar) for jar in JARS[version].glob("*.jar") if jar.name.startswith(("connect-api", "kafka-clients"))
    )
    subprocess.run(["javac", "--release", "17", "-d", str(classes), "-cp", compile_path, str(SOURCE)], check=True)
    # A ServiceLoader manifest lets the workers skip the reflective classpath scan (KIP-898): ~13 s each.
    services = classes / "META-INF" / "services"
    services.mkdir(parents=True, exist_ok=True)
    (services / "org.apache.kafka.connect.sink.SinkConnector").write_text("groupscope.lab.LabSinkConnector\n")
    subprocess.run(
        ["jar", "cf", str(plugins / "lab-connector" / "lab-connector.jar"), "-C", str(classes), "."], check=True
    )
    return plugins


class Worker:
    def __init__(self, lab: Lab, name: str, plugins: Path):
        self.lab, self.name, self.port = lab, name, free_port()
        workdir = lab.record.workdir
        config = workdir / f"{name}.properties"
        config.write_text(
            WORKER_PROPERTIES.format(
                bootstrap=lab.broker.bootstrap_servers, group=GROUP, name=name, port=self.port, plugins=plugins
            )
        )
        command = ["java", *TOOL_JVM_OPTIONS, "-cp", classpath(lab.broker.version)]
        command += ["org.apache.kafka.connect.cli.ConnectDistributed", str(config)]
        with open(workdir / f"{name}.log", "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        lab.record.groups.add(GROUP)
        lab.record.event("connect_worker_started", worker=name, group=GROUP, rest_port=self.port)
        lab.record.keep_running(self.kill)  # registered first: a worker that never gets ready is killed too
        lab.wait_for(f"{name} REST API", self.ready, deadline_s=120)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise ScenarioError(f"Connect worker {self.name} exited with {self.process.returncode}")
        try:
            return bool(self.get("/connectors") is not None)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=5) as response:
            return json.load(response)

    def post(self, path: str, body: dict):
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)
        self.lab.record.event("connect_worker_stopped", worker=self.name)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
            self.lab.record.event("connect_worker_killed_after_capture", worker=self.name)


def task_workers(worker: Worker) -> dict[str, str]:
    """{"connector" or "task-N": worker id} for running instances, as Connect reports them."""
    try:
        status = worker.get(f"/connectors/{CONNECTOR}/status")
    except urllib.error.HTTPError:
        return {}
    running = {}
    if status["connector"]["state"] == "RUNNING":
        running["connector"] = status["connector"]["worker_id"]
    for task in status["tasks"]:
        if task["state"] == "RUNNING":
            running[f"task-{task['id']}"] = task["worker_id"]
    return running


def connect_group_members(lab: Lab) -> tuple[str, int]:
    """(state, member count) of the Connect group, from a raw DescribeGroups: confluent-kafka's AdminClient
    describes consumer groups only, and kafka-python's describe_groups decodes every payload as one."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=lab.broker.bootstrap_servers)

    async def describe():
        coordinator = await admin._find_coordinator_id(GROUP)
        return await admin._manager.send(admin._describe_groups_request([GROUP]), node_id=coordinator)

    try:
        group = admin._manager.run(describe).groups[0]
    finally:
        admin.close()
    return group.group_state, len(group.members)


def wait_for_placement(lab: Lab, worker: Worker, members: int, workers: set[str]) -> None:
    def placed() -> bool:
        state, count = connect_group_members(lab)
        running = task_workers(worker)
        return state == "Stable" and count == members and len(running) == 3 and set(running.values()) == workers

    lab.wait_for(f"{CONNECTOR} running on {sorted(workers)} with {members} worker(s)", placed, deadline_s=90)
    lab.record.event("connect_placement", group=GROUP, workers=members, placement=task_workers(worker))


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    lab.create_topic("connect-input", 4)
    lab.produce("connect-input", 40)
    plugins = build_connector(broker.version, record.workdir)

    worker1 = Worker(lab, "worker-1", plugins)
    worker1.post(
        "/connectors",
        {
            "name": CONNECTOR,
            "config": {
                "connector.class": "groupscope.lab.LabSinkConnector",
                "tasks.max": "2",
                "topics": "connect-input",
            },
        },
    )
    record.groups.add(SINK_GROUP)
    record.event("connector_created", connector=CONNECTOR, tasks=2, sink_group=SINK_GROUP)
    id1 = f"127.0.0.1:{worker1.port}"
    wait_for_placement(lab, worker1, 1, {id1})
    lab.wait_caught_up(SINK_GROUP, TOPICS)

    worker2 = Worker(lab, "worker-2", plugins)
    id2 = f"127.0.0.1:{worker2.port}"
    wait_for_placement(lab, worker1, 2, {id1, id2})
    lab.produce("connect-input", 20)
    lab.wait_caught_up(SINK_GROUP, TOPICS)

    worker2.stop()
    started = time.monotonic()
    wait_for_placement(lab, worker1, 1, {id1})
    record.event("tasks_reassigned_after_delay", seconds=round(time.monotonic() - started, 1))
    lab.produce("connect-input", 8)
    lab.wait_caught_up(SINK_GROUP, TOPICS)
