"""The Airflow DAGs in dags/, loaded and run by a real Airflow in its own venv (scripts/airflow_env.sh).

Airflow lives in .venv-airflow (its dependencies clash with the jobs' pyspark), so everything Airflow does here
runs in subprocesses of that venv against a temporary AIRFLOW_HOME with a SQLite database: a `DagBag` load,
the scheduler's own timetables, `airflow tasks render` for every task, and `airflow tasks test` of the nightly
`ingest` task, which runs the real job through spark-submit.sh on the sample capture.
"""

from __future__ import annotations

import ast
import importlib
import itertools
import json
import os
import re
import shlex
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from jobs.command_line import parse_config
from jobs.runs import JOB_RUNS, JobRun
from jobs.segment_files import read_paths
from tests.conftest import REPO_ROOT
from tests.delta_compare import delta_tables, table_rows

AIRFLOW_VENV = REPO_ROOT / ".venv-airflow"
DAGS_FOLDER = REPO_ROOT / "dags"
SAMPLE_SEGMENTS = REPO_ROOT / "samples" / "kafka-4.2.1" / "segments"
LOGICAL_DATE = "2026-03-14"
NIGHTLY_STAGES = ["capture", "ingest", "decode", "history", "metrics", "views", "report"]
NIGHTLY_JOBS = [*NIGHTLY_STAGES, "maintenance"]
CAPTURE_JOBS = ["capture", "end_offsets"]
# Settings for the render: the checkout from the worker's environment, the rest as Airflow Variables
# (AIRFLOW_VAR_*). The spaces prove that the command quotes what it splices in.
RENDER_HOME = "/opt/group scope"
RENDER_CONF = "/etc/groupscope conf/prod.toml"
RENDER_CLUSTER = "east 1"
RENDER_MASTER = "spark://127.0.0.1:7077"

# Runs inside .venv-airflow (part of the scripts below): a task's command as `airflow tasks render` renders it.
RENDERED_COMMAND = r"""
def rendered_command(dag_id, task_id, logical_date):
    args = get_parser().parse_args(["tasks", "render", dag_id, task_id, logical_date])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        args.func(args)
    return printed.getvalue().split("# property: bash_command\n")[1].split("\n")[1]
"""

# Runs inside .venv-airflow: describes the DAGs as the DagBag, the scheduler and `airflow tasks render` see them.
DESCRIBE_DAGS = (
    r"""
import contextlib, io, json, sys
import pendulum
from airflow.cli.cli_parser import get_parser
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization
from airflow.timetables.base import TimeRestriction

dags_folder, logical_date = sys.argv[1:]
bag = DagBag(dag_folder=dags_folder, safe_mode=False)

"""
    + RENDERED_COMMAND
    + r"""
def first_runs(dag, count=3):
    timetable = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable
    restriction = TimeRestriction(earliest=dag.start_date, latest=None, catchup=True)
    runs, info = [], None
    for _ in range(count):
        info = timetable.next_dagrun_info_v2(last_dagrun_info=info, restriction=restriction)
        interval = info.data_interval
        runs.append([str(info.run_after), str(interval.start), str(interval.end)])
    return runs

def describe_task(dag, task):
    seconds = lambda delta: None if delta is None else delta.total_seconds()
    described = {
        "operator": type(task).__name__,
        "downstream": sorted(task.downstream_task_ids),
        "retries": task.retries,
        "retry_delay": seconds(task.retry_delay),
        "execution_timeout": seconds(task.execution_timeout),
        "trigger_rule": str(task.trigger_rule.value),
    }
    if described["operator"] == "BashOperator":
        described["skip_on_exit_code"] = list(task.skip_on_exit_code)
        described["command"] = rendered_command(dag.dag_id, task.task_id, logical_date)
    else:
        week = [pendulum.datetime(2026, 3, 9, tz="UTC").add(days=n) for n in range(7)]
        choices = {day.format("dddd"): task.choose_branch({"logical_date": day}) for day in week}
        described["branch_by_day"] = {day: list(follow) for day, follow in choices.items()}
    return described

print(json.dumps({
    "import_errors": {str(path): str(error) for path, error in bag.import_errors.items()},
    "dags": {
        dag.dag_id: {
            "max_active_runs": dag.max_active_runs,
            "catchup": dag.catchup,
            "first_runs": first_runs(dag),
            "tasks": {task.task_id: describe_task(dag, task) for task in dag.tasks},
        }
        for dag in bag.dags.values()
    },
}))
"""
)


