"""The key/payload fixtures of kafkesc/konsumer_offsets decode to the values that project expects.

Its expected values are Rust `Debug` text (`*.ts_int.fmt`); we parse them and map its field names
onto ours. It renders a null string as "" and null/empty user data as [], so those are normalised.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import PUBLIC_FIXTURES
from transforms.decoder.coordinator_records import decode_record

FIXTURES = PUBLIC_FIXTURES / "kafkesc__konsumer_offsets" / "52fcd348" / "fixtures" / "tests"
_TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<number>-?\d+)|(?P<word>[A-Za-z_]\w*)|(?P<punct>[{}\[\]:,]))'
)

NAMES = {
    "id": "member_id",
    "subscribed_topics": "topics",
    "owned_topic_partitions": "owned_partitions",
    "assigned_topic_partitions": "assigned_partitions",
    "schema_version": "version",
}
NULL_AS_EMPTY = {"group_instance_id", "rack_id", "protocol", "leader"}


def parse_debug(text: str) -> object:
    tokens = [(kind, value) for match in _TOKEN.finditer(text) for kind, value in match.groupdict().items() if value]
    position = 0

    def value() -> object:
        nonlocal position
        kind, token = tokens[position]
        position += 1
        if kind == "string":
            return token[1:-1]
        if kind == "number":
            return int(token)
        if token in ("true", "false"):
            return token == "true"
        if token == "[":
            items = []
            while tokens[position][1] != "]":
                items.append(value())
                if tokens[position][1] == ",":
                    position += 1
            position += 1
            return items
        assert tokens[position][1] == "{", f"expected a struct after {token}"
        position += 1
        fields = {}
        while tokens[position][1] != "}":
            name = tokens[position][1]
            assert tokens[position + 1][1] == ":"
            position += 2
            fields[NAMES.get(name, name)] = value()
            if tokens[position][1] == ",":
                position += 1
        position += 1
        return fields

    return value()


def as_konsumer_offsets_renders(value: object, name: str = "") -> object:
    if isinstance(value, dict):
        return {key: as_konsumer_offsets_renders(item, key) for key, item in value.items()}
    if isinstance(value, list):
        return [as_konsumer_offsets_renders(item) for item in value]
    if value is None and name in NULL_AS_EMPTY:
        return ""
    if name == "user_data" and not value:
        return []
    return value


def fixture_pairs() -> list[Path]:
    return sorted(FIXTURES.glob("*/*.key"))


def test_fixture_set_is_present():
    assert len(fixture_pairs()) == 10


@pytest.mark.parametrize("key_file", fixture_pairs(), ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_decodes_to_the_expected_value(key_file: Path):
    expected = parse_debug(key_file.with_suffix(".ts_int.fmt").read_text())
    decoded = decode_record(key_file.read_bytes(), key_file.with_suffix(".payload").read_bytes())

    assert decoded.error is None
    assert decoded.record_type == expected["message_version"]
    assert decoded.value_version == expected["version"]
    assert decoded.is_tombstone == expected["is_tombstone"]
    ours = as_konsumer_offsets_renders({**decoded.key, **decoded.value})
    for field in (
        "group",
        "topic",
        "partition",
        "offset",
        "leader_epoch",
        "metadata",
        "commit_timestamp",
        "protocol_type",
        "generation",
        "protocol",
        "leader",
        "current_state_timestamp",
    ):
        if field in expected and field in ours:
            assert ours[field] == expected[field], field
    if "expire_timestamp" in expected:  # absent before v1; konsumer_offsets shows the default
        assert ours.get("expire_timestamp", -1) == expected["expire_timestamp"]
    for member, expected_member in zip(ours.get("members", []), expected.get("members", []), strict=True):
        for field in (
            "member_id",
            "group_instance_id",
            "client_id",
            "client_host",
            "rebalance_timeout",
            "session_timeout",
        ):
            assert member[field] == expected_member[field], field
        for payload in ("subscription", "assignment"):
            for field, expected_value in expected_member[payload].items():
                ours_value = member[payload][field] if field in member[payload] else _version_default(field)
                assert ours_value == expected_value, (payload, field)


def _version_default(field: str) -> object:
    """What a payload field is when its version predates it: Kafka's declared defaults."""
    return {"owned_partitions": [], "generation_id": -1, "rack_id": ""}[field]
