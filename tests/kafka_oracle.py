"""Kafka's own decoder as the oracle: run DumpLogSegments --offsets-decoder and compare structures.

Kafka (3.8+) prints each record's key and payload as JSON with lowerCamelCase field names, bytes in
base64 and `type`/`version` as strings. We parse that, convert names to snake_case and compare with
what `jobs.dump` decodes from the same files: parsed structures, never text.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
KAFKA_JARS = {"4": REPO_ROOT / "jvm" / "kafka-4" / "jars", "3.9": REPO_ROOT / "jvm" / "kafka-3.9" / "jars"}
DUMP_LOG_SEGMENTS = "kafka.tools.DumpLogSegments"

# Fields only groupscope adds next to what Kafka prints (the decoded assignor user data, beside the
# `user_data` bytes Kafka prints; the decoded Connect payloads, beside the `subscription`/`assignment`
# bytes Kafka prints), and the payload `version` of a decoded ConsumerProtocol subscription/assignment
# (Kafka reads it and prints only the fields). Nothing Kafka prints is dropped or rewritten: a field
# Kafka prints and we do not, or print differently, is a mismatch.
GROUPSCOPE_EXTRAS = {"assignor_user_data", "connect_subscription", "connect_assignment"}

_RECORD_LINE = re.compile(r"^\| offset: (?P<offset>\d+) ")
_DUMPING = re.compile(r"^Dumping (?P<path>.+)$")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def run_dump_log_segments(files: Sequence[Path], version: str = "4") -> str:
    jars = KAFKA_JARS[version]
    if not any(jars.glob("*.jar")):
        raise AssertionError(f"Kafka {version} jars missing in {jars}: run scripts/bootstrap.sh")
    command = [
        "java",
        "-cp",
        f"{jars}/*",
        DUMP_LOG_SEGMENTS,
        "--offsets-decoder",
        "--files",
        ",".join(str(file) for file in files),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
    return result.stdout


def snake_case(value: object) -> object:
    if isinstance(value, dict):
        return {_CAMEL.sub(r"_\1", key).lower(): snake_case(item) for key, item in value.items()}
    if isinstance(value, list):
        return [snake_case(item) for item in value]
    return value


def parse_dump(text: str) -> dict[tuple[str, int], dict]:
    """(file path, offset) -> {"record_type", "key", "value_version", "value"} or {"kafka_error": line}."""
    decoder = json.JSONDecoder()
    records: dict[tuple[str, int], dict] = {}
    current_file = None
    for line in text.splitlines():
        if match := _DUMPING.match(line):
            current_file = str(Path(match["path"]).resolve())
            continue
        match = _RECORD_LINE.match(line)
        if not match or "endTxnMarker" in line:
            continue
        offset = int(match["offset"])
        key_at = line.find(" key: ")
        if key_at < 0:
            records[(current_file, offset)] = {"kafka_error": line}
            continue
        key, end = decoder.raw_decode(line, key_at + len(" key: "))
        payload_text = line[end:].removeprefix(" payload: ")
        entry = {"record_type": int(key["type"]), "key": snake_case(key["data"])}
        if payload_text == "<DELETE>":
            entry.update(value=None, value_version=None)
        else:
            payload = json.loads(payload_text)
            entry.update(value=snake_case(payload["data"]), value_version=int(payload["version"]))
        records[(current_file, offset)] = entry
    return records


def without_extras(value: object) -> object:
    """Our decoded value in the shape Kafka prints: no groupscope extras, no payload version."""
    if isinstance(value, dict):
        return {key: without_extras(item) for key, item in value.items() if key not in GROUPSCOPE_EXTRAS}
    if isinstance(value, list):
        return [without_extras(item) for item in value]
    return value


def strip_payload_versions(value: dict | None) -> dict | None:
    if not value or "members" not in value:
        return value
    for member in value["members"]:
        for payload in ("subscription", "assignment"):
            if isinstance(member.get(payload), dict):
                member[payload].pop("version", None)
    return value
