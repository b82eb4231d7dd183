"""Spark Connect without a server: the settings refused before anything starts, and the run lock a Connect
client takes through its own filesystem (jobs/connect_files.py), with the classic lock's rules."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from jobs.config import ConfigError, load_config
from jobs.connect import check_remote_settings, endpoint
from jobs.connect_files import LocalRunLock
from jobs.locks import RunRefused, lock_path
from tests.conftest import REPO_ROOT


def config_with(tmp_path, **sections):
    return load_config(overrides={"storage": {"warehouse_dir": str(tmp_path / "warehouse")}, **sections})


def test_the_endpoint_is_read_from_an_sc_address():
    assert endpoint("sc://10.0.0.7:15010/;user_id=me") == ("10.0.0.7", 15010)
    assert endpoint("sc://connect.example") == ("connect.example", 15002)


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        ({"spark": {"remote": "http://127.0.0.1:15002"}}, "write sc://host:port"),
        ({"spark": {"remote": "sc://127.0.0.1:15002"}, "capture": {"bootstrap_servers": "b:9092"}}, "live capture"),
        (
            {
                "spark": {"remote": "sc://127.0.0.1:15002"},
                "storage": {"warehouse_dir": "s3a://b/w", "metastore_dir": "m"},
            },
            "s3a://",
        ),
    ],
)
def test_what_a_connect_client_cannot_do_is_refused_naming_it(tmp_path, sections, named):
    config = load_config(overrides=sections)
    with pytest.raises(ConfigError, match=named):
        check_remote_settings(config)


def test_the_launcher_refuses_a_wrong_address_in_one_line_with_exit_2(tmp_path):
    conf = tmp_path / "bad.toml"
    conf.write_text('[spark]\nremote = "127.0.0.1:15002"\n')
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "check", "nightly", "--conf", str(conf)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == "", result
    assert result.stderr.strip().splitlines() == [
        "groupscope: spark.remote '127.0.0.1:15002' is not a Spark Connect address: write sc://host:port"
    ]


def test_the_launcher_names_the_server_a_connect_run_goes_to(tmp_path):
    conf = tmp_path / "connect.toml"
    conf.write_text('[spark]\nremote = "sc://127.0.0.1:15002"\n')
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "check", "nightly", "--conf", str(conf)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (0, "remote sc://127.0.0.1:15002\n"), result


def test_one_connect_run_holds_the_lock_and_a_second_is_refused_until_it_releases(tmp_path):
    config = config_with(tmp_path)
    first = LocalRunLock(None, config, "nightly-1", "nightly")
    first.acquire()
    second = LocalRunLock(None, config, "nightly-2", "nightly")
    with pytest.raises(RunRefused, match=r"another groupscope run holds cluster 'sample'.*nightly run nightly-1"):
        second.acquire()
    first.release()
    second.acquire()
    assert second.took_over is None
    second.release()
    assert not os.path.exists(lock_path(config))


def test_a_dead_runs_lock_and_a_torn_one_are_taken_over(tmp_path):
    config = config_with(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    holder = LocalRunLock(None, config, "nightly-dead", "nightly")
    holder.holder = holder.holder.__class__(**{**holder.holder.__dict__, "pid": dead.pid})
    holder.acquire()
    taker = LocalRunLock(None, config, "nightly-next", "nightly")
    taker.acquire()
    assert taker.took_over is not None and taker.took_over.run_id == "nightly-dead"
    taker.release()
    # Created and never written (a run killed between the two), past the grace minute.
    path = lock_path(config)
    open(path, "wb").close()
    os.utime(path, (time.time() - 120, time.time() - 120))
    after_torn = LocalRunLock(None, config, "nightly-after", "nightly")
    after_torn.acquire()
    assert after_torn.took_over is not None and after_torn.took_over.run_id == "(starting)"
    after_torn.release()
