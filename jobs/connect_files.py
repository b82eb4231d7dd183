"""The files a job touches itself, beside the tables, when its session is a Spark Connect one (no JVM in the
job's process, so no Hadoop FileSystem): the run lock, and what a killed run left where a table is created.

Both go through this process's own filesystem, at the paths the server uses. That holds when the job and the
server share it: the same machine (scripts/connect.sh) or a shared mount. A warehouse on an object store is
refused with Spark Connect for that reason (jobs/connect.py). Creating the lock with O_CREAT | O_EXCL is atomic
on local disks and NFS, as Hadoop's create-without-overwrite is for the classic path.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import SparkSession

from jobs.locks import RunLock


def local_path(location: str) -> Path:
    """A local path or file: URI (as the catalog writes locations) -> the path; other schemes are refused."""
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"{location}: only local paths are reached from a Spark Connect client")
    return Path(unquote(parsed.path) if parsed.scheme else location)


class _LockPath:
    """The few Hadoop Path calls RunLock makes, for a local file."""

    def __init__(self, path: str) -> None:
        self.file = local_path(path)

    def toString(self) -> str:
        return str(self.file)


class _LocalFileSystem:
    """The one Hadoop FileSystem call RunLock makes itself (the others are the methods overridden below)."""

    @staticmethod
    def delete(path: _LockPath, recursive: bool) -> bool:
        try:
            path.file.unlink()
        except FileNotFoundError:
            return False
        return True


class LocalRunLock(RunLock):
    """RunLock (same file, same rules, same messages) through this process's filesystem."""

    def _open_store(self, spark: SparkSession, path: str):
        return _LockPath(path), _LocalFileSystem()

    def _create_file(self, body: bytes) -> bool:
        self._path.file.parent.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(self._path.file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(body)
        return True

    def _read_file(self) -> tuple[bytes, int] | None:
        try:
            with open(self._path.file, "rb") as handle:
                return handle.read(), os.fstat(handle.fileno()).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return None


def committed_location(spark: SparkSession, name: str, is_version_file) -> str | None:
    """jobs.tables._committed_location through this process's filesystem: a committed table's location to
    register, or None (after removing the files of a run killed before Delta's first commit)."""
    database, table = name.split(".", 1)
    location = f"{spark.catalog.getDatabase(database).locationUri.rstrip('/')}/{table}"
    directory = local_path(location)
    if not directory.exists():
        return None
    log = directory / "_delta_log"
    if log.is_dir() and any(is_version_file(entry.name) for entry in log.iterdir()):
        print(f"{name}: registering the committed table found at {location}", file=sys.stderr, flush=True)
        return location
    print(f"{name}: removing the uncommitted files a killed run left at {location}", file=sys.stderr, flush=True)
    shutil.rmtree(directory)
    return None
