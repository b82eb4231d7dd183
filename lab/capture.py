"""Make the lab captures: for each Kafka line and scenario, a fresh broker, the scenario, and what Kafka
itself says about the result.

    python -m lab.capture [--version 4|3.9|all] [--scenario NAME|all] [--out tests/captures]

Each capture `<out>/kafka-<version>/<scenario>/` holds:
  segments/__consumer_offsets-N/<base offset>.log   the broker's own segment files (non-empty partitions)
  dump-offsets.txt          DumpLogSegments --offsets-decoder over those files (Kafka's decode)
  describe.txt              kafka-consumer-groups --describe --all-groups
  describe-members.txt      ... --members --verbose
  describe-state.txt        ... --state
  segments-share-state/__share_group_state-N/<base offset>.log, dump-share-state.txt
                            the share coordinator's log and DumpLogSegments --share-group-state-decoder
                            over it, when the scenario made share groups
  describe-share*.txt       what a scenario's own `describe(broker)` adds (kafka-share-groups)
  end_offsets.json          {"observed_at_ms": ..., "offsets": {topic: {partition: end offset}}, "series":
                            [{"observed_at_ms", "answered_at_ms", "offsets"}, ...]}: the last snapshot,
                            taken just before the descriptions, and the ones taken every second or so
                            in the background throughout the scenario
  record_timestamps.json    {topic: {partition: [[offset, timestamp_ms], ...]}}: every record of those
                            topics, read from the topics (a deleted topic just before its deletion)
  scenario.json             the ground truth: driver and member events, expectations, and a check of
                            the expected generations against the group records Kafka decoded
Members still running at the end are described live, then the broker is stopped cleanly (segments
flushed) and only then are the members killed, so the segments end where the description was taken.
A capture replaces the previous one of the same scenario.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from lab.broker import KAFKA_VERSIONS, REPO_ROOT, Broker
from lab.driver import ScenarioLog
from lab.dump import check_expectations, group_history
from lab.scenarios import SCENARIO_MODULES, scenario
from lab.snapshots import EndOffsetSeries, record_timestamps

DEFAULT_OUT = REPO_ROOT / "tests" / "captures"
WORK_ROOT = REPO_ROOT / ".lab" / "capture"
SHARE_STATE_TOPIC = "__share_group_state"


def capture(version: str, name: str, out: Path, work_root: Path = WORK_ROOT) -> Path:
    module = scenario(name)
    started = time.monotonic()
    workdir = work_root / f"kafka-{version}" / name
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    settings = getattr(module, "BROKER_SETTINGS", {}).get(version, {})
    broker = Broker(version, workdir / "broker", settings=settings)
    record = ScenarioLog(name, broker.kafka_version, workdir)
    broker.start()
    series = EndOffsetSeries(broker.bootstrap_servers, lambda: frozenset(record.topics))
    try:
        series.start()
        try:
            module.run(broker, record)
        finally:
            snapshots = series.stop()
        # The last snapshot is taken on its own, just before the descriptions, so the tests can compare
        # it with the end offsets kafka-consumer-groups --describe printed.
        end_offsets = {"observed_at_ms": int(time.time() * 1000), "offsets": broker.end_offsets(sorted(record.topics))}
        describe = {
            "describe.txt": broker.describe_groups(),
            "describe-members.txt": broker.describe_members(),
            "describe-state.txt": broker.describe_state(),
        }
        if hasattr(module, "describe"):
            describe |= module.describe(broker)
        timestamps = record.deleted_topic_records | record_timestamps(broker.bootstrap_servers, record.topics)
    finally:
        try:
            broker.stop()
        finally:
            record.close()
    staged = workdir / "out"
    copied = copy_segments(broker.offsets_segments(), staged / "segments")
    dump = broker.dump_offsets(copied)
    (staged / "dump-offsets.txt").write_text(dump)
    # Kept apart from segments/: that directory is what groupscope reads as __consumer_offsets.
    share_state = copy_segments(broker.offsets_segments(SHARE_STATE_TOPIC), staged / "segments-share-state")
    if share_state:
        (staged / "dump-share-state.txt").write_text(broker.dump_share_state(share_state))
    for file_name, text in describe.items():
        (staged / file_name).write_text(text)
    (staged / "end_offsets.json").write_text(end_offsets_json(end_offsets, snapshots))
    (staged / "record_timestamps.json").write_text(record_timestamps_json(timestamps))
    truth = record.as_json()
    truth["group_history"] = group_history(dump)
    truth["checks"] = check_expectations(truth["expected"], truth["group_history"])
    (staged / "scenario.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False) + "\n")
    target = out / f"kafka-{broker.kafka_version}" / name
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(staged, target)
    print(f"  {len(snapshots)} end-offset snapshots ({series.failed} failed polls)", flush=True)
    failed = [check for check in truth["checks"] if not check["ok"]]
    size_kb = sum(path.stat().st_size for path in target.rglob("*") if path.is_file()) / 1024
    print(
        f"captured kafka-{broker.kafka_version}/{name}: {len(copied) + len(share_state)} segment file(s), "
        f"{size_kb:.0f} KB, "
        f"{time.monotonic() - started:.0f}s, {len(truth['checks']) - len(failed)}/{len(truth['checks'])} "
        "expectations seen in the log",
        flush=True,
    )
    for check in failed:
        print(f"  NOT SEEN: {check}", flush=True)
    return target


def copy_segments(segments: list[Path], directory: Path) -> list[Path]:
    """Copies each segment to directory/<its partition directory>/<its name>; returns the copies."""
    copies = []
    for segment in segments:
        destination = directory / segment.parent.name / segment.name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(segment, destination)
        copies.append(destination)
    return sorted(copies)  # path order, as DumpLogSegments was always given them


def end_offsets_json(final: dict, series: list[dict]) -> str:
    """The final snapshot at the top (what older captures held alone), the series under "series", one
    snapshot a line so the file stays readable."""
    lines = ",\n".join(f"    {json.dumps(snapshot, separators=(',', ':'))}" for snapshot in series)
    return (
        "{\n"
        f'  "observed_at_ms": {final["observed_at_ms"]},\n'
        f'  "offsets": {json.dumps(final["offsets"], sort_keys=True)},\n'
        f'  "series": [\n{lines}\n  ]\n'
        "}\n"
    )


def record_timestamps_json(timestamps: dict[str, dict[str, list[list[int]]]]) -> str:
    """{topic: {partition: [[offset, timestamp_ms], ...]}}, one partition a line."""
    parts = [
        f"  {json.dumps(topic)}: {{\n"
        + ",\n".join(
            f"    {json.dumps(partition)}: {json.dumps(records, separators=(',', ':'))}"
            for partition, records in sorted(partitions.items(), key=lambda item: int(item[0]))
        )
        + "\n  }"
        for topic, partitions in sorted(timestamps.items())
    ]
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="all", choices=(*KAFKA_VERSIONS, "all"))
    parser.add_argument("--scenario", default="all", choices=(*SCENARIO_MODULES, "all"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    versions = list(KAFKA_VERSIONS) if args.version == "all" else [args.version]
    names = list(SCENARIO_MODULES) if args.scenario == "all" else [args.scenario]
    started = time.monotonic()
    for version in versions:
        for name in names:
            if version in scenario(name).VERSIONS:
                capture(version, name, args.out)
            elif args.scenario != "all":
                print(f"{name} does not run on Kafka {KAFKA_VERSIONS[version]}; skipped", flush=True)
    print(f"done in {time.monotonic() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
