"""Kafka's own decoder as the oracle: run DumpLogSegments --offsets-decoder and compare structures.

Kafka (3.8+) prints each record's key and payload as JSON with lowerCamelCase field names, bytes in
base64 and `type`/`version` as strings. We parse that, convert names to snake_case and compare with
what `jobs.dump` decodes from the same files: parsed structures, never text.
"""

from __future__ import annotations

import functools
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from jobs.segment_files import read_paths
from lab.broker import JARS, Broker, BrokerError, dump_log_segments_class
from lab.dump import parse_dump
from transforms.decoder.coordinator_records import decode_record
from transforms.decoder.decode_rows import to_jsonable

# Fields only groupscope adds next to what Kafka prints (the decoded assignor user data, beside the
# `user_data` bytes Kafka prints; the decoded Connect payloads, beside the `subscription`/`assignment`
# bytes Kafka prints), and the payload `version` of a decoded ConsumerProtocol subscription/assignment
# (Kafka reads it and prints only the fields). Nothing Kafka prints is dropped or rewritten: a field
# Kafka prints and we do not, or print differently, is a mismatch.
GROUPSCOPE_EXTRAS = {"assignor_user_data", "connect_subscription", "connect_assignment"}

_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def run_dump_log_segments(files: Sequence[Path], version: str = "4") -> str:
    jars = JARS[version]
    if not any(jars.glob("*.jar")):
        raise AssertionError(f"Kafka {version} jars missing in {jars}: run scripts/bootstrap.sh lab")
    command = [
        "java",
        "-cp",
        f"{jars}/*",
        dump_log_segments_class(version),
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


def kafka_by_position(dump_text: str) -> dict[tuple[str, int], dict]:
    """Kafka's decode of each data record, by (resolved file path, offset): {"record_type", "key",
    "value_version", "value"} with Kafka's field names in snake_case, or {"kafka_error": line}.
    Control records (transaction markers) are left out: groupscope decodes no value for them."""
    resolved = functools.cache(lambda path: str(Path(path).resolve()))
    records: dict[tuple[str, int], dict] = {}
    for record in parse_dump(dump_text):
        if "marker" in record:
            continue
        position = (resolved(record["file"]), record["offset"])
        if "kafka_error" in record:
            records[position] = {"kafka_error": record["kafka_error"]}
            continue
        records[position] = {
            "record_type": record["type"],
            "key": snake_case(record["key"]),
            "value": snake_case(record["value"]),
            "value_version": record["version"],
        }
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


def ours_by_position(files: list[Path]) -> dict[tuple[str, int], dict]:
    decoded = {}
    for record in read_paths([str(file) for file in files]):
        assert record.error is None, record.error
        result = decode_record(record.key, record.value)
        assert result.error is None, f"{record.source_file}@{record.offset}: {result.error}"
        value = strip_payload_versions(without_extras(to_jsonable(result.value)))
        decoded[(str(Path(record.source_file).resolve()), record.offset)] = {
            "record_type": result.record_type,
            "key": result.key,
            "value": value,
            "value_version": result.value_version,
        }
    return decoded


def parse_describe(text: str) -> list[dict]:
    """Rows of kafka-consumer-groups' tables as dicts keyed by the column headers."""
    rows, header = [], None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "GROUP":
            header = fields
        elif header and len(fields) == len(header):
            rows.append(dict(zip(header, fields, strict=True)))
    return rows


def dump_records(broker: Broker, partitions, deadline_s: float) -> list[dict]:
    """Kafka's own reading of a live broker's __consumer_offsets partitions (retried while the cleaner
    swaps files)."""
    deadline = time.monotonic() + deadline_s
    while True:
        files = [path for path in broker.offsets_segments() if int(path.parent.name.rsplit("-", 1)[1]) in partitions]
        try:
            return parse_dump(broker.dump_offsets(files))
        except BrokerError:
            if time.monotonic() > deadline:
                raise


def kafka_classification(records: list[dict], ends_before: dict[int, int], ends_after: dict[int, int]) -> dict:
    """Per kind, the offsets of [ends_before, ends_after) as DumpLogSegments shows them."""
    kinds = {"removed": 0, "markers": 0, "aborted": 0, "visible": 0}
    for partition, end in ends_after.items():
        in_log = [record for record in records if record["partition"] == partition]
        span = [record for record in in_log if ends_before[partition] <= record["offset"] < end]
        kinds["removed"] += end - ends_before[partition] - len(span)
        for record in span:
            if "marker" in record:
                kinds["markers"] += 1
            elif _is_aborted(record, in_log):
                kinds["aborted"] += 1
            else:
                kinds["visible"] += 1
    return kinds


def _is_aborted(record: dict, in_log: list[dict]) -> bool:
    """A transactional record whose partition's next marker of the same producer is an ABORT."""
    return record["is_transactional"] and _ends_in_abort(record, in_log)


def _ends_in_abort(record: dict, in_log: list[dict]) -> bool:
    markers = [
        other
        for other in in_log
        if "marker" in other
        and (other["partition"], other["producer_id"]) == (record["partition"], record["producer_id"])
        and other["offset"] > record["offset"]
    ]
    return min(markers, key=lambda marker: marker["offset"])["marker"] == "ABORT"


def read_committed_offsets(records: list[dict]) -> list[tuple[int, int]]:
    """(partition, offset) of every record a read_committed reader gets: no markers, no aborted records."""
    return [
        (record["partition"], record["offset"])
        for record in records
        if "marker" not in record and not _is_aborted(record, records)
    ]
