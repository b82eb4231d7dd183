"""Reading Kafka's own decode (DumpLogSegments --offsets-decoder, Kafka 3.8+ JSON form) back into
records, and checking what a scenario expected by construction against the group records Kafka decoded.

This is lab tooling for the captures (a readable `group_history` in scenario.json and a self-check of
each run), not groupscope's decoder.
"""

from __future__ import annotations

import json
import re

_DUMPING = re.compile(r"^Dumping (?P<path>.+)$")
_PARTITION_DIRECTORY = re.compile(r"(?:__consumer_offsets|__share_group_state)-(?P<partition>\d+)/")
_BATCH = re.compile(r"^baseOffset: \d+ .* isTransactional: (?P<txn>\w+) isControl: (?P<control>\w+) ")
_LEGACY_BATCH = re.compile(r"^offset: \d+ ")  # magic 0/1: no producer, never transactional
_RECORD = re.compile(r"^\| offset: (?P<offset>\d+) ")
_CREATE_TIME = re.compile(r"^\| offset: \d+ CreateTime: (?P<at>-?\d+) ")
_PRODUCER = re.compile(r" producerId: (?P<pid>-?\d+) ")


def parse_dump(text: str) -> list[dict]:
    """One dict per record line of DumpLogSegments' output, in its order: `file` (the path after
    "Dumping"), `partition` (of its `__consumer_offsets-N` or `__share_group_state-N` directory, else
    None), `offset`, `at_ms` (CreateTime, else None), the batch's `producer_id` and `is_transactional`,
    then one of: `marker` (COMMIT/ABORT) for a control record; `type`, `key`, `version`, `value` for a
    record Kafka decoded, `key` and `value` being Kafka's `data` exactly as printed (its lowerCamelCase
    names, bytes in base64; `version` and `value` None for a tombstone); `kafka_error` (the whole line)
    for one it printed no key for.

    The one reader of this text: the lab's summaries and the oracle tests (tests/kafka_oracle.py) both
    use it, so nothing Kafka prints in a key or payload is dropped or rewritten here."""
    decoder = json.JSONDecoder()
    records: list[dict] = []
    path, partition, batch = None, None, {}
    for line in text.splitlines():
        if match := _DUMPING.match(line):
            path = match["path"]
            directory = _PARTITION_DIRECTORY.search(path)
            partition = int(directory["partition"]) if directory else None
        elif match := _BATCH.match(line):
            producer = _PRODUCER.search(line)
            batch = {"is_transactional": match["txn"] == "true", "producer_id": int(producer["pid"])}
        elif _LEGACY_BATCH.match(line):
            batch = {"is_transactional": False, "producer_id": None}
        elif match := _RECORD.match(line):
            created = _CREATE_TIME.match(line)
            entry = {
                "file": path,
                "partition": partition,
                "offset": int(match["offset"]),
                "at_ms": int(created["at"]) if created else None,
                **batch,
            }
            key_at = line.find(" key: ")
            if " endTxnMarker: " in line:
                entry["marker"] = line.split(" endTxnMarker: ", 1)[1].split()[0]
            elif key_at < 0:
                entry["kafka_error"] = line
            else:
                # raw_decode: the key's JSON ends where its braces close, whatever text its strings hold
                key, end = decoder.raw_decode(line, key_at + len(" key: "))
                payload = line[end:].removeprefix(" payload: ")
                entry |= {"type": int(key["type"]), "key": key["data"]}
                if payload == "<DELETE>":
                    entry |= {"version": None, "value": None}
                else:
                    value = json.loads(payload)
                    entry |= {"version": int(value["version"]), "value": value["data"]}
            records.append(entry)
    return records


