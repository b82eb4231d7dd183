"""Where a nightly's driver spends its time, by the groupscope line that ran each Spark action.

    GROUPSCOPE_ACTION_LOG=/tmp/n7.tsv PYTHONPATH=bench/action_hook ./spark-submit.sh nightly ...
    .venv/bin/python -m bench.actions /tmp/n7.tsv [--compare /tmp/n1.tsv] [--top 15]

The log comes from bench/action_hook/sitecustomize.py: one line per top-level action. Each is counted
under its step (the job module in jobs/steps/ that called it) and its call site: the innermost
groupscope frame outside the helpers that only run the action (jobs/tables.py, jobs/watermarks.py),
with its caller. With --compare, a second night's log beside it: a continuing night's costs that a
first night does not have show as call sites with nothing on the other side. Seconds are wall seconds
of the driver waiting for the action, so they add up to the step's time less its planning gaps.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

HELPERS = ("jobs/tables.py", "jobs/watermarks.py")


@dataclass(frozen=True)
class Action:
    seconds: float
    step: str
    site: str


def _step(frames: list[str]) -> str:
    for frame in frames:
        if frame.startswith("steps/") and not frame.startswith("steps/nightly.py"):
            return frame.split("/", 1)[1].split(".py", 1)[0]
    return "(other)"


def _site(frames: list[str]) -> str:
    own = [frame for frame in frames if not frame.startswith(HELPERS)] or frames or ["(no groupscope frame)"]
    return " < ".join(own[:2])


def read_actions(path: Path) -> list[Action]:
    actions = []
    for line in path.read_text().splitlines():
        _start, seconds, _action, *frames = line.split("\t")
        actions.append(Action(float(seconds), _step(frames), _site(frames)))
    return actions


def _totals(actions: list[Action]) -> dict[str, dict[str, list[float]]]:
    by_step: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for action in actions:
        by_step[action.step][action.site].append(action.seconds)
    return by_step


def report(actions: list[Action], other: list[Action] | None, top: int) -> str:
    mine, theirs = _totals(actions), _totals(other or [])
    lines = []
    for step in sorted(mine, key=lambda name: -sum(map(sum, mine[name].values()))):
        sites, other_sites = mine[step], theirs.get(step, {})
        total = sum(map(sum, sites.values()))
        beside = f"  (other: {sum(map(sum, other_sites.values())):7.1f} s)" if other is not None else ""
        lines.append(f"{step:12s} {total:7.1f} s in {sum(map(len, sites.values()))} actions{beside}")
        for site, seconds in sorted(sites.items(), key=lambda item: -sum(item[1]))[:top]:
            compared = ""
            if other is not None:
                theirs_here = other_sites.get(site)
                compared = f"{sum(theirs_here):7.1f} s  " if theirs_here else "      -    "
            lines.append(f"  {sum(seconds):7.1f} s  x{len(seconds):<3d} {compared}{site}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path)
    parser.add_argument("--compare", type=Path, help="another night's log, shown beside")
    parser.add_argument("--top", type=int, default=12, help="call sites shown per step")
    args = parser.parse_args(argv)
    other = read_actions(args.compare) if args.compare else None
    print(report(read_actions(args.log), other, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
