"""The report's index with a large estate: page weight and load time of 2,000 groups, in Chromium.

    .venv/bin/python -m bench.report_index [--groups 2000] [--baseline-groups 20] [--repeat 5]

Writes two sites with jobs/report_site.py (no Spark: the index's rows are generated in the shape the
report step collects, with a few days of rebalances and lag each), the estate and a small baseline, and
opens each index from disk in Debian's headless Chromium (Playwright, /usr/bin/chromium) --repeat times
in a fresh page. Prints per site: the index's bytes and the assets' bytes; the median time from
navigation start to the page's ready mark (data parsed, table drawn, both charts drawn), to the load
event, and to a filter keystroke and a sort click re-drawing the table; then each figure's ratio
estate / baseline, the machine and its load. Group pages are not written (--groups pages alone would
measure the disk), so the index is what is timed.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
from datetime import date, timedelta
from pathlib import Path

from jobs.report_site import write_site

HEALTHS = ("ok", "ok", "ok", "warning", "critical", "deleted")
PROTOCOLS = ("classic", "consumer", "share", "streams")


def estate_groups(count: int, seed: int = 7) -> list[dict]:
    generator = random.Random(seed)
    groups = []
    for number in range(count):
        rebalances = generator.randrange(0, 400)
        groups.append(
            {
                "group_id": f"service-{number % 97}-consumer-{number:05d}",
                "group_protocol": generator.choice(PROTOCOLS),
                "state": generator.choice(("stable", "empty")),
                "health": generator.choice(HEALTHS),
                "status": generator.choice(("OK", "WARN", "ERR", None)),
                "member_count": generator.randrange(0, 40),
                "generation": rebalances + 1,
                "rebalance_count": rebalances,
                "rebalances_per_day": round(rebalances / 30, 2),
                "max_rebalances_in_a_day": rebalances // 5,
                "current_offset_lag": generator.randrange(0, 10**7),
                "last_day": "2026-10-30",
                "last_day_max_offset_lag": generator.randrange(0, 10**7),
                "current_time_lag_seconds": round(generator.uniform(0, 3600), 1),
                "last_day_max_time_lag_seconds": round(generator.uniform(0, 3600), 1),
                "last_seen_at_ms": 1_790_000_000_000 + generator.randrange(0, 10**9),
            }
        )
    return groups


def write_index(folder: Path, count: int) -> Path:
    first_day = date(2026, 10, 1)
    days = [
        {
            "day": (first_day + timedelta(days=n)).isoformat(),
            "rebalance_count": count * 3,
            "rebalancing_group_count": count // 2,
        }
        for n in range(30)
    ]
    groups = estate_groups(count)
    # write_site writes a page per group; the index alone is timed, so the group pages are left out.
    return write_site(folder, "bench", groups, days, {}, {}, 0, pages=False)


def measure(browser, index: Path, repeat: int) -> dict[str, float]:
    figures: dict[str, list[float]] = {"ready_ms": [], "load_ms": [], "filter_ms": [], "sort_ms": []}
    for _ in range(repeat):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda error, errors=errors: errors.append(str(error)))
        page.goto(index.as_uri(), wait_until="load")
        page.wait_for_selector("body[data-ready=true]")
        timing = page.evaluate(
            "() => ({ready: Number(document.body.dataset.readyMs),"
            " load: performance.getEntriesByType('navigation')[0].loadEventEnd})"
        )
        filter_ms = page.evaluate(
            "() => { const input = document.getElementById('filter-text'); const t0 = performance.now();"
            " input.value = 'consumer-01'; input.dispatchEvent(new Event('input')); return performance.now() - t0; }"
        )
        page.fill("#filter-text", "")
        sort_ms = page.evaluate(
            "() => { const t0 = performance.now();"
            " document.querySelector('th[data-column=current_offset_lag]').click(); return performance.now() - t0; }"
        )
        assert not errors, errors
        figures["ready_ms"].append(timing["ready"])
        figures["load_ms"].append(timing["load"])
        figures["filter_ms"].append(filter_ms)
        figures["sort_ms"].append(sort_ms)
        page.close()
    return {name: statistics.median(values) for name, values in figures.items()}


def weight(index: Path) -> dict[str, int]:
    assets = sum(path.stat().st_size for path in (index.parent / "assets").iterdir())
    return {"index_bytes": index.stat().st_size, "assets_bytes": assets}


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    arguments.add_argument("--groups", type=int, default=2000)
    arguments.add_argument("--baseline-groups", type=int, default=20)
    arguments.add_argument("--repeat", type=int, default=5)
    args = arguments.parse_args()
    from playwright.sync_api import sync_playwright

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; load {os.getloadavg()}")
    results = {}
    with tempfile.TemporaryDirectory() as work, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        print(f"chromium {browser.version}, headless")
        for label, count in (("baseline", args.baseline_groups), ("estate", args.groups)):
            index = write_index(Path(work) / label, count)
            results[label] = {**weight(index), **measure(browser, index, args.repeat)}
            figures = ", ".join(f"{name} {value:,.1f}" for name, value in results[label].items())
            print(f"{label} ({count:,} groups): {figures}")
        browser.close()
    ratios = ", ".join(
        f"{name} x{results['estate'][name] / results['baseline'][name]:.2f}" for name in results["estate"]
    )
    print(f"estate / baseline: {ratios}")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
