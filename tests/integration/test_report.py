"""The group report of a real lab capture, opened from disk in Debian's headless Chromium.

The session's `spark-submit.sh nightly` of the quickstart capture (conftest `local_nightly`) holds the
tables; they are registered in a database of this session's catalog and the report job's own step writes
the site once for the module. One browser (Playwright driving /usr/bin/chromium, no browser download)
opens the index and every group page; each chart's data points are compared with the Delta tables,
counted here by Spark, and every page must load with no console error and no request outside the site.
Each page is also read as a newcomer reads it: every time chart opens on the span of its own events
(the axis's visible extent, read from the ECharts instance, holds them all and they fill most of it), a
chart of one point or none says so in words, and no table header is a column name or breaks a word.
Screenshots go to the module's tmp dir (the path is printed).
"""

from __future__ import annotations

import re
import shutil
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from pyspark.sql import functions as F

from jobs.runs import JobRun
from jobs.steps.report import GOLD_INPUTS, OPTIONAL_SERIES, nightly_report
from jobs.steps.views import create_views, database_identifier
from jobs.tables import sql_string_literal
from tests.background_runs import CLUSTER
from tests.background_runs import DATABASE as NIGHTLY_DATABASE
from tests.delta_compare import delta_tables

DATABASE = "groupscope_report"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHART_IDS = ("chart-generations", "chart-ownership", "chart-lag", "chart-status")
# Each optional section and the table of §1-2 that its source is, or is a view of.
SECTION_SOURCES = {"whatif_summary": "rebalance_whatif", "generation_capacity": "generation_capacity"}
# A header a reader has to decode: a snake_case column name (moved_partition_count, idle_since_at_ms).
COLUMN_NAME = re.compile(r"[a-z]+(_[a-z]+)+")
# The share of a time chart's opening window that its events must span: the window is their span padded
# by a twentieth each side (0.91); events squeezed into the axis's first tenth fail.
EVENTS_FILL_AT_LEAST = 0.5


@pytest.fixture(scope="module")
def nightly_tables(spark, spark_config, local_nightly):
    """The nightly's tables registered here with the views over them; the config the report step reads them with."""
    tables = delta_tables(local_nightly.wait(), NIGHTLY_DATABASE)
    config = replace(spark_config, database=DATABASE, cluster=CLUSTER)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database_identifier(DATABASE)}")
    for name, location in tables.items():
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {config.table(name)} USING delta LOCATION {sql_string_literal(str(location))}"
        )
    create_views(spark, config)
    return config, set(tables)


def with_report_settings(config, **settings):
    return replace(config, sections=MappingProxyType({**config.sections, "report": settings}))


@pytest.fixture(scope="module")
def site(spark, nightly_tables, tmp_path_factory) -> Path:
    """The report as the nightly writes it with report.nightly on: into report.out_dir/<cluster>."""
    config, _ = nightly_tables
    out_dir = tmp_path_factory.mktemp("report")
    # Not exclusive: it only reads, and the nightly's warehouse is not this session's to lock.
    with JobRun(spark, config, "report", exclusive=False) as run:
        nightly_report(spark, with_report_settings(config, nightly=True, out_dir=str(out_dir)), run)
    assert run.exit_code == 0
    assert run.counts["report_groups"] > 0
    return out_dir / CLUSTER / "index.html"


