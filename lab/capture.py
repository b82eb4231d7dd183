"""Make the lab captures: for each Kafka version and scenario, a fresh broker, the scenario, and what
Kafka itself says about the result.

    python -m lab.capture [--version 4|3.9|all] [--scenario NAME|all] [--out tests/captures]

Each capture directory `<out>/kafka-<version>/<scenario>/` holds:
  segments/__consumer_offsets-N/*.log   the broker's own segment files (non-empty partitions)
  dump-offsets.txt                      DumpLogSegments --offsets-decoder over those files
  describe.txt, describe-members.txt    kafka-consumer-groups --describe (--members --verbose)
  end_offsets.json                      end offsets of the scenario's topics when described
  scenario.json                         the ground truth: every event the driver caused
Members are still alive when the broker is described and stopped, so the segments end where the
description was taken.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from lab.broker import KAFKA_VERSIONS, REPO_ROOT, Broker, dump_offsets
from lab.scenarios import SCENARIOS, Lab

DEFAULT_OUT = REPO_ROOT / "tests" / "captures"


def capture(version: str, scenario: str, out: Path) -> Path:
    run, versions = SCENARIOS[scenario]
    if version not in versions:
        raise ValueError(f"scenario {scenario} does not run on Kafka {version}")
    target = out / f"kafka-{KAFKA_VERSIONS[version]}" / scenario
    workdir = REPO_ROOT / ".lab" / f"kafka-{version}" / scenario
    shutil.rmtree(workdir, ignore_errors=True)
    started = time.monotonic()
    broker = Broker(version, workdir).start()
    lab = Lab(broker)
    try:
        run(lab)
        end_offsets = {"observed_at_ms": int(time.time() * 1000), "offsets": lab.end_offsets()}
        describe = broker.describe_groups()
        describe_members = broker.consumer_groups_command("--describe", "--all-groups", "--members", "--verbose")
    finally:
        lab.close_clients()
        broker.stop()
        lab.kill_all_members()
    shutil.rmtree(target, ignore_errors=True)
    for segment in broker.offsets_segments():
        destination = target / "segments" / segment.parent.name / segment.name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(segment, destination)
    copied = sorted((target / "segments").rglob("*.log"))
    (target / "dump-offsets.txt").write_text(dump_offsets(copied, version))
    (target / "describe.txt").write_text(describe)
    (target / "describe-members.txt").write_text(describe_members)
    (target / "end_offsets.json").write_text(json.dumps(end_offsets, indent=2, sort_keys=True) + "\n")
    (target / "scenario.json").write_text(
        json.dumps({"scenario": scenario, "kafka_version": KAFKA_VERSIONS[version], "events": lab.events}, indent=2)
        + "\n"
    )
    print(
        f"captured kafka-{KAFKA_VERSIONS[version]}/{scenario}: {len(copied)} segment file(s), "
        f"{time.monotonic() - started:.0f}s",
        flush=True,
    )
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="all", choices=(*KAFKA_VERSIONS, "all"))
    parser.add_argument("--scenario", default="all", choices=(*SCENARIOS, "all"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    versions = list(KAFKA_VERSIONS) if args.version == "all" else [args.version]
    scenarios = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    for version in versions:
        for scenario in scenarios:
            if version in SCENARIOS[scenario][1]:
                capture(version, scenario, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