def airflow_environment(airflow_home: Path, **variables: str) -> dict[str, str]:
    """The test's own Airflow; settings that leak in from the caller's environment would change what renders."""
    inherited = {name: value for name, value in os.environ.items() if not name.startswith(("AIRFLOW", "GROUPSCOPE_"))}
    return {
        **inherited,
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        **{f"AIRFLOW_VAR_{name.upper()}": value for name, value in variables.items()},
    }


def run_airflow(arguments: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(AIRFLOW_VENV / "bin" / "airflow"), *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_task(task_id: str, env: dict[str, str]) -> str:
    """`airflow tasks test` of one nightly task: the real operator, the real job, a throw-away DAG run."""
    result = run_airflow(["tasks", "test", "groupscope_nightly", task_id, LOGICAL_DATE], env, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    return output


def command_run_by(output: str) -> list[str]:
    """The command line BashOperator logged as it started the job."""
    logged = re.search(r"Running command: (\[.*?\])", output)
    assert logged, output[-5000:]
    return shlex.split(ast.literal_eval(logged.group(1))[-1])


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory) -> Path:
    subprocess.run([str(REPO_ROOT / "scripts" / "airflow_env.sh")], check=True, timeout=900)
    home = tmp_path_factory.mktemp("airflow_home")
    migrated = run_airflow(["db", "migrate"], airflow_environment(home), timeout=300)
    assert migrated.returncode == 0, migrated.stderr[-5000:]
    return home


@pytest.fixture(scope="module")
def described(airflow_home) -> dict:
    env = airflow_environment(
        airflow_home, groupscope_conf=RENDER_CONF, groupscope_cluster=RENDER_CLUSTER, groupscope_master=RENDER_MASTER
    )
    env["GROUPSCOPE_HOME"] = RENDER_HOME
    result = subprocess.run(
        [str(AIRFLOW_VENV / "bin" / "python"), "-c", DESCRIBE_DAGS, str(DAGS_FOLDER), LOGICAL_DATE],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-5000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_dags_import_without_errors(described):
    assert described["import_errors"] == {}
    assert set(described["dags"]) == {"groupscope_nightly", "groupscope_capture"}


def test_nightly_runs_one_task_per_stage_in_order_then_weekly_maintenance(described):
    tasks = described["dags"]["groupscope_nightly"]["tasks"]
    chain = [*NIGHTLY_STAGES, "maintenance_day", "maintenance"]
    assert set(tasks) == set(chain)
    for task_id, next_task_id in itertools.pairwise(chain):
        assert tasks[task_id]["downstream"] == [next_task_id], task_id
    assert tasks["maintenance"]["downstream"] == []


def test_maintenance_runs_on_one_day_of_the_week_even_after_a_failed_views(described):
    branch = described["dags"]["groupscope_nightly"]["tasks"]["maintenance_day"]
    days_with_maintenance = [day for day, follow in branch["branch_by_day"].items() if follow == ["maintenance"]]
    assert days_with_maintenance == ["Sunday"]
    assert all(follow in (["maintenance"], []) for follow in branch["branch_by_day"].values())
    assert branch["trigger_rule"] == "all_done"


def test_nightly_runs_once_a_day_for_the_day_that_ended(described):
    runs = [
        [datetime.fromisoformat(moment) for moment in run]
        for run in described["dags"]["groupscope_nightly"]["first_runs"]
    ]
    for run_after, interval_start, interval_end in runs:
        # The logical date ({{ ds }}) is the interval's start: the calendar day that ended when the run fires.
        assert (interval_start.hour, interval_start.minute) == (0, 0)
        assert interval_end - interval_start == timedelta(days=1)
        assert run_after == interval_end
    assert [run[0] for run in runs[1:]] == [run[0] + timedelta(days=1) for run in runs[:-1]]


def test_capture_runs_every_ten_to_fifteen_minutes(described):
    run_times = [datetime.fromisoformat(run[0]) for run in described["dags"]["groupscope_capture"]["first_runs"]]
    gaps = {later - earlier for earlier, later in itertools.pairwise(run_times)}
    assert len(gaps) == 1 and timedelta(minutes=10) <= gaps.pop() <= timedelta(minutes=15)
    tasks = described["dags"]["groupscope_capture"]["tasks"]
    assert set(tasks) == set(CAPTURE_JOBS)
    assert tasks["capture"]["downstream"] == ["end_offsets"]
    # A failed capture must not cost the end-offset snapshot.
    assert tasks["end_offsets"]["trigger_rule"] == "all_done"


def test_runs_never_overlap_and_missed_runs_are_not_caught_up(described):
    for dag_id, dag in described["dags"].items():
        assert dag["max_active_runs"] == 1, dag_id
        assert dag["catchup"] is False, dag_id


def test_job_tasks_retry_after_a_delay_time_out_and_fail_on_any_nonzero_exit(described):
    dags = described["dags"]
    capture_period = timedelta(minutes=15).total_seconds()
    for dag_id, jobs in (("groupscope_nightly", NIGHTLY_JOBS), ("groupscope_capture", CAPTURE_JOBS)):
        for job in jobs:
            task = dags[dag_id]["tasks"][job]
            assert task["operator"] == "BashOperator"
            assert task["retries"] >= 1 and task["retry_delay"] >= 60, (dag_id, job)
            assert task["execution_timeout"], (dag_id, job)
            # BashOperator would otherwise report exit code 99 as "skipped", not failed.
            assert task["skip_on_exit_code"] == [], (dag_id, job)
    for job in CAPTURE_JOBS:
        assert dags["groupscope_capture"]["tasks"][job]["execution_timeout"] < capture_period, job


def test_rendered_commands_run_the_job_for_the_logical_date_with_the_variables(described):
    for dag_id, jobs in (("groupscope_nightly", NIGHTLY_JOBS), ("groupscope_capture", CAPTURE_JOBS)):
        for job in jobs:
            command = shlex.split(described["dags"][dag_id]["tasks"][job]["command"])
            assert command == [
                f"{RENDER_HOME}/spark-submit.sh",
                "--master",
                RENDER_MASTER,
                job,
                "--conf",
                RENDER_CONF,
                "--run-date",
                LOGICAL_DATE,
                "--cluster",
                RENDER_CLUSTER,
            ], (dag_id, job)


@pytest.fixture(scope="module")
def sample_conf(tmp_path_factory) -> Path:
    """An environment file like conf/local.toml, with the warehouse and database of this test."""
    folder = tmp_path_factory.mktemp("airflow_run")
    conf = folder / "airflow-test.toml"
    conf.write_text(
        f'[catalog]\ndatabase = "groupscope_airflow"\n'
        f"[storage]\nwarehouse_dir = {json.dumps(str(folder / 'warehouse'))}\n"
        f'[input]\ncluster = "sample-airflow"\nsegment_paths = [{json.dumps(str(SAMPLE_SEGMENTS))}]\n'
    )
    return conf


def test_nightly_ingest_task_runs_the_job_into_the_tables(airflow_home, sample_conf, spark):
    env = airflow_environment(airflow_home)
    # A Variable in Airflow's database, as an operator sets it in the UI.
    stored = run_airflow(["variables", "set", "groupscope_conf", str(sample_conf)], env, timeout=120)
    assert stored.returncode == 0, stored.stderr[-5000:]

    output = run_task("ingest", env)

    # No groupscope_home anywhere: the checkout that holds dags/ is the default.
    assert command_run_by(output) == [
        f"{REPO_ROOT}/spark-submit.sh",
        "ingest",
        "--conf",
        str(sample_conf),
        "--run-date",
        LOGICAL_DATE,
    ]
    assert "Command exited with return code 0" in output
    tables = sample_conf.parent / "warehouse" / "groupscope_airflow.db"
    raw = (
        spark.read.format("delta")
        .load(str(tables / "raw_records"))
        .where(F.col("cluster") == "sample-airflow")
        .select("source_partition", "source_offset")
    )
    stored = {(row.source_partition, row.source_offset) for row in raw.collect()}
    expected = {(record.partition, record.offset) for record in read_paths([str(SAMPLE_SEGMENTS)])}
    assert expected and stored == expected
    runs = spark.read.format("delta").load(str(tables / "job_runs")).collect()
    assert [(run.job, run.cluster, run.outcome, run.raw_count) for run in runs] == [
        ("ingest", "sample-airflow", "succeeded", len(expected))
    ]


def test_a_failing_job_fails_its_task_and_leaves_it_for_a_retry(airflow_home, tmp_path):
    output = run_task("decode", airflow_environment(airflow_home, groupscope_conf=str(tmp_path / "missing.toml")))

    assert re.search(r"Command exited with return code [1-9]", output), output[-5000:]
    assert "new_state=up_for_retry" in output, output[-5000:]


# Runs inside .venv-airflow: the nightly DAG's job commands for each logical date, as `airflow tasks render`
# renders them (the Variables from the environment), in the order of the DAG's chain.
RENDER_RUNS = (
    r"""
import contextlib, io, json, sys
from airflow.cli.cli_parser import get_parser

dag_id, tasks, dates = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
"""
    + RENDERED_COMMAND
    + r"""
print(json.dumps({date: [rendered_command(dag_id, task, date) for task in tasks] for date in dates}))
"""
)
MISSED_DATES = ["2026-03-15", "2026-03-16"]
# capture needs a live cluster ([capture] bootstrap_servers); this estate has segments only.
SEGMENT_STAGES = [stage for stage in NIGHTLY_STAGES if stage != "capture"]


def rendered_runs(airflow_home: Path, conf: Path, dates: list[str]) -> dict[str, list[str]]:
    env = airflow_environment(airflow_home, groupscope_conf=str(conf))
    arguments = [str(AIRFLOW_VENV / "bin" / "python"), "-c", RENDER_RUNS, "groupscope_nightly"]
    arguments += [",".join(SEGMENT_STAGES), ",".join(dates)]
    result = subprocess.run(arguments, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-5000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_commands(spark, commands: list[str]) -> None:
    """Rendered commands one after the other, each as its job's main() runs it (the command line parsed
    and checked by the job's own parser, one recorded run of its step), in this test's session: a
    separate JVM per task would only add its start-up (the ingest task above runs through spark-submit)."""
    for command in commands:
        launcher, job, *arguments = shlex.split(command)
        assert launcher == f"{REPO_ROOT}/spark-submit.sh", launcher
        config = parse_config(arguments, job, job)
        step = getattr(importlib.import_module(f"jobs.steps.{job}"), job)
        with JobRun(spark, config, job) as run:
            step(spark, config, run)
        (outcome,) = spark.table(config.table(JOB_RUNS)).where(F.col("run_id") == run.run_id).collect()
        assert run.exit_code == 0, f"{command}: {outcome.message}"


def database_rows(spark, warehouse: Path, database: str) -> dict[str, list[str]]:
    return {name: table_rows(spark, path) for name, path in delta_tables(warehouse, database).items()}


def test_catching_up_missed_nights_and_rerunning_a_past_date_leave_the_tables_of_nights_in_order(
    airflow_home, spark, warehouse, tmp_path
):
    """Two nights' DAG runs missed, then caught up one after the other over the log as it is now, then the
    first date's run cleared and run again, against the same two nights run in order over the log as it
    stood each night. The commands are the DAG's, rendered by Airflow for each logical date."""
    from tests import log_cuts

    capture = SAMPLE_SEGMENTS.parent
    times = [batch.max_timestamp_ms for found in log_cuts.capture_batches(capture).values() for batch in found]
    nights = [log_cuts.cut_at(capture, (min(times) + max(times)) // 2, "halfway"), log_cuts.whole(capture)]
    live = tmp_path / "live"
    databases = {"in_order": "groupscope_dag_in_order", "caught_up": "groupscope_dag_caught_up"}
    for name, database in databases.items():
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")  # what a job's own session does first
        (tmp_path / f"{name}.toml").write_text(
            f'[catalog]\ndatabase = "{database}"\n'
            f"[storage]\nwarehouse_dir = {json.dumps(str(warehouse))}\n"
            f'[input]\ncluster = "nights"\nsegment_paths = [{json.dumps(str(live / "segments"))}]\n'
            f"[end_offsets]\nfiles = [{json.dumps(str(live / 'end_offsets'))}]\n"
            f"[report]\nout_dir = {json.dumps(str(tmp_path / 'reports'))}\n"
        )
    in_order = rendered_runs(airflow_home, tmp_path / "in_order.toml", MISSED_DATES)
    caught_up = rendered_runs(airflow_home, tmp_path / "caught_up.toml", MISSED_DATES)
    for date, commands in caught_up.items():  # each run carries its own logical date
        assert all(shlex.split(command)[-2:] == ["--run-date", date] for command in commands), commands

    for night, date in zip(nights, MISSED_DATES, strict=True):
        log_cuts.write_night([night], live / "segments", live / "end_offsets")
        run_commands(spark, in_order[date])
    run_commands(spark, [command for date in MISSED_DATES for command in caught_up[date]])
    expected = database_rows(spark, warehouse, databases["in_order"])
    before = database_rows(spark, warehouse, databases["caught_up"])
    assert len(expected) >= 15 and expected["generations"]
    assert [name for name in expected.keys() | before.keys() if expected.get(name) != before.get(name)] == []

    run_commands(spark, caught_up[MISSED_DATES[0]])
    after = database_rows(spark, warehouse, databases["caught_up"])
    assert [name for name in before if before[name] != after.get(name)] == []
