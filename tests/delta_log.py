"""What one commit of a local Delta table did to its files, read from the table's log."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileChanges:
    written: dict[str, int]  # new data files: path -> rows
    marked: set[str]  # files kept, their deleted rows marked in a deletion vector
    rewritten: set[str]  # files removed whole (their kept rows, if any, written again elsewhere)


def file_changes(spark, table: str, version: int) -> FileChanges:
    location = spark.sql(f"DESCRIBE DETAIL {table}").first()["location"].removeprefix("file:")
    commit = Path(location) / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    adds = [action["add"] for action in actions if "add" in action]
    removed = {action["remove"]["path"] for action in actions if "remove" in action}
    marked = {add["path"] for add in adds if add.get("deletionVector")}
    written = {add["path"]: json.loads(add["stats"])["numRecords"] for add in adds if add["path"] not in removed}
    return FileChanges(written, marked & removed, removed - marked)
