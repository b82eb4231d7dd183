"""Report: the gold tables of one cluster -> a static site of its groups (jobs/report_site.py draws it).

The tables are reduced by transforms/report.py to the series the pages draw, then collected: a report
is read by people, so what reaches the driver is bounded by what a person can look at (per group, its
generations, rebalances, ownership intervals and snapshots), never the raw commits.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import Config, resolve_path
from jobs.report_site import write_site
from jobs.runs import JobRun
from transforms import report as shape

# The gold tables every page draws from: a cluster no nightly has built has nothing to report.
GOLD_INPUTS = (
    "generations",
    "rebalances",
    "generation_assignments",
    "partition_movements",
    "lag",
    "group_status",
    "group_daily",
)
# Issue 19's what-if replay (its summary view) and over-provisioned groups (the capacity table), with the
# series drawn from each; a warehouse without one gets a page section that says it was not computed
# rather than an empty chart.
OPTIONAL_SERIES = {
    "whatif_summary": {"whatif": shape.whatif_last_30_days},
    "generation_capacity": {"capacity": shape.capacity_points, "idle_members": shape.idle_member_rows},
}
# Per group and optional series, rows beyond this are summarised by their count (a page stays light).
OPTIONAL_ROWS_PER_GROUP = 500


class ReportInputMissing(RuntimeError):
    """The warehouse lacks a table the report needs: the nightly has not run for this cluster."""


def site_directory(config: Config, out: str | None) -> Path:
    """--out as given, else report.out_dir/<cluster> (one site per cluster side by side)."""
    if out:
        return Path(out).resolve()
    cluster_folder = "".join(c if c.isalnum() or c in "-_." else "_" for c in config.cluster)
    return Path(resolve_path(config.section("report").get("out_dir", "reports"))) / cluster_folder


def _read(spark: SparkSession, config: Config, name: str, group: str | None) -> DataFrame:
    rows = spark.table(config.table(name)).where(F.col("cluster") == F.lit(config.cluster))
    return rows if group is None else rows.where(F.col("group_id") == F.lit(group))


def _by_group(rows: DataFrame) -> dict[str, list[list[Any]]]:
    """Each group's rows as lists in the frame's column order (the page names the columns once); the
    shaped frames hold numbers, text and booleans only, which JSON carries as they are."""
    grouped: dict[str, list[list[Any]]] = defaultdict(list)
    # In time order: a line chart joins its points in the order it is given them.
    order = [name for name in rows.columns if name.endswith("_at_ms")] or _columns(rows)
    for row in rows.orderBy("group_id", order[0]).collect():
        values = row.asDict()
        grouped[values.pop("group_id")].append(list(values.values()))
    return grouped


def _columns(rows: DataFrame) -> list[str]:
    return [name for name in rows.columns if name != "group_id"]


def _optional_sections(spark: SparkSession, config: Config, group: str | None) -> dict[str, dict | None]:
    """Each optional table's or view's series (columns, rows per group), or None when the warehouse does not
    hold it."""
    sections: dict[str, dict | None] = {}
    for name, shapes in OPTIONAL_SERIES.items():
        if not spark.catalog.tableExists(config.table(name)):
            sections[name] = None
            continue
        rows = _read(spark, config, name, group)
        sections[name] = {
            part: (_columns(shaped := to_series(rows)), _by_group(shaped)) for part, to_series in shapes.items()
        }
    return sections


def report(spark: SparkSession, config: Config, run: JobRun, out: str | None = None, group: str | None = None) -> Path:
    """Writes the site and returns its index page."""
    missing = [name for name in GOLD_INPUTS if not spark.catalog.tableExists(config.table(name))]
    if missing:
        raise ReportInputMissing(
            f"{config.database} has no {', '.join(missing)}: run the nightly for cluster {config.cluster!r} first"
        )
    tables = {name: _read(spark, config, name, group) for name in GOLD_INPUTS}
    current_lag = shape.current_lag_totals(tables["lag"], _read(spark, config, "lag", None))
    summaries = shape.group_summaries(tables["generations"], tables["group_daily"], tables["group_status"], current_lag)
    index_rows = summaries.drop("cluster").orderBy("group_id")
    groups = [row.asDict() for row in index_rows.collect()]
    if group is not None and not groups:
        raise ReportInputMissing(f"cluster {config.cluster!r} has no group {group!r} in {config.database}")
    run.counts["report_groups"] = len(groups)
    days = shape.estate_rebalances_per_day(tables["group_daily"]).drop("cluster").orderBy("day")
    series = {
        "generations": shape.generation_points(tables["generations"]),
        "rebalances": shape.rebalance_points(tables["rebalances"]),
        "ownership": shape.ownership_intervals(tables["generation_assignments"]),
        "moves": shape.movement_points(tables["partition_movements"]),
        "lag": shape.group_lag_series(tables["lag"]),
        "status": shape.status_points(tables["group_status"]),
    }
    run.progress("report", f"{len(groups):,} group(s): reading their series")
    collected = {name: (_columns(rows), _by_group(rows)) for name, rows in series.items()}
    optional = _optional_sections(spark, config, group)
    index_page = write_site(
        site_directory(config, out),
        cluster=config.cluster,
        groups=groups,
        days=[row.asDict() for row in days.collect()],
        series=collected,
        optional=optional,
        optional_row_limit=OPTIONAL_ROWS_PER_GROUP,
    )
    run.progress("report", f"{index_page} ({len(groups):,} group page(s))")
    return index_page


def nightly_report(spark: SparkSession, config: Config, run: JobRun) -> None:
    """The nightly's last step when report.nightly is on: the report of the tables it has just written."""
    if config.section("report").get("nightly", False):
        run.progress("report")
        report(spark, config, run)
