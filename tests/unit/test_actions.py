"""bench/actions.py and its hook (bench/action_hook/sitecustomize.py), on hand-written logs and a stand-in class."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from bench import actions

HOOK = Path(__file__).resolve().parents[2] / "bench" / "action_hook" / "sitecustomize.py"
NIGHT_7 = "\n".join(
    [
        "1.0\t2.5\tDataFrame.localCheckpoint\tjobs/tables.py:210:held_on_disk\tjobs/history_writes.py:60:taken_up"
        "\tsteps/history.py:300:history\tsteps/nightly.py:79:<lambda>",
        "4.0\t1.5\tDataFrame.localCheckpoint\tjobs/tables.py:210:held_on_disk\tjobs/history_writes.py:60:taken_up"
        "\tsteps/history.py:300:history\tsteps/nightly.py:79:<lambda>",
        "6.0\t7.0\tDeltaMergeBuilder.execute\tjobs/raw_changes.py:246:merge_resolved_transactions"
        "\tsteps/decode.py:132:_decode_changes\tsteps/decode.py:67:decode",
        "9.0\t3.0\tDataFrame.collect\tjobs/runs.py:59:row_counts\tsteps/history.py:319:history",
    ]
)
NIGHT_1 = "1.0\t4.0\tDataFrame.collect\tjobs/runs.py:59:row_counts\tsteps/history.py:319:history"


def test_actions_are_counted_under_their_step_and_the_line_that_asked(tmp_path):
    log = tmp_path / "n7.tsv"
    log.write_text(NIGHT_7 + "\n")
    found = actions.read_actions(log)
    assert [(action.step, action.site) for action in found[:3]] == [
        ("history", "jobs/history_writes.py:60:taken_up < steps/history.py:300:history"),
        ("history", "jobs/history_writes.py:60:taken_up < steps/history.py:300:history"),
        ("decode", "jobs/raw_changes.py:246:merge_resolved_transactions < steps/decode.py:132:_decode_changes"),
    ]
    text = actions.report(found, None, top=5).splitlines()
    assert text[0].startswith("history") and "7.0 s in 3 actions" in text[0]
    assert "4.0 s  x2" in text[1] and "taken_up" in text[1]


def test_a_compared_night_shows_what_the_other_lacks(tmp_path):
    (tmp_path / "n7.tsv").write_text(NIGHT_7 + "\n")
    (tmp_path / "n1.tsv").write_text(NIGHT_1 + "\n")
    text = actions.report(
        actions.read_actions(tmp_path / "n7.tsv"), actions.read_actions(tmp_path / "n1.tsv"), top=5
    ).splitlines()
    assert "(other:     4.0 s)" in text[0]
    taken_up = next(line for line in text if "taken_up" in line)
    row_counts = next(line for line in text if "row_counts" in line)
    assert "   -   " in taken_up and "4.0 s" in row_counts.split("x1")[1]


def test_the_hook_logs_one_line_per_top_level_action(tmp_path, monkeypatch):
    log = tmp_path / "actions.tsv"
    monkeypatch.setenv("GROUPSCOPE_ACTION_LOG", str(log))
    spec = importlib.util.spec_from_file_location("action_hook_under_test", HOOK)
    hook = importlib.util.module_from_spec(spec)
    import builtins

    real_import = builtins.__import__
    try:
        spec.loader.exec_module(hook)
    finally:
        builtins.__import__ = real_import  # the hook waits for the jobs package: not here

    class Frame:
        def count(self):
            return self.collect()  # an action inside an action: its time, not a line of its own

        def collect(self):
            return [1, 2]

    hook._timed(Frame, "count")
    hook._timed(Frame, "collect")
    assert Frame().count() == [1, 2]
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and lines[0].split("\t")[2] == "Frame.count"
