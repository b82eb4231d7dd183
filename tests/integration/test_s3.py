"""groupscope on S3 API object storage (issue 18 §1, docs/s3.md), against real S3-compatible servers on
loopback: s3proxy 4.1.0 (conditional writes) and 2.6.0 (ignores If-None-Match), started with
scripts/s3proxy.sh, and real `spark-submit.sh` runs with the warehouse in the bucket.

One module fixture runs everything, in two rounds of runs side by side (the machine has two cores):
  1. a wrong endpoint, wrong credentials, a web server that is not S3 (tests/web_server.py), the store
     without conditional writes, S3A told the store has none (all aimed at warehouses that must stay free
     of tables and locks), and a nightly into warehouse b killed at a progress line;
  2. two nightlies at once into warehouse a (one must be refused by the S3 run lock), once the three
     failures aimed at a have ended, and b run again once it was killed;
then one process reads both warehouses: tables of b (killed and rerun) equal a's row by row, and the SQL
views of a's metastore read its tables; then, side by side, `./spark-sql.sh` on a and beeline asking the
Thrift server on b (tests/s3_shells.py) print a view's rows, which must be those that process read; last,
a `forget` of one segment file on b.

Warehouse b is the documented setup (issue 71 §1): every job on it (the killed nightly, its rerun, the
Thrift server, the forget) is given conf/s3.toml exactly as shipped, with the store on its endpoint's port
and its embedded metastore in the checkout's `warehouse-s3-metastore`. Every job after the first re-opens
that Derby database. a reads the segments from the bucket; b, as shipped, from the checkout.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobs.locks import EXIT_BUSY
from jobs.steps.views import VIEWS
from tests.conftest import REPO_ROOT
from tests.integration.test_thriftserver import accepts_connections
from tests.kill import run_until_progress_line
from tests.s3_runs import (
    BUCKET,
    RUN_TIMEOUT_SECONDS,
    SAMPLE,
    SECRET_KEY_ENV,
    SHIPPED_CONF,
    Run,
    S3Server,
    emptied_for_the_test,
    endpoint_port,
    environment_file,
    free_port,
    new_credentials,
    shipped_setup,
)
from tests.s3_shells import printed_rows, read_with_the_shells
from tests.s3_tables import TIMELINE_HEADER, TIMELINE_QUERY
from tests.web_server import WebServer

KILL_AT_PROGRESS_LINE = 8  # "offset_commits: written": decode has committed one table of six
# A run against a store that does not answer or refuses it: a JVM start (a minute on a loaded two-core
# machine) and S3A's bounded retries (conf/s3.toml: 2 x 2 attempts, 15 s to connect).
FAILURE_BOUND_SECONDS = 240
COMPARE_TIMEOUT_SECONDS = 900
DECLARED = '"spark.hadoop.fs.s3a.create.conditional.enabled" = "false"\n'
FORGOTTEN_SEGMENT = str(SAMPLE / "segments" / "__consumer_offsets-32" / "00000000000000000000.log")


@dataclass
class Outcome:
    code: int
    output: str
    seconds: float
    logs: str


def finished(run: Run) -> Outcome:
    code, output, seconds = run.finish()
    return Outcome(code, output, seconds, run.spark_logs())


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    work = tmp_path_factory.mktemp("s3")
    credentials = new_credentials()
    shipped = shipped_setup()
    assert not accepts_connections(endpoint_port(shipped)), (
        f"conf/s3.toml's endpoint {shipped.section('storage')['s3']['endpoint']} is taken: stop scripts/s3proxy.sh"
    )
    with emptied_for_the_test(shipped.warehouse_dir):
        store = S3Server(work / "store", credentials, port=endpoint_port(shipped)).start()
        legacy = S3Server(work / "legacy", credentials, jars=REPO_ROOT / "jvm" / "s3proxy-2.6" / "jars").start()
        try:
            yield run_everything(work, credentials, shipped, store, legacy)
        finally:
            store.stop()
            legacy.stop()


def run_everything(work: Path, credentials: dict, shipped, store: S3Server, legacy: S3Server) -> dict:
    segments = store.put_folder(SAMPLE / "segments", "inputs/segments")

    def conf(name: str, warehouse: str, endpoint: str = store.endpoint, spark_conf: str = "") -> Path:
        metastore = work / f"metastore-{name}"
        return environment_file(work / f"{name}.toml", endpoint, warehouse, metastore, segments, spark_conf)

    def start(name: str, warehouse: str, endpoint: str = store.endpoint, env: dict | None = None, **conf_args) -> Run:
        return Run.start(
            "nightly", conf(name, warehouse, endpoint, **conf_args), work / f"{name}.out", env or credentials
        )

    wrong_secret = {**credentials, SECRET_KEY_ENV: f"wrong-{secrets.token_urlsafe(16)}"}
    web = WebServer(work / "web")  # answers HTTP (404 to GET and HEAD, 501 to PUT), and is not S3
    first_round = {
        "bad_endpoint": start("bad-endpoint", f"s3a://{BUCKET}/a", endpoint=f"http://127.0.0.1:{free_port()}"),
        "not_s3": start("not-s3", f"s3a://{BUCKET}/a", endpoint=web.endpoint),
        "bad_credentials": start("bad-credentials", f"s3a://{BUCKET}/a", env=wrong_secret),
        "unguarded": start("unguarded", f"s3a://{BUCKET}/a", endpoint=legacy.endpoint),
        # S3A's own declaration that a store has no conditional writes, on the store that has them.
        "declared_unconditional": start("declared-unconditional", f"s3a://{BUCKET}/c", spark_conf=DECLARED),
    }
    # Warehouse b is the documented setup's: conf/s3.toml as shipped, its metastore in the checkout.
    killed_command = [str(REPO_ROOT / "spark-submit.sh"), "nightly", "--conf", str(SHIPPED_CONF)]
    killing = ThreadPoolExecutor(1)
    killed = killing.submit(
        run_until_progress_line,
        killed_command, work / "b-killed.out", KILL_AT_PROGRESS_LINE, env={**os.environ, **credentials},
    )  # fmt: skip
    killing.shutdown(wait=False)
    # Each run of the second round starts once the runs it must follow have ended, not once the whole
    # first round has: the failures spend most of their time waiting out S3A's retries, and the killed
    # run is slowest, so the machine would otherwise idle between the rounds.
    results = {name: finished(first_round[name]) for name in ("bad_endpoint", "bad_credentials", "not_s3")}
    web.stop()
    warehouse_a_after_failures = sorted(
        str(p.relative_to(store.bucket_folder)) for p in (store.bucket_folder / "a").rglob("*")
    )
    second_round = {"a": start("a", f"s3a://{BUCKET}/a"), "rival": start("rival", f"s3a://{BUCKET}/a")}
    killed_at = killed.result(RUN_TIMEOUT_SECONDS)
    # The second job to open the shipped metastore: Derby re-opens the database the killed run created.
    second_round["b_rerun"] = Run.start("nightly", SHIPPED_CONF, work / "b-rerun.out", credentials)
    results |= {name: finished(first_round[name]) for name in ("unguarded", "declared_unconditional")}
    c_objects = sorted(str(p.relative_to(store.bucket_folder)) for p in (store.bucket_folder / "c").rglob("*"))
    legacy_objects = sorted(str(p.relative_to(legacy.folder)) for p in legacy.bucket_folder.rglob("*") if p.is_file())
    results |= {name: finished(run) for name, run in second_round.items()}

    winner = "a" if results["a"].code == 0 else "rival"
    # a read the segments in the bucket, b those in the checkout: the same files under two names.
    compare = subprocess.run(
        [sys.executable, "-m", "tests.s3_tables", str(work / f"{winner}.toml"), f"s3a://{BUCKET}/a",
         shipped.warehouse, segments, f"file:{shipped.segment_paths[0]}"],
        capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, **credentials},
        timeout=COMPARE_TIMEOUT_SECONDS,
    )  # fmt: skip
    (work / "shells").mkdir()
    shells = read_with_the_shells(work / "shells", work / f"{winner}.toml", SHIPPED_CONF, TIMELINE_QUERY, credentials)
    # The third job on the shipped metastore, once the Thrift server that held it has stopped.
    forget = Run.start("forget", SHIPPED_CONF, work / "forget.out", credentials, "--source-file", FORGOTTEN_SEGMENT)
    results["forget"] = finished(forget)
    return {
        "shells": shells,
        "metastores": [work / f"metastore-{winner}", shipped.warehouse_dir],
        "results": results,
        "killed_at": killed_at,
        "winner": winner,
        "compare": compare,
        "credentials": credentials,
        "wrong_secret": wrong_secret[SECRET_KEY_ENV],
        "warehouse_a_after_failures": warehouse_a_after_failures,
        "legacy_objects": legacy_objects,
        "c_objects": c_objects,
        "not_s3_requests": web.requests,
        "not_s3_metastore": work / "metastore-not-s3",
        "endpoint": store.endpoint,
    }


def compared(s3) -> dict:
    assert s3["compare"].returncode == 0, s3["compare"].stderr[-3000:]
    return json.loads(s3["compare"].stdout.strip().splitlines()[-1])


def test_a_wrong_endpoint_fails_in_bounded_time_naming_the_store(s3):
    outcome = s3["results"]["bad_endpoint"]
    assert outcome.code == 1, outcome.output[-2000:]
    assert "cannot use s3a://groupscope at the S3 endpoint http://127.0.0.1:" in outcome.output
    assert "Nothing was written" in outcome.output and "Traceback" not in outcome.output
    assert outcome.seconds < FAILURE_BOUND_SECONDS, f"took {outcome.seconds:.0f} s"


def test_an_endpoint_that_answers_http_but_is_not_s3_fails_in_one_line_before_the_metastore(s3):
    # S3A reads the server's 404s as absent objects, so the reachability check passes; the session's lock
    # store probe is its first write, before the metastore's CREATE DATABASE would put a folder marker.
    outcome = s3["results"]["not_s3"]
    assert outcome.code == 1, outcome.output[-2000:]
    failed = [line for line in outcome.output.splitlines() if "cannot write the run lock to s3a://groupscope" in line]
    assert len(failed) == 1 and "Status Code: 501" in failed[0] and "Nothing was written" in failed[0], outcome.output
    assert "Traceback" not in outcome.output and "\tat " not in outcome.output, outcome.output[-3000:]
    writes = [path for method, path in s3["not_s3_requests"] if method not in ("GET", "HEAD")]
    assert writes and all(path.endswith(".conditional-write-probe") for path in writes), s3["not_s3_requests"]
    assert not (s3["not_s3_metastore"] / "metastore_db").exists(), "the embedded metastore was opened"
    assert outcome.seconds < FAILURE_BOUND_SECONDS, f"took {outcome.seconds:.0f} s"


def test_wrong_credentials_fail_naming_the_store_and_no_secret_in_message_or_log(s3):
    outcome = s3["results"]["bad_credentials"]
    assert outcome.code == 1, outcome.output[-2000:]
    assert f"cannot use s3a://groupscope at the S3 endpoint {s3['endpoint']}" in outcome.output
    assert "403" in outcome.output or "Forbidden" in outcome.output or "Signature" in outcome.output
    assert outcome.seconds < FAILURE_BOUND_SECONDS, f"took {outcome.seconds:.0f} s"
    assert outcome.logs, "the failed run's Spark log was found and read"
    for secret in (s3["wrong_secret"], s3["credentials"][SECRET_KEY_ENV]):
        assert secret not in outcome.output and secret not in outcome.logs


def test_failed_runs_wrote_nothing_and_the_next_good_run_is_unaffected(s3):
    # Both failed runs were aimed at warehouse a, which the next runs then filled.
    assert s3["warehouse_a_after_failures"] == []
    assert s3["results"][s3["winner"]].code == 0


def test_a_store_without_conditional_writes_is_refused_saying_why(s3):
    outcome = s3["results"]["unguarded"]
    assert outcome.code == 1, outcome.output[-2000:]
    assert "does not support conditional writes" in outcome.output
    assert "refusing to run unguarded" in outcome.output and "Traceback" not in outcome.output
    # The session's probe refused the store before its metastore made the database folder: no table, no
    # lock, no probe left.
    assert not [name for name in s3["legacy_objects"] if "_delta_log" in name or "lock" in name or "probe" in name]


def test_a_store_declared_without_conditional_writes_is_refused_saying_why(s3):
    outcome = s3["results"]["declared_unconditional"]
    assert outcome.code == 1, outcome.output[-2000:]
    assert "fs.s3a.create.conditional.enabled is false" in outcome.output and "Traceback" not in outcome.output
    assert not [name for name in s3["c_objects"] if "_delta_log" in name or "lock" in name or "probe" in name]


def test_two_nightlies_at_once_on_s3_one_runs_one_is_refused(s3):
    codes = sorted(s3["results"][name].code for name in ("a", "rival"))
    assert codes == [0, EXIT_BUSY], [s3["results"][name].output[-2000:] for name in ("a", "rival")]
    loser = s3["results"]["rival" if s3["winner"] == "a" else "a"]
    assert "another groupscope run holds" in loser.output and "Traceback" not in loser.output
    assert "s3a://groupscope/a/_groupscope/locks/" in loser.output
    assert "check: raw 170 = decoded 170 + quarantined 0" in s3["results"][s3["winner"]].output


def test_a_nightly_killed_and_rerun_on_s3_equals_an_uninterrupted_one(s3):
    assert "offset_commits: written" in s3["killed_at"], s3["killed_at"]
    rerun = s3["results"]["b_rerun"]
    assert rerun.code == 0, rerun.output[-2000:]
    comparison = compared(s3)
    assert len(comparison["tables"]) >= 15 and "raw_records" in comparison["tables"]
    assert comparison["differing"] == []


def test_the_documented_setup_runs_job_after_job_on_its_shipped_metastore(s3):
    # Derby 10.16 failed to re-open warehouse-s3-metastore/metastore_db when the job's Derby home was the
    # checkout's warehouse/, a prefix of its path: every job after the first died in Derby's boot.
    assert s3["results"]["b_rerun"].code == 0, s3["results"]["b_rerun"].output[-3000:]
    forget = s3["results"]["forget"]
    assert forget.code == 0, forget.output[-3000:]
    assert re.search(r"\] forget: [1-9][\d,]* raw record\(s\) deleted", forget.output), forget.output[-3000:]
    assert "Traceback" not in forget.output


def test_the_sql_views_read_the_tables_on_s3(s3):
    views = compared(s3)["views"]
    assert sorted(views) == sorted(VIEWS)
    for name in ("rebalance_timeline", "group_health", "current_assignment", "current_lag"):
        assert views[name] > 0, views


def test_no_run_writes_the_secret_to_its_output_or_logs(s3):
    secret = s3["credentials"][SECRET_KEY_ENV]
    for name, outcome in s3["results"].items():
        assert secret not in outcome.output and secret not in outcome.logs, name


def test_spark_sql_on_s3_prints_the_rows_a_job_s_session_reads(s3):
    shells = s3["shells"]
    print(f"spark-sql beside the Thrift server and beeline: {shells.seconds:.0f} s")  # shown with pytest -rP
    assert shells.spark_sql_code == 0, shells.spark_sql_output[-3000:]
    expected = compared(s3)["timeline"]
    assert expected, "the view has no rows: the comparison would prove nothing"
    assert sorted(printed_rows(shells.spark_sql_output, TIMELINE_HEADER)) == expected


def test_spark_sql_s_driver_listens_on_loopback_only(s3):
    # The tests' SPARK_LOCAL_IP was left out: ./spark-sql.sh binds its local driver itself (issue 71 §2).
    listening = s3["shells"].spark_sql.listening
    assert listening, "no listening socket of spark-sql's processes was seen"
    assert {host for host, _ in listening} == {"127.0.0.1"}, listening


def test_beeline_reads_the_tables_on_s3_through_the_thrift_server(s3):
    # The server opened warehouse b (killed and rerun), whose tables equal a's row by row (compared above).
    beeline = s3["shells"].beeline
    assert beeline.returncode == 0, beeline.stdout + beeline.stderr[-3000:]
    assert sorted(printed_rows(beeline.stdout, TIMELINE_HEADER)) == compared(s3)["timeline"]


def test_the_sql_shells_get_the_secret_through_their_environment_only(s3):
    secret, shells = s3["credentials"][SECRET_KEY_ENV], s3["shells"]
    for watched, main_class in ((shells.spark_sql, "SparkSQLCLIDriver"), (shells.thrift, "HiveThriftServer2")):
        # The JVM's own command line was seen, and names the variable where a job's session holds the value.
        assert f"fs.s3a.secret.key=${{env.{SECRET_KEY_ENV}}}" in watched.jvm_command_line(main_class)
        assert not [line for line in watched.command_lines if secret in line]
    outputs = [shells.spark_sql_output, shells.thrift.process.log.read_text(errors="replace")]
    outputs.append(shells.beeline.stdout + shells.beeline.stderr)
    assert all(secret not in text for text in outputs)
    metastore_files = [path for folder in s3["metastores"] for path in folder.rglob("*") if path.is_file()]
    assert metastore_files and all(secret.encode() not in path.read_bytes() for path in metastore_files)
