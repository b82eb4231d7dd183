"""The group report as files: an index page, one page per group, and the assets beside them.

Pure Python (no Spark): the step hands over plain rows. Every page carries its data inline as JSON and
loads only files of the site itself (Apache ECharts, copied from report/node_modules by
scripts/bootstrap.sh, and report/assets), so the site opens from disk with no network. A browser reads
no JSON file from a file:// page, hence the data inside each page.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jobs.config import REPO_ROOT

REPORT_DIR = REPO_ROOT / "report"
TEMPLATES = REPORT_DIR / "templates"
ASSETS = REPORT_DIR / "assets"
ECHARTS_PACKAGE = REPORT_DIR / "node_modules" / "echarts"
# What goes beside the pages from the echarts package: the library and its licence terms.
ECHARTS_FILES = {"dist/echarts.min.js": "echarts.min.js", "LICENSE": "echarts-LICENSE", "NOTICE": "echarts-NOTICE"}
# A directory holding this file is a site this module wrote, and may be replaced by a newer one; any
# other existing directory is refused (an --out mistyped as a home directory is never emptied).
MARKER = ".groupscope-report"

# An optional table's series by name (columns, rows per group), or None: the warehouse does not hold it.
OptionalTable = Mapping[str, tuple[list[str], dict[str, list]]] | None


class ReportSiteError(RuntimeError):
    """The site cannot be written where asked, or the charting library is not installed."""


def page_name(group_id: str) -> str:
    """A file name for any group id: its readable part plus a hash, so that ids differing only in
    characters a file name cannot hold never share a page."""
    readable = "".join(c if c.isalnum() or c in "-_." else "_" for c in group_id)[:60]
    digest = hashlib.sha256(group_id.encode()).hexdigest()[:10]
    return f"groups/{readable}-{digest}.html"


def inline_json(data: Any) -> str:
    """JSON safe inside a <script> element: no '<' can close it early."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def _page(template: str, title: str, data: Any, root: str) -> str:
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    return (
        text.replace("{{title}}", html.escape(title)).replace("{{root}}", root).replace("{{data}}", inline_json(data))
    )


def _copy_assets(site: Path) -> None:
    assets = site / "assets"
    assets.mkdir(parents=True)
    for source, target in ECHARTS_FILES.items():
        path = ECHARTS_PACKAGE / source
        if not path.is_file():
            raise ReportSiteError(f"{path} is missing: run scripts/bootstrap.sh job (it installs the report's ECharts)")
        shutil.copyfile(path, assets / target)
    for path in ASSETS.iterdir():
        shutil.copyfile(path, assets / path.name)


def _optional_section(parts: OptionalTable, group_id: str, limit: int) -> dict | None:
    if parts is None:
        return None
    section = {}
    for part, (columns, rows) in parts.items():
        held = rows.get(group_id, [])
        section[part] = {"columns": columns, "rows": held[:limit], "total": len(held)}
    return section


def group_pages(
    cluster: str,
    groups: Sequence[Mapping[str, Any]],
    series: Mapping[str, tuple[list[str], dict[str, list]]],
    optional: Mapping[str, OptionalTable],
    optional_row_limit: int,
) -> dict[str, dict]:
    """Each group's page data by page name: its index row, its series, the optional tables' rows."""
    pages = {}
    for summary in groups:
        group_id = summary["group_id"]
        pages[page_name(group_id)] = {
            "cluster": cluster,
            "summary": dict(summary),
            "series": {
                name: {"columns": columns, "rows": rows.get(group_id, [])} for name, (columns, rows) in series.items()
            },
            "optional": {
                name: _optional_section(table, group_id, optional_row_limit) for name, table in optional.items()
            },
        }
    return pages


def index_data(
    cluster: str, groups: Sequence[Mapping[str, Any]], days: Sequence[Mapping[str, Any]], optional: Mapping
) -> dict:
    """The index's data: one row per group as a list (2,000 groups weigh a third less than as objects)."""
    columns = [*groups[0].keys(), "page"] if groups else ["group_id", "page"]
    return {
        "cluster": cluster,
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "columns": columns,
        "groups": [[*row.values(), page_name(row["group_id"])] for row in groups],
        "days": [dict(day) for day in days],
        "computed": {name: table is not None for name, table in optional.items()},
    }


def _replace(site: Path, staged: Path) -> None:
    """The new site takes the old one's place; a reader sees one or the other, never a half."""
    if site.exists() and not (site / MARKER).exists():
        shutil.rmtree(staged)
        raise ReportSiteError(f"{site} exists and is not a groupscope report: give --out an empty or new directory")
    retired = site.with_name(f".{site.name}.old-{os.getpid()}")
    if site.exists():
        site.rename(retired)
    staged.rename(site)
    shutil.rmtree(retired, ignore_errors=True)


def write_site(
    site: Path,
    cluster: str,
    groups: Sequence[Mapping[str, Any]],
    days: Sequence[Mapping[str, Any]],
    series: Mapping[str, tuple[list[str], dict[str, list]]],
    optional: Mapping[str, OptionalTable],
    optional_row_limit: int,
    pages: bool = True,
) -> Path:
    """Writes the whole site to `site` (replacing an earlier report there) and returns its index page;
    `pages` False writes the index alone (bench/report_index.py times it)."""
    site.parent.mkdir(parents=True, exist_ok=True)
    staged = site.with_name(f".{site.name}.new-{os.getpid()}")
    shutil.rmtree(staged, ignore_errors=True)
    _copy_assets(staged)
    (staged / "groups").mkdir()
    index = index_data(cluster, groups, days, optional)
    (staged / "index.html").write_text(_page("index.html", f"groupscope: {cluster}", index, ""), encoding="utf-8")
    for name, data in group_pages(cluster, groups if pages else (), series, optional, optional_row_limit).items():
        title = f"groupscope: {data['summary']['group_id']} ({cluster})"
        (staged / name).write_text(_page("group.html", title, data, "../"), encoding="utf-8")
    (staged / MARKER).write_text(f"cluster {cluster}\n", encoding="utf-8")
    _replace(site, staged)
    return site / "index.html"
