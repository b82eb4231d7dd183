"""Finding and reading segment files: the one walker, for every job and `jobs.dump` (no Spark here).

A directory is searched for `__consumer_offsets-N` and `__share_group_state-N` directories (a broker's
log dir holds both); each partition's files are handed to the decoder
(`transforms.decoder.record_batches.read_partition`) as (path, bytes) in log order, one file in memory
at a time. Partitions come out by topic (`__consumer_offsets` first), then in partition number order.

Local paths are read directly; a URI (`file://`, `s3://`, `gs://`, `hdfs://`, `abfs://`) through
pyarrow's filesystems, which take their credentials from the environment (e.g. the AWS default chain),
never from the job's configuration.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path, PurePosixPath

from pyarrow import fs

from transforms.decoder.record_batches import (
    COORDINATOR_TOPICS,
    LogRecord,
    partition_from_path,
    read_partition,
    topic_partition_from_path,
)

PARTITION_DIRECTORY_GLOBS = tuple(f"{topic}-*" for topic in COORDINATOR_TOPICS)
_SEGMENT_NAME = re.compile(r"(\d{20})\.log")


def is_uri(path: str) -> bool:
    return "://" in path


def _local_files(path: Path) -> list[str]:
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {path}")
    if path.is_file():
        return [str(path)]
    partition_dirs = sorted(found for pattern in PARTITION_DIRECTORY_GLOBS for found in path.rglob(pattern))
    roots = [directory for directory in partition_dirs if directory.is_dir()] or [path]
    return [str(file) for root in roots for file in sorted(root.rglob("*.log"))]


def _filesystem(uri: str) -> tuple[fs.FileSystem, str]:
    """pyarrow's filesystem for a URI; Hadoop's s3a:// and s3n:// names are S3's."""
    scheme, rest = uri.split("://", 1)
    return fs.FileSystem.from_uri(("s3" if scheme in ("s3a", "s3n") else scheme) + "://" + rest)


def _uri_files(uri: str) -> list[str]:
    filesystem, base = _filesystem(uri)
    info = filesystem.get_file_info(base)
    if info.type == fs.FileType.NotFound:
        raise FileNotFoundError(f"no such file or directory: {uri}")
    # What precedes the filesystem's own path (scheme://, and host:port for HDFS) is kept on every
    # listed file, so that each task can reopen it from the URI alone.
    prefix = uri[: uri.rfind(base)] if base and base in uri else uri.split("://", 1)[0] + "://"
    if info.type == fs.FileType.File:
        return [uri]
    found = filesystem.get_file_info(fs.FileSelector(base, recursive=True))
    logs = [entry.path for entry in found if entry.type == fs.FileType.File and entry.path.endswith(".log")]
    # Only the coordinator topics' partition directories, if there are any (other topics' logs may sit
    # beside them).
    in_partitions = [log for log in logs if partition_from_path(str(PurePosixPath(log).parent)) is not None]
    return [prefix + log for log in sorted(in_partitions or logs)]


def discover_partitions(paths: Sequence[str | PathLike[str]]) -> list[list[str]]:
    """Segment files grouped by partition directory, each group in base-offset order.

    A directory is searched for `__consumer_offsets-N` and `__share_group_state-N` directories (a
    broker's log dir or a backup), so other topics' logs beside them are skipped; if it holds none,
    every *.log beneath it is taken. Files named explicitly are always taken. Groups come by topic,
    then in partition number order, directories that name no partition last. A path that does not
    exist raises FileNotFoundError.
    """
    by_directory: dict[str, list[str]] = {}
    for path in map(str, paths):
        files = _uri_files(path) if is_uri(path) else _local_files(Path(path))
        for file in files:
            by_directory.setdefault(file.rsplit("/", 1)[0], []).append(file)
    return [
        sorted(set(by_directory[directory]), key=segment_order)
        for directory in sorted(by_directory, key=_directory_order)
    ]


def _directory_order(directory: str) -> tuple:
    found = topic_partition_from_path(directory)
    if found is None:
        return (True, 0, 0, directory)
    return (False, COORDINATOR_TOPICS.index(found[0]), found[1], directory)


def segment_order(path: str) -> tuple:
    """Segment files sort by the base offset in their 20-digit names; other names after them, by path."""
    base_offset = segment_base_offset(path)
    return (0, base_offset, path) if base_offset is not None else (1, 0, path)


def as_source_file(path: str) -> str:
    """How raw_records names a segment file: a local one as `file:/absolute/path`, the form the
    binaryFile reader of earlier versions stored, so that record ids of unreadable bytes stay stable."""
    return path if is_uri(path) else "file:" + os.path.abspath(path)


def segment_base_offset(path: str) -> int | None:
    """The base offset in a segment file's 20-digit name; None for other names."""
    match = _SEGMENT_NAME.fullmatch(path.replace("\\", "/").rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def read_file_range(path: str, start: int, length: int) -> tuple[bytes, int]:
    """Up to `length` bytes of a file from `start`, and the file's size."""
    if not is_uri(path):
        with open(path.removeprefix("file:"), "rb") as file:
            file.seek(start)
            return file.read(length), os.fstat(file.fileno()).st_size
    filesystem, inner = _filesystem(path)
    with filesystem.open_input_file(inner) as file:
        file.seek(start)
        return file.read(length), file.size()


def read_file_bytes(path: str) -> bytes:
    if not is_uri(path):
        return Path(path.removeprefix("file:")).read_bytes()
    filesystem, inner = _filesystem(path)
    with filesystem.open_input_stream(inner) as stream:
        return stream.read()


def read_partition_files(files: Sequence[str], starts: Mapping[str, int] | None = None) -> Iterator[LogRecord]:
    """The records of ONE partition's segment files, in base-offset order, one file in memory at a time;
    a file in `starts` from that batch boundary on."""
    starts = starts or {}
    return read_partition(
        (path, read_file_bytes(path), starts.get(path, 0)) for path in sorted(map(str, files), key=segment_order)
    )


def read_paths(paths: Sequence[str | PathLike[str]]) -> Iterator[LogRecord]:
    for files in discover_partitions(paths):
        yield from read_partition_files(files)
