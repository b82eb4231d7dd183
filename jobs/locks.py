"""One writing run per (database, cluster) at a time: a lock file next to the tables.

The lock is a file created with overwrite disabled through Hadoop's FileSystem, which is atomic on
local disks and HDFS, so it guards runs on different machines too. On S3 (s3a://) it is atomic only
as a conditional put (If-None-Match: *, S3A's `fs.option.create.conditional.overwrite`): each session
on S3 first proves that the store refuses a second create of one object, before its metastore writes
anything, and refuses to run unguarded otherwise (prove_lock_store, jobs/lock_store.py). There the lock
guards the whole database, not one cluster: Delta's S3 log store allows one writing driver per table, and
every cluster's rows share the tables.

A run killed with SIGKILL cannot remove its lock; the next run takes it over when the holder is
provably dead (same host, process gone), older than the configured maximum age, or never written (a
run killed between creating the file and writing it: empty past a minute). A run that finds a lock
not written yet waits, at most that minute, to see which it is, rather than refuse a run for a lock
that nobody may hold.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from jobs.config import Config
from jobs.lock_store import create_if_absent, require_conditional_writes
from jobs.object_store import is_s3

DEFAULT_MAX_AGE_MINUTES = 12 * 60
# A lock file is written within milliseconds of its creation; one still empty or unreadable after this
# long was left by a run killed between the two, and is taken over.
TORN_LOCK_GRACE = timedelta(seconds=60)
TORN_LOCK_RUN_ID = "(starting)"


EXIT_BUSY = 75  # EX_TEMPFAIL: try again later


class RunRefused(SystemExit):
    """Another run holds the lock: this run changed nothing, and its process exits with EXIT_BUSY so a
    scheduler can tell "retry later" from a failure."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_BUSY)
        self.message = message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Holder:
    run_id: str
    job: str
    host: str
    pid: int
    started_at: datetime

    def describe(self) -> str:
        started = f"{self.started_at:%Y-%m-%d %H:%M:%S} UTC"
        return f"{self.job} run {self.run_id} (host {self.host}, pid {self.pid}, started {started})"

    def is_dead(self, now: datetime, max_age: timedelta, this_host: str) -> bool:
        if now - self.started_at > (TORN_LOCK_GRACE if self.run_id == TORN_LOCK_RUN_ID else max_age):
            return True
        if self.host != this_host:  # includes a lock still being written: its host is not known yet
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, owned by someone else
            return False
        return False


def lock_path(config: Config) -> str:
    # Cluster and database names are data: the file name is a digest of them, never the names.
    scope = config.database if is_s3(config.warehouse) else f"{config.database}\0{config.cluster}"
    digest = hashlib.sha256(scope.encode()).hexdigest()[:24]
    return f"{config.warehouse}/_groupscope/locks/{digest}.lock"


def _hadoop_store(spark: SparkSession, path: str):
    """`path` as a Hadoop Path, and its FileSystem with the session's settings."""
    hadoop_path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path, hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def prove_lock_store(spark: SparkSession, config: Config) -> None:
    """On S3, before the session's first metastore call: the store must take a write and refuse a second
    create of one object (jobs/lock_store.py), or the run stops here (UnguardedStore), having written
    nothing. The metastore's CREATE DATABASE is otherwise the first write, and an endpoint that answers HTTP
    but is not S3 (or credentials that may only read) fails there inside Hive, with a Java stack."""
    if not is_s3(config.warehouse):
        return
    lock, fs = _hadoop_store(spark, lock_path(config))
    require_conditional_writes(fs, lock, f"session-{uuid.uuid4().hex[:12]}")