def group_history(dump_text: str) -> dict[str, list[dict]]:
    """Per group, the classic group records (type 2) and KIP-848 group epochs (type 3), in log order."""
    history: dict[str, list[dict]] = {}
    for record in parse_dump(dump_text):
        kind = record.get("type")
        if kind == 2:
            group, value = record["key"]["group"], record["value"]
            entry = {"offset": record["offset"], "at_ms": record["at_ms"], "type": 2}
            if value is None:
                entry["tombstone"] = True
            else:
                entry |= {
                    "generation": value["generation"],
                    "protocol_type": value["protocolType"],
                    "protocol": value["protocol"],
                    "members": sorted(m["groupInstanceId"] or m["clientId"] for m in value["members"]),
                    "member_ids": sorted(m["memberId"] for m in value["members"]),
                }
        elif kind == 3:
            group, value = record["key"]["groupId"], record["value"]
            entry = {"offset": record["offset"], "at_ms": record["at_ms"], "type": 3}
            entry |= {"tombstone": True} if value is None else {"epoch": value["epoch"]}
        else:
            continue
        history.setdefault(group, []).append(entry)
    return history


def check_expectations(expected: list[dict], history: dict[str, list[dict]]) -> list[dict]:
    """Each expectation with what the log shows. Facts understood: `generation` (+ `members`, a count),
    `replaced_instance` (two records of that generation with different member ids), `epoch` (type 3),
    `deleted` (a group tombstone)."""
    checks = []
    for expectation in expected:
        records = history.get(expectation["group"], [])
        values = [entry for entry in records if not entry.get("tombstone")]
        ok = True
        if "generation" in expectation:
            same = [entry for entry in values if entry.get("generation") == expectation["generation"]]
            if "members" in expectation:
                same = [entry for entry in same if len(entry["members"]) == expectation["members"]]
            ok &= bool(same)
            if "replaced_instance" in expectation:
                ok &= len({tuple(entry["member_ids"]) for entry in same}) >= 2
        if "epoch" in expectation:
            ok &= any(entry.get("epoch") == expectation["epoch"] for entry in values)
        if expectation.get("deleted"):
            ok &= bool(records) and bool(records[-1].get("tombstone"))
        checks.append({**expectation, "ok": ok})
    return checks


def summarize(dump_text: str) -> dict:
    """Counts for a capture: records per "type vVersion" ("type tombstone" for null values), control
    markers, transactional data batches' record count, and the groups seen."""
    counts: dict[str, int] = {}
    groups: set[str] = set()
    transactional = 0
    for record in parse_dump(dump_text):
        if "marker" in record:
            label = f"marker {record['marker']}"
        else:
            label = f"type {record['type']} " + ("tombstone" if record["value"] is None else f"v{record['version']}")
            key = record["key"]
            groups.add(key.get("group", key.get("groupId")))
            transactional += record["is_transactional"]
        counts[label] = counts.get(label, 0) + 1

    def order(label: str) -> tuple:
        kind, what, *rest = label.split()
        return (kind != "type", int(what) if kind == "type" else 0, what, rest)

    ordered = {label: counts[label] for label in sorted(counts, key=order)}
    return {"records": ordered, "transactional_records": transactional, "groups": sorted(groups)}


def main(argv: list[str] | None = None) -> int:
    """python -m lab.dump CAPTURE_DIR...: a summary of each capture's dump-offsets.txt (and of its
    dump-share-state.txt, if it has one)."""
    import sys
    from pathlib import Path

    for directory in argv if argv is not None else sys.argv[1:]:
        summary = summarize((Path(directory) / "dump-offsets.txt").read_text())
        records = ", ".join(f"{label}: {count}" for label, count in summary["records"].items())
        print(f"{directory}\n  {records}\n  transactional records: {summary['transactional_records']}")
        print(f"  groups: {', '.join(summary['groups'])}")
        share_state = Path(directory) / "dump-share-state.txt"
        if share_state.exists():  # types 0 and 1 there are ShareSnapshot and ShareUpdate
            counts = summarize(share_state.read_text())["records"]
            print("  __share_group_state: " + ", ".join(f"{label}: {count}" for label, count in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