@pytest.fixture(scope="module")
def gold(spark, nightly_tables) -> dict:
    config, _ = nightly_tables
    return {name: spark.table(config.table(name)).where(F.col("cluster") == CLUSTER) for name in GOLD_INPUTS}


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("report-screenshots")
    print(f"\nreport screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium refuses its sandbox.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


class OpenedPage:
    """A page opened from disk, with what went wrong while it loaded."""

    def __init__(self, browser, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.console_errors: list[str] = []
        self.outside_requests: list[str] = []
        self.page.on("console", lambda message: message.type == "error" and self.console_errors.append(message.text))
        self.page.on("pageerror", lambda error: self.console_errors.append(str(error)))
        self.page.on(
            "request", lambda request: request.url.startswith("file://") or self.outside_requests.append(request.url)
        )
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("body[data-ready=true]")

    def chart(self, chart_id: str) -> dict:
        """The chart's option as ECharts holds it after rendering: series (names, data points, labels),
        the words of its titles, and a time axis's visible extent [from, to] in ms after its zoom."""
        return self.page.evaluate(
            "id => { const c = echarts.getInstanceByDom(document.getElementById(id));"
            " const o = c && c.getOption(); if (!o) return null;"
            " const axis = o.xAxis && c.getModel().getComponent('xAxis', 0).axis;"
            " return {series: o.series.map(s => ({name: s.name, data: s.data, label: s.label})),"
            " categories: o.xAxis && o.xAxis[0].data,"
            " words: (o.title || []).map(t => [t.text, t.subtext].filter(Boolean).join(' ')),"
            " visible: axis && axis.type === 'time' ? axis.scale.getExtent() : null}; }",
            chart_id,
        )

    def headers(self) -> list[str]:
        return self.page.locator("th").all_text_contents()

    def words_broken_across_lines(self) -> list[str]:
        """Each header word the browser laid out on more than one line (moved_partitio|n_count)."""
        return self.page.evaluate(
            """() => [...document.querySelectorAll("th")].flatMap((th) => {
              const text = th.firstChild;
              if (!text || text.nodeType !== Node.TEXT_NODE) return [];
              return [...text.data.matchAll(/\\S+/g)].filter((word) => {
                const range = document.createRange();
                range.setStart(text, word.index);
                range.setEnd(text, word.index + word[0].length);
                return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size > 1;
              }).map((word) => word[0]);
            })"""
        )

    def assert_readable_headers(self) -> None:
        headers = self.headers()
        assert [header for header in headers if COLUMN_NAME.fullmatch(header.strip())] == []
        assert self.words_broken_across_lines() == []

    def assert_clean(self) -> None:
        assert self.console_errors == []
        assert self.outside_requests == []


def test_the_index_lists_every_group_and_charts_the_estate(site, gold, browser, screenshots):
    groups = {
        row.group_id
        for row in gold["group_daily"]
        .select("group_id")
        .union(gold["generations"].select("group_id"))
        .distinct()
        .collect()
    }
    rebalances_by_day = {
        row.day.isoformat(): row.rebalance_count
        for row in gold["group_daily"].groupBy("day").agg(F.sum("rebalance_count").alias("rebalance_count")).collect()
    }
    opened = OpenedPage(browser, site)
    page = opened.page
    page.screenshot(path=str(screenshots / "index.png"), full_page=True)
    assert {text for text in page.locator("#groups tbody tr td:first-child").all_inner_texts()} == groups
    (estate,) = opened.chart("chart-estate-rebalances")["series"]
    days = page.evaluate("groupscope.data.days.map(d => d.day)")
    assert dict(zip(days, estate["data"], strict=True)) == rebalances_by_day
    assert page.locator("#chart-estate-rebalances canvas").count() == 1
    estate_chart = opened.chart("chart-estate-rebalances")
    if len(rebalances_by_day) <= 1:  # one bar filling the chart, or none, is said in words
        said = [f"One day, {day}:" for day in rebalances_by_day] or ["No day"]
        assert any(said[0] in words for words in estate_chart["words"]), estate_chart["words"]
    (health,) = opened.chart("chart-health")["series"]
    assert sum(point["value"] for point in health["data"]) == len(groups)
    assert health["label"]["show"] and "{c}" in health["label"]["formatter"]  # counts without hovering
    opened.assert_readable_headers()
    opened.assert_clean()


def _index_cells(page, column: str) -> dict[str, str]:
    """Each group's cell of an index column, as shown."""
    return dict(
        page.evaluate(
            "column => { const position = [...document.querySelectorAll('#groups th')]"
            ".findIndex(th => th.dataset.column === column);"
            " return [...document.querySelectorAll('#groups tbody tr')]"
            ".map(tr => [tr.cells[0].innerText, tr.cells[position].innerText]); }",
            column,
        )
    )


def _shown(value) -> str:
    return "" if value is None else f"{value:,}"


def test_the_index_names_its_lag_and_shows_the_lag_now_beside_the_days_worst(site, gold, browser):
    """The day's largest lag was shown as "offset lag": 29 where group_health said 0. Both are shown now,
    each under a header that says which it is; "now" is the cluster's latest end-offset snapshot."""
    lag = gold["lag"]
    latest = lag.agg(F.max("observed_at")).first()[0]
    now = {
        row.group_id: row.offset_lag
        for row in lag.where(F.col("observed_at") == latest)
        .groupBy("group_id")
        .agg(F.sum("offset_lag").alias("offset_lag"))
        .collect()
    }
    last_days = gold["group_daily"].groupBy("group_id").agg(F.max_by("max_offset_lag", "day").alias("worst"))
    worst = {row.group_id: row.worst for row in last_days.collect()}
    opened = OpenedPage(browser, site)
    page = opened.page
    header = page.locator("#groups th[data-column=last_day_max_offset_lag]")
    assert header.inner_text() == "max offset lag, last day" and "largest" in header.get_attribute("title")
    assert page.inner_text("#groups th[data-column=current_offset_lag]") == "offset lag now"
    shown_now = _index_cells(page, "current_offset_lag")
    assert shown_now == {group: _shown(now.get(group)) for group in shown_now}
    assert any(shown_now.values())  # the capture's last snapshot has lag rows
    shown_worst = _index_cells(page, "last_day_max_offset_lag")
    assert shown_worst == {group: _shown(worst.get(group)) for group in shown_worst}
    opened.assert_clean()


def test_the_index_filters_and_sorts_in_the_browser(site, gold, browser):
    counts = Counter(row.group_id for row in gold["rebalances"].select("group_id").collect())
    busiest, most = counts.most_common(1)[0]
    opened = OpenedPage(browser, site)
    page = opened.page
    page.click("th[data-column=rebalance_count]")
    page.click("th[data-column=rebalance_count]")  # a second click sorts descending
    first_row = page.locator("#groups tbody tr").first.locator("td")
    assert int(first_row.nth(7).inner_text().replace(",", "")) == most
    page.fill("#filter-text", busiest)
    shown = page.locator("#groups tbody tr td:first-child").all_inner_texts()
    assert busiest in shown and all(busiest in group for group in shown)
    page.fill("#filter-text", "no group is called this")
    assert page.locator("#groups tbody tr").count() == 0
    assert page.inner_text("#shown-count") == "0 shown"
    opened.assert_clean()


def _by_group(rows, key) -> dict[str, list]:
    grouped = defaultdict(list)
    for row in rows.collect():
        grouped[row.group_id].append(key(row))
    return grouped


def assert_opens_on_its_events(drawn: dict, times: list[int], where: tuple, one_instant_in_words: bool) -> None:
    """A time chart opens on its events: the visible extent holds every one and they span most of it.
    A chart of no event, or of one (one instant, for ownership's bars), says so in words."""
    if len(times) <= 1 or (one_instant_in_words and len(set(times)) == 1):
        assert [words for words in drawn["words"] if words], (where, drawn["words"])
    if not times:
        return
    (start, end), events = drawn["visible"], (min(times), max(times))
    assert start <= events[0] and events[1] <= end, (where, drawn["visible"], events)
    if events[0] < events[1]:
        assert (events[1] - events[0]) / (end - start) >= EVENTS_FILL_AT_LEAST, (where, drawn["visible"], events)


def test_every_group_page_charts_the_tables(spark, site, gold, nightly_tables, browser, screenshots):
    _, held = nightly_tables
    ms = F.unix_millis
    generations = _by_group(
        gold["generations"]
        .where(F.col("generation").isNotNull())
        .select("group_id", ms("recorded_at").alias("t"), "generation"),
        lambda row: [row.t, row.generation],
    )
    rebalances = _by_group(
        gold["rebalances"].select("group_id", ms("completed_at").alias("t"), "generation", "cause"),
        lambda row: (row.cause, row.t, row.generation),
    )
    ownership = _by_group(
        gold["generation_assignments"].select(
            "group_id", ms("assigned_at").alias("t"), ms("valid_until").alias("until")
        ),
        lambda row: [row.t, row.until],
    )
    moves = _by_group(gold["partition_movements"].select("group_id", ms("completed_at").alias("t")), lambda row: row.t)
    lag = _by_group(
        gold["lag"]
        .groupBy("group_id", "observed_at")
        .agg(F.sum("offset_lag").alias("offset_lag"))
        .select("group_id", ms("observed_at").alias("t"), "offset_lag"),
        lambda row: [row.t, row.offset_lag],
    )
    status = _by_group(
        gold["group_status"].select("group_id", ms("evaluated_at").alias("t"), "status"),
        lambda row: [row.t, row.status],
    )
    config, _ = nightly_tables
    whatif_moves = defaultdict(dict)
    if "rebalance_whatif" in held:
        whatif = spark.table(config.table("rebalance_whatif")).where(F.col("cluster") == CLUSTER)
        for row in whatif.groupBy("group_id", "assignor").agg(F.sum("moved_partition_count").alias("moved")).collect():
            whatif_moves[row.group_id][row.assignor] = row.moved
    capacity = defaultdict(list)
    if "generation_capacity" in held:
        rows = spark.table(config.table("generation_capacity")).where(F.col("cluster") == CLUSTER)
        capacity = _by_group(
            rows.select("group_id", ms("recorded_at").alias("t"), "capacity_used"),
            lambda row: [row.t, row.capacity_used],
        )
    index = OpenedPage(browser, site)
    pages = dict(index.page.evaluate("groupscope.data.groups.map(g => [g[0], g[g.length - 1]])"))
    assert rebalances and ownership and moves and lag and status  # the capture has something to draw in each
    for group_id, page_name in pages.items():
        opened = OpenedPage(browser, site.parent / page_name)
        charts = {chart_id: {s["name"]: s["data"] for s in opened.chart(chart_id)["series"]} for chart_id in CHART_IDS}
        generation_chart = charts["chart-generations"]
        assert sorted(point[:2] for point in generation_chart.pop("generation")) == sorted(generations[group_id]), (
            group_id
        )
        drawn_rebalances = [
            (cause, point[0], point[1]) for cause, points in generation_chart.items() for point in points
        ]
        assert sorted(drawn_rebalances) == sorted(rebalances[group_id]), group_id
        assert len(charts["chart-ownership"]["ownership"]) == len(ownership[group_id]), group_id
        assert sorted(point[0] for point in charts["chart-ownership"]["moves"]) == sorted(moves[group_id]), group_id
        assert sorted(charts["chart-lag"]["offset lag"]) == sorted(lag[group_id]), group_id
        assert sorted(charts["chart-status"]["status"]) == sorted(status[group_id]), group_id
        for chart_id in CHART_IDS:
            assert opened.page.locator(f"#{chart_id} canvas").count() == 1, (group_id, chart_id)
        windows = {
            "chart-generations": [t for t, _ in generations[group_id]] + [t for _, t, _ in rebalances[group_id]],
            "chart-ownership": [t for interval in ownership[group_id] for t in interval if t is not None]
            + moves[group_id],
            "chart-lag": [t for t, _ in lag[group_id]],
            "chart-status": [t for t, _ in status[group_id]],
        }
        if "generation_capacity" in held:
            windows["chart-capacity"] = [t for t, _ in capacity[group_id]]
        for chart_id, times in windows.items():
            where = (group_id, chart_id)
            assert_opens_on_its_events(opened.chart(chart_id), times, where, chart_id == "chart-ownership")
        opened.assert_readable_headers()
        for name in OPTIONAL_SERIES:
            state = opened.page.get_attribute(f"#section-{name} .body", "data-state")
            assert state == ("computed" if SECTION_SOURCES[name] in held else "not-computed"), (group_id, name)
        if whatif_moves.get(group_id):
            drawn = opened.chart("chart-whatif")
            assignors = [label.removesuffix(" (in use)") for label in drawn["categories"]]
            moved = {s["name"]: s["data"] for s in drawn["series"]}["moved"]
            assert dict(zip(assignors, moved, strict=True)) == whatif_moves[group_id], group_id
        if capacity.get(group_id):
            drawn = {s["name"]: s["data"] for s in opened.chart("chart-capacity")["series"]}
            assert sorted(drawn["capacity used"]) == sorted(capacity[group_id]), group_id
        opened.assert_clean()
        if group_id in rebalances:
            opened.page.screenshot(path=str(screenshots / f"group-{group_id}.png"), full_page=True)
        opened.page.close()


def test_the_nightly_writes_no_report_unless_switched_on(spark, nightly_tables, tmp_path):
    config, _ = nightly_tables
    with JobRun(spark, config, "report", exclusive=False) as run:
        nightly_report(spark, with_report_settings(config, out_dir=str(tmp_path)), run)
        nightly_report(spark, with_report_settings(config, nightly=False, out_dir=str(tmp_path)), run)
    assert list(tmp_path.iterdir()) == []
    assert "report_groups" not in run.counts