class RunLock:
    def __init__(self, spark: SparkSession, config: Config, run_id: str, job: str) -> None:
        self._path, self._fs = self._open_store(spark, lock_path(config))
        self._config = config
        max_age = config.section("jobs").get("lock_max_age_minutes", DEFAULT_MAX_AGE_MINUTES)
        self._max_age = timedelta(minutes=int(max_age))
        self.holder = Holder(run_id, job, socket.gethostname(), os.getpid(), datetime.now(UTC))
        self.took_over: Holder | None = None
        # A refused run records its refusal in job_runs, except on S3: there that Delta commit would be
        # made without the lock, beside the holder's commits, which S3's log store does not allow.
        self.records_refusals = not is_s3(config.warehouse)

    def _open_store(self, spark: SparkSession, path: str):
        """The lock's Hadoop Path and FileSystem, through the session's JVM (jobs/connect_files.py: without one)."""
        self._io_utils = spark.sparkContext._jvm.org.apache.commons.io.IOUtils
        return _hadoop_store(spark, path)

    def acquire(self) -> None:
        # On S3 the session proved the store's conditional writes when it was built (prove_lock_store).
        if self._create():
            return
        current = self._wait_while_unwritten(self._read())
        if current is None or current.is_dead(datetime.now(UTC), self._max_age, self.holder.host):
            self.took_over = current
            self._fs.delete(self._path, False)
            if self._create():
                return
            current = self._read()
        who = current.describe() if current else "a run that has just finished"
        held = f"cluster {self._config.cluster!r} in database {self._config.database!r}"
        if is_s3(self._config.warehouse):  # one lock per database there (see the module's docstring)
            held = f"database {self._config.database!r} (every cluster: its warehouse is on S3)"
        raise RunRefused(
            f"another groupscope run holds {held}: "
            f"{who}. Nothing was changed; run again when it has finished. If it is dead and this persists, "
            f"delete {self._path.toString()}"
        )

    def _wait_while_unwritten(self, current: Holder | None) -> Holder | None:
        """A lock file not written yet belongs to a run that is just starting (written within
        milliseconds) or to one killed before writing it (never written): polled until it is written or
        its grace has passed."""
        while current is not None and current.run_id == TORN_LOCK_RUN_ID:
            remaining = (current.started_at + TORN_LOCK_GRACE - datetime.now(UTC)).total_seconds()
            if remaining <= 0:
                break
            time.sleep(min(remaining, 1.0))
            current = self._read()
        return current

    def release(self) -> None:
        current = self._read()
        if current is not None and current.run_id == self.holder.run_id:
            self._fs.delete(self._path, False)

    def _create(self) -> bool:
        body = json.dumps(
            {
                "run_id": self.holder.run_id,
                "job": self.holder.job,
                "host": self.holder.host,
                "pid": self.holder.pid,
                "started_at": self.holder.started_at.isoformat(),
                "database": self._config.database,
                "cluster": self._config.cluster,
            }
        ).encode()
        if is_s3(self._path.toString()):
            return create_if_absent(self._fs, self._path, body)
        return self._create_file(body)

    def _create_file(self, body: bytes) -> bool:
        """Creates the lock file holding `body`; False when it exists."""
        try:
            stream = self._fs.create(self._path, False)
        except Py4JJavaError as error:
            if "FileAlreadyExistsException" in str(error.java_exception.getClass().getName()) or self._fs.exists(
                self._path
            ):
                return False
            raise
        try:
            stream.write(bytearray(body))
        finally:
            stream.close()
        return True

    def _read(self) -> Holder | None:
        """The current holder; None when the file is gone. A file still being written (its creator is
        between create and close) is held by a run that is just starting."""
        stored = self._read_file()
        if stored is None:
            return None
        data, modified_ms = stored
        try:
            fields = json.loads(data)
            return Holder(
                fields["run_id"],
                fields["job"],
                fields["host"],
                int(fields["pid"]),
                datetime.fromisoformat(fields["started_at"]),
            )
        except (ValueError, KeyError):
            modified = datetime.fromtimestamp(modified_ms / 1000, UTC)
            return Holder(TORN_LOCK_RUN_ID, "unknown", "unknown", -1, modified)

    def _read_file(self) -> tuple[bytes, int] | None:
        """The lock file's bytes and modification time (epoch ms); None when it is gone."""
        try:
            status = self._fs.getFileStatus(self._path)
            stream = self._fs.open(self._path)
        except Py4JJavaError:
            return None
        try:
            data = bytes(self._io_utils.toByteArray(stream))
        finally:
            stream.close()
        return data, status.getModificationTime()
