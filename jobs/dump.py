"""A better kafka-dump-log: one JSON object per `__consumer_offsets` or `__share_group_state` data record.
No Spark, no JVM.

    python -m jobs.dump PATH...        (segment files or directories holding them)

Every line has `partition` (from the `__consumer_offsets-N` directory name, else null), `offset`,
`timestamp` (ms), `record_type`, `record_type_name`, `key` and either `value` (null for a tombstone)
with `value_version`, or `error`. Transactional records carry `txn_state` (committed, aborted or
pending). Field names are Kafka's schema names in snake_case; bytes are base64 and topic ids are
Kafka's base64 Uuid form, as Kafka's own JSON tools print them. A record of a `__share_group_state-N`
directory is decoded as a share-state record and its line says `"topic": "__share_group_state"`.

Unlike DumpLogSegments, a damaged batch does not end the dump: its bytes (up to the next batch whose
checksum holds, when its length cannot be trusted) are one line whose `error` says what was wrong and
where, and every record after them is printed as usual.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator, Sequence

from jobs.segment_files import read_paths
from schemas.share_state_records import SHARE_GROUP_STATE_TOPIC
from transforms.decoder.coordinator_records import decode_record
from transforms.decoder.decode_rows import to_jsonable
from transforms.decoder.record_batches import LogRecord, topic_from_path


def dump_line(record: LogRecord) -> dict:
    line: dict = {"partition": record.partition, "offset": record.offset, "timestamp": record.timestamp_ms}
    if record.error is not None:
        line.update(record_type=None, record_type_name=None, key=None, error=record.error)
        return line
    topic = topic_from_path(record.source_file) if record.source_file else None
    if topic == SHARE_GROUP_STATE_TOPIC:
        line["topic"] = topic
    decoded = decode_record(record.key, record.value, topic)
    line.update(record_type=decoded.record_type, record_type_name=decoded.record_type_name, key=decoded.key)
    if decoded.error is not None:
        line["error"] = decoded.error
    else:
        line["value"] = to_jsonable(decoded.value)
        if decoded.value is not None:
            line["value_version"] = decoded.value_version
    if record.is_transactional:
        line["txn_state"] = record.txn_state
    return line


def dump_lines(paths: Sequence[str]) -> Iterator[dict]:
    for record in read_paths(paths):
        yield dump_line(record)


def write_lines(lines: Iterable[dict], out) -> int:
    errors = 0
    for line in lines:
        errors += "error" in line
        out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
        out.write("\n")
    return errors


def main(argv: Sequence[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(
        prog="python -m jobs.dump", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    arguments.add_argument("paths", nargs="+", help="segment files (*.log) or directories")
    arguments.add_argument(
        "--fail-on-error", action="store_true", help="exit 1 if any record could not be read or decoded"
    )
    args = arguments.parse_args(argv)
    try:
        errors = write_lines(dump_lines(args.paths), sys.stdout)
    except BrokenPipeError:  # `| head` is a normal way to use a dump
        return 0
    except FileNotFoundError as error:
        print(f"jobs.dump: {error}", file=sys.stderr)
        return 2
    if errors:
        print(f"jobs.dump: {errors} record(s) could not be read or decoded (see their 'error')", file=sys.stderr)
    return 1 if errors and args.fail_on_error else 0


if __name__ == "__main__":
    sys.exit(main())
