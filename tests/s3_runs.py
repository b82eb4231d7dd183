"""Real S3-compatible servers on loopback for tests/integration/test_s3.py, started and stopped with the
users' own script (scripts/s3proxy.sh), and `spark-submit.sh` runs against them: with conf/s3.toml as
shipped (the documented setup: its server's port, its metastore folder in the checkout), or with an
environment file written per run (conf/s3.toml's settings pointing at another server or warehouse).

The key pair is made up per session and reaches the server and the runs only through environment
variables, the way conf/s3.toml names them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from jobs.config import Config, load_config
from lab.broker import free_port
from tests.conftest import REPO_ROOT
from tests.small_data import toml_lines

BUCKET = "groupscope"
ACCESS_KEY_ENV, SECRET_KEY_ENV = "GROUPSCOPE_S3_ACCESS_KEY", "GROUPSCOPE_S3_SECRET_KEY"
SAMPLE = REPO_ROOT / "samples" / "kafka-4.2.1"
RUN_TIMEOUT_SECONDS = 1500  # a nightly of the sample into s3proxy took 516 s at load 12 on two cores
SHIPPED_CONF = REPO_ROOT / "conf" / "s3.toml"


def shipped_setup() -> Config:
    """conf/s3.toml as shipped, read as the jobs read it (its metastore folder is `warehouse_dir`)."""
    return load_config(SHIPPED_CONF)


def endpoint_port(config: Config) -> int:
    return urlsplit(config.section("storage")["s3"]["endpoint"]).port


@contextlib.contextmanager
def emptied_for_the_test(folder: Path) -> Iterator[Path]:
    """`folder` in the checkout (conf/s3.toml's metastore folder) absent while the test runs, and removed
    after it: a folder the user's own runs left there is moved aside into build/ and put back."""
    aside = REPO_ROOT / "build" / f"{folder.name}.set-aside-by-test_s3"
    assert not aside.exists(), f"{aside} holds {folder} from an earlier test run that ended early: move it back"
    if folder.exists():
        aside.parent.mkdir(exist_ok=True)
        folder.rename(aside)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if aside.exists():
            aside.rename(folder)


def new_credentials() -> dict[str, str]:
    return {ACCESS_KEY_ENV: f"groupscope-{secrets.token_hex(4)}", SECRET_KEY_ENV: secrets.token_urlsafe(24)}


@dataclass
class S3Server:
    """One s3proxy, objects under `folder` (the bucket is `folder`/groupscope)."""

    folder: Path
    credentials: dict[str, str]
    jars: Path = REPO_ROOT / "jvm" / "s3proxy" / "jars"
    port: int = field(default_factory=free_port)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def bucket_folder(self) -> Path:
        return self.folder / BUCKET

    def _script(self, action: str) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            **self.credentials,
            "GROUPSCOPE_S3PROXY_PORT": str(self.port),
            "GROUPSCOPE_S3PROXY_DIR": str(self.folder),
            "GROUPSCOPE_S3PROXY_JARS": str(self.jars),
        }
        script = [str(REPO_ROOT / "scripts" / "s3proxy.sh"), action]
        return subprocess.run(script, env=env, capture_output=True, text=True, timeout=300)

    def start(self) -> S3Server:
        started = self._script("start")
        assert started.returncode == 0, f"scripts/s3proxy.sh start failed:\n{started.stderr}"
        return self

    def stop(self) -> None:
        self._script("stop")

    def put_folder(self, source: Path, key_prefix: str) -> str:
        """Objects from a local folder: the filesystem backend serves the files below the bucket's folder
        as its objects (read back through the S3 API by the run, like any other object)."""
        shutil.copytree(source, self.bucket_folder / key_prefix)
        return f"s3a://{BUCKET}/{key_prefix}"


