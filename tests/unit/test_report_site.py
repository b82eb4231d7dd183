"""The report's files without Spark or a browser: page names, inline data, and where a site may be written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jobs.report_site import MARKER, ReportSiteError, inline_json, page_name, write_site

GROUP = {"group_id": "orders", "health": "ok"}


def _write(site: Path, groups=(GROUP,)) -> Path:
    return write_site(site, "east", list(groups), [], {}, {"rebalance_whatif": None}, 10)


def test_group_ids_that_differ_only_in_unsafe_characters_get_different_pages():
    names = {page_name(group) for group in ("a/b", "a?b", "a b", "a_b", "../a")}
    assert len(names) == 5
    assert all(re.fullmatch(r"groups/[A-Za-z0-9._-]+-[0-9a-f]{10}\.html", name) for name in names)


def test_inline_data_cannot_close_its_script_element():
    text = inline_json({"group_id": "</script><script>alert(1)</script>"})
    assert "</" not in text
    assert json.loads(text)["group_id"] == "</script><script>alert(1)</script>"


def test_a_page_carries_its_group_and_loads_only_files_of_the_site(tmp_path):
    index = _write(tmp_path / "site", [GROUP, {"group_id": "<b>payments</b>", "health": "warning"}])
    site = index.parent
    page = (site / page_name("<b>payments</b>")).read_text()
    assert "<title>groupscope: &lt;b&gt;payments&lt;/b&gt; (east)</title>" in page
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.DOTALL).group(1))
    assert data["summary"]["group_id"] == "<b>payments</b>" and data["optional"] == {"rebalance_whatif": None}
    sources = re.findall(r'(?:src|href)="([^"]+)"', page + index.read_text())
    assert sources and all(not re.match(r"[a-z]+://", source) for source in sources if source != "data:,")
    assert all((site / "groups" / source).resolve().is_file() for source in re.findall(r'src="([^"]+)"', page))
    assert (site / "assets" / "echarts-LICENSE").is_file()


def test_a_new_report_replaces_the_old_one_whole(tmp_path):
    _write(tmp_path / "site", [GROUP, {"group_id": "gone", "health": "ok"}])
    _write(tmp_path / "site")
    assert sorted(path.name for path in (tmp_path / "site" / "groups").iterdir()) == [Path(page_name("orders")).name]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["site"]  # nothing staged or retired left beside it


def test_a_directory_that_is_not_a_report_is_never_replaced(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine")
    with pytest.raises(ReportSiteError, match="is not a groupscope report"):
        _write(tmp_path / "home")
    assert [path.name for path in (tmp_path / "home").iterdir()] == ["notes.txt"]
    assert not (tmp_path / "home" / MARKER).exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["home"]
