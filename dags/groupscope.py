"""Airflow DAGs that run groupscope's jobs through `spark-submit.sh` (docs/airflow.md).

- `groupscope_nightly`: one task per stage (capture -> ingest -> decode -> history -> metrics -> views), the group
  report of the night's tables (`report`: report.out_dir/<cluster>, docs/report.md), then `maintenance` on one day
  of the week, so an operator can clear and re-run a single stage.
- `groupscope_capture`: every 15 minutes, new `__consumer_offsets` records and an end-offset snapshot.

Every task runs `<GROUPSCOPE_HOME>/spark-submit.sh [--master M] JOB --conf FILE --run-date {{ ds }} [--cluster C]`.
The settings are Airflow Variables read when the task runs (`groupscope_home`, `groupscope_conf`,
`groupscope_cluster`, `groupscope_master`); without one, the worker's environment variable of the same name in
upper case applies, else the default below. The jobs exit 0 on success and non-zero on failure.
"""

from __future__ import annotations

import os
import shlex
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.weekday import BranchDayOfWeekOperator
from airflow.sdk import DAG, CronDataIntervalTimetable, CronTriggerTimetable, TriggerRule, chain

# The checkout this file lives in: install the DAGs as a symlink to dags/ and this needs no setting.
CHECKOUT = Path(__file__).resolve().parent.parent
START = pendulum.datetime(2026, 1, 1, tz="UTC")
MAINTENANCE_DAY = os.environ.get("GROUPSCOPE_MAINTENANCE_DAY", "Sunday")

NIGHTLY_STAGES = ("capture", "ingest", "decode", "history", "metrics", "views", "report")
# Generous bounds for a large cluster's day; a stage that hangs is killed and retried instead of blocking the
# next night (max_active_runs=1 queues it behind this one).
NIGHTLY_TIMEOUTS = {
    "capture": timedelta(hours=1),
    "ingest": timedelta(hours=2),
    "decode": timedelta(hours=2),
    "history": timedelta(hours=2),
    "metrics": timedelta(hours=2),
    "views": timedelta(minutes=30),
    "report": timedelta(minutes=30),
    "maintenance": timedelta(hours=3),
}
# A capture run must end well within its 15-minute slot; what one run misses the next one takes.
CAPTURE_TIMEOUTS = {"capture": timedelta(minutes=8), "end_offsets": timedelta(minutes=4)}


# Each setting: Airflow Variable `groupscope_<name>`, read when the task runs; else the worker's environment
# variable GROUPSCOPE_<NAME>; else this default. An empty cluster or master leaves it to the environment file.
SETTING_DEFAULTS = {"home": str(CHECKOUT), "conf": "conf/local.toml", "cluster": "", "master": ""}


def job_command(job: str) -> str:
    """The rendered command is the whole command line, so the UI's "Rendered Template" shows exactly what ran."""
    settings = ""
    for name, default in SETTING_DEFAULTS.items():
        fallback = os.environ.get(f"GROUPSCOPE_{name.upper()}", default)
        settings += f"{{% set groupscope_{name} = var.value.get('groupscope_{name}', {fallback!r}) %}}"
    return settings + (
        "{{ groupscope_home | shell_quote }}/spark-submit.sh"
        "{% if groupscope_master %} --master {{ groupscope_master | shell_quote }}{% endif %} "
        + job
        + " --conf {{ groupscope_conf | shell_quote }} --run-date {{ ds }}"
        "{% if groupscope_cluster %} --cluster {{ groupscope_cluster | shell_quote }}{% endif %}"
    )


def job_task(job: str, timeout: timedelta, **kwargs) -> BashOperator:
    return BashOperator(
        task_id=job,
        bash_command=job_command(job),
        execution_timeout=timeout,
        # BashOperator turns exit code 99 into "skipped" by default; every non-zero exit of a job is a failure.
        skip_on_exit_code=None,
        # The last line of a job's output is its summary, not data for other tasks.
        do_xcom_push=False,
        **kwargs,
    )


# Both DAGs: a run never overlaps the previous one (two runs would fight over the same tables, and the jobs
# refuse it too; a late run queues instead), and runs missed while Airflow was down are not replayed one by one:
# the next run takes what is new, and a missed date can be triggered on purpose (docs/airflow.md).
SHARED_DAG_SETTINGS = {
    "doc_md": __doc__,
    "start_date": START,
    "catchup": False,
    "max_active_runs": 1,
    "user_defined_filters": {"shell_quote": shlex.quote},
    "tags": ["groupscope"],
}

with DAG(
    dag_id="groupscope_nightly",
    description="groupscope: capture, ingest, decode, history, metrics and views for the day that ended",
    # Runs at midnight UTC for the calendar day that just ended, so {{ ds }} is that day.
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    dagrun_timeout=timedelta(hours=16),
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10)},
    **SHARED_DAG_SETTINGS,
) as nightly:
    stages = [job_task(stage, NIGHTLY_TIMEOUTS[stage]) for stage in NIGHTLY_STAGES]
    maintenance_day = BranchDayOfWeekOperator(
        task_id="maintenance_day",
        week_day=MAINTENANCE_DAY,
        use_task_logical_date=True,
        follow_task_ids_if_true=["maintenance"],
        follow_task_ids_if_false=[],
        # Table upkeep does not depend on today's views or report having been built.
        trigger_rule=TriggerRule.ALL_DONE,
    )
    chain(*stages, maintenance_day, job_task("maintenance", NIGHTLY_TIMEOUTS["maintenance"]))


with DAG(
    dag_id="groupscope_capture",
    description="groupscope: capture new __consumer_offsets records and snapshot end offsets",
    schedule=CronTriggerTimetable("*/15 * * * *", timezone="UTC"),
    dagrun_timeout=timedelta(minutes=30),
    default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
    **SHARED_DAG_SETTINGS,
) as capture:
    capture_task = job_task("capture", CAPTURE_TIMEOUTS["capture"])
    # A failed capture must not cost the end-offset snapshot that lag is computed from.
    end_offsets = job_task("end_offsets", CAPTURE_TIMEOUTS["end_offsets"], trigger_rule=TriggerRule.ALL_DONE)
    capture_task >> end_offsets
