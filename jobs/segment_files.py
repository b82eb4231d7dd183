"""Finding and reading segment files on disk, for the jobs (the log format itself is in transforms)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from transforms.record_batches import LogRecord, read_partition_segments

PARTITION_DIRECTORY_GLOB = "__consumer_offsets-*"


def discover_partitions(paths: Sequence[str]) -> list[list[str]]:
    """Segment files grouped by partition directory, each group in base-offset order.

    A directory is searched for `__consumer_offsets-N` directories (a broker's log dir or a backup);
    if it holds none, every *.log beneath it is taken. Files named explicitly are always taken.
    """
    by_directory: dict[str, list[str]] = {}
    for path in map(Path, paths):
        if not path.exists():
            raise FileNotFoundError(f"no such file or directory: {path}")
        if path.is_file():
            files = [path]
        else:
            partition_dirs = sorted(path.rglob(PARTITION_DIRECTORY_GLOB))
            roots = [directory for directory in partition_dirs if directory.is_dir()] or [path]
            files = [file for root in roots for file in sorted(root.rglob("*.log"))]
        for file in files:
            by_directory.setdefault(str(file.parent), []).append(str(file))
    return [sorted(set(files)) for _, files in sorted(by_directory.items())]


def read_paths(paths: Sequence[str]) -> Iterator[LogRecord]:
    for files in discover_partitions(paths):
        yield from read_partition_segments((file, Path(file).read_bytes()) for file in files)
