"""bench/event_log.py: a nightly's steps from Spark's event log, on a small hand-written log."""

from __future__ import annotations

import json

from bench import event_log

JOB_LOG = """[nightly     0.0s] started: run nightly-x
[nightly     0.0s] ingest
[nightly     4.0s] history
[nightly     6.0s] metrics
[nightly    10.0s] succeeded: {}
"""
T0 = 1_000_000  # the first job's submission, 0 s into the run


def events() -> list[str]:
    def job(job_id, submitted, completed, stages, execution):
        return [
            {"Event": "SparkListenerJobStart", "Job ID": job_id, "Submission Time": T0 + submitted,
             "Stage Infos": [{"Stage ID": s} for s in stages],
             "Properties": {"spark.sql.execution.id": str(execution)}},
            {"Event": "SparkListenerJobEnd", "Job ID": job_id, "Completion Time": T0 + completed},
        ]  # fmt: skip

    def task(stage, launched, finished, metrics=None):
        return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Task Metrics": metrics,
                "Task Info": {"Launch Time": T0 + launched, "Finish Time": T0 + finished}}  # fmt: skip

    start = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
    moved = {
        "Input Metrics": {"Records Read": 10},
        "Shuffle Read Metrics": {"Total Records Read": 3},
        "Shuffle Write Metrics": {"Shuffle Records Written": 4},
    }
    return [
        json.dumps(line)
        for line in [
            {"Event": start, "executionId": 1, "time": T0, "description": "save ingest"},
            {"Event": start, "executionId": 2, "time": T0 + 4000, "description": "save history"},
            {"Event": start, "executionId": 3, "time": T0 + 4100, "rootExecutionId": 2, "description": "inner"},
            *job(0, 0, 3000, [0], 1),  # ingest: 3 s of its 4 with a job running
            task(0, 0, 3000),
            task(0, 0, 2000),
            *job(1, 4000, 4500, [1], 2),  # history: two overlapping jobs, 1 s of its 2 s running
            *job(2, 4200, 5000, [2], 3),
            task(1, 4000, 4500),
            task(2, 4200, 5000, moved),
            # metrics: no job at all
        ]
    ]


def test_each_step_gets_its_jobs_busy_time_task_seconds_and_driver_only_time():
    log = event_log.read_event_log(iter(events()))
    starts = event_log.step_starts(JOB_LOG)
    assert starts == [("ingest", 0.0), ("history", 4.0), ("metrics", 6.0)]
    rows = event_log.step_rows(log, starts, 10.0, T0)
    summary = [(r["step"], r["wall_s"], r["jobs"], r["busy_s"], r["task_s"], r["driver_only_s"]) for r in rows]
    assert summary == [
        ("ingest", 4.0, 1, 3.0, 5.0, 1.0),
        ("history", 2.0, 2, 1.0, 1.3, 1.0),
        ("metrics", 4.0, 0, 0.0, 0.0, 4.0),
    ]
    # A child execution's tasks count for the execution it runs under.
    assert rows[1]["top"] == [(2, 1300)]


def test_a_log_without_step_lines_is_refused_with_one_line(tmp_path, capsys):
    (tmp_path / "events").write_text("\n".join(events()))
    (tmp_path / "job.log").write_text("nothing here\n")
    assert event_log.main([str(tmp_path / "events"), str(tmp_path / "job.log")]) == 2
    assert "not a nightly's output" in capsys.readouterr().out


def test_a_plan_is_outlined_by_its_heavy_operators_and_the_tables_it_scans():
    def node(name, *children, text=""):
        return {"nodeName": name, "simpleString": text or name, "children": list(children)}

    scan = node(
        "Scan parquet spark_catalog.groupscope.offset_commits",
        text="FileScan parquet Location: PreparedDeltaFileIndex(1 paths)[file:/w/groupscope.db/offset_commits]",
    )
    delta_log = node("Scan json", text="Location: DeltaLogFileIndex(1 paths)[file:/w/x/_delta_log]")
    plan = node(
        "SortAggregate",
        node("Sort", node("Exchange hashpartitioning(group_id, 200)", node("HashAggregate", scan))),
        node("HashAggregate", delta_log),
    )
    write = node("Execute WriteIntoDeltaCommand")
    log = event_log.EventLog(
        executions={7: (0, None, "save"), 8: (0, 7, "its query")},
        plans={7: event_log.plan_outline(write), 8: event_log.plan_outline(plan)},
    )
    # A write's command runs its query as a child execution: the write is outlined by what it ran.
    assert event_log.outline_text(log, 7) == "hash-agg 2 shuffle 1 sort 1 sort-agg 1; offset_commits"
    assert event_log.outline_text(log, 9) == "; -"


def test_a_steps_timeline_lists_its_executions_in_order_with_the_driver_gaps():
    log = event_log.read_event_log(iter(events()))
    # history's two jobs ran under one execution (3 runs under 2): one row, both jobs, both tasks.
    assert event_log.timeline(log, T0 + 4000, T0 + 6000) == [
        {"execution": 2, "start_ms": T0 + 4000, "end_ms": T0 + 5000, "jobs": 2, "task_ms": 1300}
    ]
    assert event_log.timeline(log, T0, T0 + 4000) == [
        {"execution": 1, "start_ms": T0, "end_ms": T0 + 3000, "jobs": 1, "task_ms": 5000}
    ]
    assert event_log.timeline(log, T0 + 6000, T0 + 10000) == []


def test_the_timeline_option_prints_the_steps_executions(tmp_path, capsys):
    (tmp_path / "events").write_text("\n".join(events()))
    (tmp_path / "job.log").write_text(JOB_LOG)
    assert event_log.main([str(tmp_path / "events"), str(tmp_path / "job.log"), "--timeline", "history"]) == 0
    printed = capsys.readouterr().out.split("history: its executions in order")[1].strip().splitlines()[1:]
    assert len(printed) == 1 and "jobs   2" in printed[0] and "task-s    1.3" in printed[0]
    assert printed[0].split()[0] == "0.0s" and "execution 2:" in printed[0]


def test_an_executions_stages_are_listed_by_task_time_with_the_rows_they_moved(tmp_path, capsys):
    log = event_log.read_event_log(iter(events()))
    # Execution 2's own stage and that of execution 3, run under it; a task without metrics moved no row.
    assert event_log.stage_rows(log, 2) == [
        {"stage": 2, "tasks": 1, "task_ms": 800, "input_rows": 10, "shuffle_read_rows": 3, "shuffle_written_rows": 4},
        {"stage": 1, "tasks": 1, "task_ms": 500, "input_rows": 0, "shuffle_read_rows": 0, "shuffle_written_rows": 0},
    ]
    assert [row["stage"] for row in event_log.stage_rows(log, 1)] == [0]
    assert event_log.stage_rows(log, 3) == []  # it runs under 2: its stages are 2's
    (tmp_path / "events").write_text("\n".join(events()))
    (tmp_path / "job.log").write_text(JOB_LOG)
    assert event_log.main([str(tmp_path / "events"), str(tmp_path / "job.log"), "--stages", "2"]) == 0
    printed = capsys.readouterr().out.split("execution 2: its stages")[1].strip().splitlines()[1:]
    assert [line.split()[1] for line in printed] == ["2", "1"]
    assert printed[0].split()[-3:] == ["10", "3", "4"]
