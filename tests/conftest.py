"""Shared fixtures: one SparkSession for the whole run, built by the jobs' own factory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.small_data import SHORT_JVM_OPTIONS, SMALL_DATA_SPARK_CONF, SUBMIT_OPTIONS_VARIABLE

REPO_ROOT = Path(__file__).resolve().parent.parent
# Real __consumer_offsets data from public repositories (a copy of shared/fixtures/public; see MANIFEST.tsv).
PUBLIC_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "public"


# Runs of the whole nightly job that start in the background with the session, in this order, each after
# the one before: the tests that wait for them go last, so that the other tests run meanwhile.
BACKGROUND_RUNS = ("local_nightly", "crash_run", "cluster_nightly")

# Every Spark JVM the tests start as a process inherits this environment (tests/small_data.py); the
# session fixture below builds its own long-lived JVM without it. A pytest-xdist worker inherits the
# environment its controller's import of this module set: what it inherited is the rest.
_inherited_submit_options = os.environ.get(SUBMIT_OPTIONS_VARIABLE, "").replace(SHORT_JVM_OPTIONS, "").strip() or None
os.environ[SUBMIT_OPTIONS_VARIABLE] = f"{_inherited_submit_options or ''} {SHORT_JVM_OPTIONS}".strip()


def pytest_collection_modifyitems(items):
    def waits_for(item) -> int:
        return max((BACKGROUND_RUNS.index(run) + 1 for run in BACKGROUND_RUNS if run in item.fixturenames), default=0)

    # A module moves as a whole, as late as its latest test must go: pytest tears a module's fixtures down
    # when the next test is another module's, so a module split in two builds them twice (a Spark Connect
    # server and its nightly cost two minutes).
    module_waits: dict[Path, int] = {}
    for item in items:
        module_waits[item.path] = max(module_waits.get(item.path, 0), waits_for(item))
    items.sort(key=lambda item: module_waits[item.path])  # stable: file order otherwise


def _collected_tests_use(request, fixture: str) -> bool:
    return any(fixture in item.fixturenames for item in request.session.items)


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark_config(warehouse):
    from jobs.config import load_config

    return load_config(
        overrides={
            "storage": {"warehouse_dir": str(warehouse)},
            "catalog": {"database": "groupscope_test"},
            "spark": {
                "conf": {
                    **SMALL_DATA_SPARK_CONF,
                    # One session serves the whole suite, which now holds the incremental nights' many Delta
                    # tables and checkpoints too: at the default 1 GiB the CI run ran out of heap (18 errors).
                    "spark.driver.memory": "3g",
                }
            },
            "input": {"cluster": "test", "segment_paths": []},
        }
    )


@pytest.fixture(scope="session")
def spark(spark_config):
    from jobs.session import build_session

    short_jvm_options = os.environ.pop(SUBMIT_OPTIONS_VARIABLE)
    if _inherited_submit_options is not None:
        os.environ[SUBMIT_OPTIONS_VARIABLE] = _inherited_submit_options
    try:
        session = build_session(spark_config, "groupscope-tests")
    finally:
        os.environ[SUBMIT_OPTIONS_VARIABLE] = short_jvm_options
    yield session
    session.stop()


@pytest.fixture(scope="session")
def lab(spark):
    """Every lab capture's tables, in memory (see tests/lab_tables.py)."""
    from tests.lab_tables import all_captures, build_lab_tables

    return build_lab_tables(spark, all_captures())


@pytest.fixture(scope="session")
def local_nightly(tmp_path_factory):
    """`spark-submit.sh nightly` of the quickstart capture, and a rival started with it on the same
    warehouse (one must be refused): run once per session, in the background, for the standalone,
    Thrift server, SQL view, lock and crash tests."""
    # Imported when needed: tests that start no background run do not load its machinery (or pyspark).
    from tests.background_runs import local_nightly_run

    run = local_nightly_run(tmp_path_factory)
    yield run
    run.process.stop()
    run.rival.stop()


@pytest.fixture(scope="session", autouse=True)
def _local_nightly_started_with_the_session(request, tmp_path_factory):
    """The local nightly run takes minutes and the first test needing it would wait for all of them:
    started with the session (when a collected test needs it), it runs while the other tests do."""
    if not _collected_tests_use(request, "local_nightly"):
        yield
        return
    from tests.background_runs import local_nightly_run

    run = local_nightly_run(tmp_path_factory)
    yield
    run.process.stop()  # also when the tests that needed it were never reached (-x)
    run.rival.stop()


@pytest.fixture(scope="session")
def crash_run(local_nightly, tmp_path_factory):
    """A nightly run killed part-way and run again (tests/integration/test_crash_safety.py), in the background."""
    from tests.background_runs import CrashRunInBackground

    run = CrashRunInBackground(local_nightly, tmp_path_factory.mktemp("crash"))
    yield run
    run.stop()


@pytest.fixture(scope="session", autouse=True)
def _crash_run_started_with_the_session(request):
    """Started with the session, when a collected test needs it: it begins when the local nightly run
    ends, and runs while the other tests do."""
    if _collected_tests_use(request, "crash_run"):
        request.getfixturevalue("crash_run")
    yield


@pytest.fixture(scope="session")
def cluster_nightly(request, local_nightly, tmp_path_factory):
    """The nightly run on a standalone cluster (tests/integration/test_standalone_cluster.py), in the background,
    after the local run and the crash run when the session has one (which waits for the local run)."""
    from tests.background_runs import ClusterNightlyInBackground

    after = local_nightly.wait
    if _collected_tests_use(request, "crash_run"):
        after = request.getfixturevalue("crash_run").result
    run = ClusterNightlyInBackground(after, tmp_path_factory.mktemp("standalone"))
    yield run
    run.stop()


@pytest.fixture(scope="session", autouse=True)
def _cluster_nightly_started_with_the_session(request):
    if _collected_tests_use(request, "cluster_nightly"):
        request.getfixturevalue("cluster_nightly")
    yield