def store_settings(server_endpoint: str, warehouse: str, metastore_dir: Path, spark_conf: str = "") -> str:
    """conf/s3.toml's settings for one run: this server, this warehouse, a small machine's Spark, and
    `spark_conf`: more lines of [spark.conf]."""
    return f"""\
[storage]
warehouse_dir = {json.dumps(warehouse)}
metastore_dir = {json.dumps(str(metastore_dir))}

[storage.s3]
endpoint = {json.dumps(server_endpoint)}
region = "us-east-1"
path_style_access = true
access_key_env = "{ACCESS_KEY_ENV}"
secret_key_env = "{SECRET_KEY_ENV}"

[spark.conf]
{toml_lines()}"spark.hadoop.fs.s3a.connection.establish.timeout" = "15s"
"spark.hadoop.fs.s3a.connection.request.timeout" = "30s"
"spark.hadoop.fs.s3a.attempts.maximum" = "2"
"spark.hadoop.fs.s3a.retry.limit" = "2"
"spark.hadoop.fs.s3a.retry.interval" = "500ms"
{spark_conf}
"""


def environment_file(
    path: Path, server_endpoint: str, warehouse: str, metastore_dir: Path, segments: str, spark_conf: str = ""
) -> Path:
    """A nightly's environment: the store's settings, the sample's segments in the bucket and its end offsets."""
    path.write_text(f"""\
{store_settings(server_endpoint, warehouse, metastore_dir, spark_conf)}
[input]
cluster = "sample"
segment_paths = [{json.dumps(segments)}]

[end_offsets]
files = [{json.dumps(str(SAMPLE))}]
""")
    return path


def capture_environment_file(
    path: Path, server_endpoint: str, warehouse: str, metastore_dir: Path, cluster: str, capture: dict
) -> Path:
    """A live capture's environment: the store's settings and `capture`, the [capture] table (whose
    checkpoint_dir left out puts the checkpoint in the warehouse, so in the bucket)."""
    path.write_text(f"""\
{store_settings(server_endpoint, warehouse, metastore_dir)}
[input]
cluster = {json.dumps(cluster)}
segment_paths = []

[capture]
{toml_lines(capture)}""")
    return path


@dataclass
class Run:
    """A `spark-submit.sh` process started in a process group of its own; its output in `log`."""

    log: Path
    popen: subprocess.Popen
    started: float
    # When the process ended, noted by a thread waiting on it: finish() may be called long after (the
    # tests collect a round's results once its slowest run is done), and a run's time is its own.
    ended: float | None = None
    waiter: threading.Thread | None = None

    @classmethod
    def start(cls, job: str, conf: Path, log: Path, credentials: dict[str, str], *job_args: str) -> Run:
        command = [str(REPO_ROOT / "spark-submit.sh"), job, "--conf", str(conf), *job_args]
        with open(log, "wb") as output:
            popen = subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, **credentials},
                cwd=REPO_ROOT,
                start_new_session=True,
            )
        run = cls(log, popen, time.monotonic())
        run.waiter = threading.Thread(target=run._note_exit, daemon=True)
        run.waiter.start()
        return run

    def _note_exit(self) -> None:
        self.popen.wait()
        self.ended = time.monotonic()

    def finish(self, timeout: float = RUN_TIMEOUT_SECONDS) -> tuple[int, str, float]:
        """Exit code, output, and seconds from start to exit."""
        code = self.popen.wait(timeout)
        self.waiter.join()
        return code, self.log.read_text(errors="replace"), self.ended - self.started

    def spark_logs(self) -> str:
        """The run's Spark log (logs/spark-<time>-<pid>.log: spark-submit.sh execs, keeping this pid) and
        the traceback file a failed run names."""
        files = [*(REPO_ROOT / "logs").glob(f"spark-*-{self.popen.pid}.log")]
        run_ids = re.findall(r"started: run (\S+)", self.log.read_text(errors="replace"))
        files += [REPO_ROOT / "logs" / f"{run_id}.log" for run_id in run_ids]
        return "\n".join(path.read_text(errors="replace") for path in files if path.is_file())
