"""[storage.s3] without Spark: what a run on S3, and the SQL shells on its warehouse (jobs/sql_launch.py),
read from the configuration and environment, and the refusals that come before any JVM starts
(tests/integration/test_s3.py runs the real thing)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jobs.config import REPO_ROOT, ConfigError, load_config
from jobs.locks import lock_path
from jobs.object_store import (
    NO_SUCH_BUCKET,
    credential_references,
    credentials,
    hadoop_settings,
    pyarrow_environment,
    redact,
    s3_paths,
)
from jobs.sql_launch import launch_arguments
from jobs.sql_launch import main as sql_launch
from tests.s3_runs import SECRET_KEY_ENV, new_credentials, store_settings
from tests.web_server import WebServer

S3_STORAGE = {
    "warehouse_dir": "s3a://lake/warehouse",
    "metastore_dir": "/tmp/groupscope-metastore",
    "s3": {
        "endpoint": "http://127.0.0.1:9090",
        "region": "us-east-1",
        "path_style_access": True,
        "access_key_env": "TEST_S3_KEY",
        "secret_key_env": "TEST_S3_SECRET",
    },
}


def s3_config(**sections):
    return load_config(overrides={"storage": S3_STORAGE, **sections})


def test_the_places_on_s3_are_the_warehouse_inputs_and_checkpoint():
    config = s3_config(
        input={"segment_paths": ["s3a://logs/broker-1", "/local/logs"]},
        capture={"checkpoint_dir": "s3a://lake/checkpoints"},
    )
    assert s3_paths(config) == ["s3a://lake/warehouse", "s3a://logs/broker-1", "s3a://lake/checkpoints"]
    assert config.warehouse == "s3a://lake/warehouse"
    assert str(config.warehouse_dir) == "/tmp/groupscope-metastore"


def test_credentials_come_from_the_named_variables_and_a_missing_one_is_named_not_shown():
    config = s3_config()
    found = credentials(config, {"TEST_S3_KEY": "key-id", "TEST_S3_SECRET": "s3cr3t-value"})
    assert found == {"access_key": "key-id", "secret_key": "s3cr3t-value"}
    with pytest.raises(ConfigError, match="TEST_S3_SECRET") as missing:
        credentials(config, {"TEST_S3_KEY": "key-id"})
    assert "key-id" not in str(missing.value)


def test_settings_carry_the_endpoint_the_log_store_and_the_credentials():
    config = s3_config()
    secrets = {"access_key": "key-id", "secret_key": "s3cr3t-value"}
    conf = hadoop_settings(config, secrets)
    assert conf["spark.delta.logStore.s3a.impl"] == "io.delta.storage.S3SingleDriverLogStore"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9090"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "s3cr3t-value"
    workers = pyarrow_environment(config, secrets)
    assert workers["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9090" and workers["AWS_SECRET_ACCESS_KEY"] == "s3cr3t-value"
    assert "AWS_SESSION_TOKEN" not in workers


def test_redact_removes_every_credential_value():
    assert redact("denied for key-id with s3cr3t-value", ["key-id", "s3cr3t-value", ""]) == "denied for *** with ***"


def test_a_warehouse_on_s3_needs_a_local_metastore_dir_and_the_s3a_scheme():
    with pytest.raises(ConfigError, match="metastore_dir"):
        load_config(overrides={"storage": {**S3_STORAGE, "metastore_dir": ""}})
    with pytest.raises(ConfigError, match="s3a://"):
        load_config(overrides={"storage": {**S3_STORAGE, "warehouse_dir": "s3://lake/warehouse"}})


def test_on_s3_the_run_lock_covers_the_database_not_one_cluster():
    # Delta's S3 log store allows one writing driver per table, and every cluster shares the tables.
    on_s3 = [lock_path(s3_config(input={"cluster": cluster})) for cluster in ("east", "west")]
    assert on_s3[0] == on_s3[1] and on_s3[0].startswith("s3a://lake/warehouse/_groupscope/locks/")
    local = [lock_path(load_config(overrides={"input": {"cluster": cluster}})) for cluster in ("east", "west")]
    assert local[0] != local[1]


def conf_arguments(arguments: list[str]) -> dict[str, str]:
    pairs = [arguments[i + 1] for i, argument in enumerate(arguments) if argument == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_sql_shells_get_the_jobs_s3a_settings_with_the_credentials_by_name_only(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_S3_KEY", "key-id")
    monkeypatch.setenv("TEST_S3_SECRET", "s3cr3t-value")
    config = load_config(overrides={"storage": {**S3_STORAGE, "metastore_dir": str(tmp_path / "metastore")}})
    locked, arguments = launch_arguments(config)
    settings = conf_arguments(arguments)
    jobs = hadoop_settings(config, credentials(config))
    # Every setting a job's session gets, the same, but the keys: those name the variables, never hold them.
    for key in jobs.keys() - {"spark.hadoop.fs.s3a.access.key", "spark.hadoop.fs.s3a.secret.key"}:
        assert settings[key] == jobs[key], key
    assert settings["spark.hadoop.fs.s3a.access.key"] == "${env.TEST_S3_KEY}"
    assert settings["spark.hadoop.fs.s3a.secret.key"] == "${env.TEST_S3_SECRET}"
    assert not any("s3cr3t-value" in argument or "key-id" in argument for argument in arguments)
    assert settings["spark.sql.warehouse.dir"] == "s3a://lake/warehouse"
    # Derby in the local metastore_dir, locked where a job locks it (jobs/session.py hold_embedded_metastore).
    assert locked == str(config.warehouse_dir) == str(tmp_path / "metastore")
    assert (
        f"databaseName={tmp_path / 'metastore' / 'metastore_db'}"
        in settings["spark.hadoop.javax.jdo.option.ConnectionURL"]
    )
    assert settings["spark.driver.extraJavaOptions"].startswith(f"-Dderby.system.home={tmp_path / 'metastore'} ")


def test_the_job_launcher_makes_conf_s3_toml_s_metastore_folder_derby_s_home():
    # Not the checkout's warehouse/, a prefix of warehouse-s3-metastore/'s path: Derby then failed to
    # re-open the database, in every job after the first (issue 71 §1).
    secrets = {"GROUPSCOPE_S3_ACCESS_KEY": "key-id", "GROUPSCOPE_S3_SECRET_KEY": "s3cr3t-value"}
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "check", "nightly", "--conf", "conf/s3.toml"],
        cwd=REPO_ROOT, env={**os.environ, **secrets}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    home = REPO_ROOT / "warehouse-s3-metastore"
    assert (result.returncode, result.stdout) == (0, f"driver_options -Dderby.system.home={home}\n"), result


def test_a_session_token_is_named_too_and_selects_s3a_s_temporary_credentials(tmp_path):
    storage = {**S3_STORAGE, "metastore_dir": str(tmp_path), "s3": {**S3_STORAGE["s3"], "session_token_env": "TOKEN"}}
    config = load_config(overrides={"storage": storage})
    references = credential_references(config, {"TEST_S3_KEY": "k", "TEST_S3_SECRET": "s", "TOKEN": "t0ken"})
    assert references == {
        "access_key": "${env.TEST_S3_KEY}",
        "secret_key": "${env.TEST_S3_SECRET}",
        "session_token": "${env.TOKEN}",
    }
    settings = hadoop_settings(config, references)
    assert settings["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(".TemporaryAWSCredentialsProvider")
    assert settings["spark.hadoop.fs.s3a.session.token"] == "${env.TOKEN}"


def test_the_sql_shells_refuse_a_missing_variable_or_a_value_hadoop_would_expand(tmp_path):
    config = load_config(overrides={"storage": {**S3_STORAGE, "metastore_dir": str(tmp_path)}})
    with pytest.raises(ConfigError, match=r"TEST_S3_SECRET .* is not set"):
        credential_references(config, {"TEST_S3_KEY": "key-id"})
    with pytest.raises(ConfigError, match=r"TEST_S3_SECRET .* cannot be handed") as expanded:
        credential_references(config, {"TEST_S3_KEY": "key-id", "TEST_S3_SECRET": "ab${user.name}cd"})
    assert "ab${user.name}cd" not in str(expanded.value)


def test_sql_launch_exits_2_with_one_line_naming_the_missing_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEST_S3_KEY", "key-id")
    monkeypatch.delenv("TEST_S3_SECRET", raising=False)
    environment = tmp_path / "s3.toml"
    environment.write_text(
        f'[storage]\nwarehouse_dir = "s3a://lake/warehouse"\nmetastore_dir = "{tmp_path / "metastore"}"\n\n'
        '[storage.s3]\naccess_key_env = "TEST_S3_KEY"\nsecret_key_env = "TEST_S3_SECRET"\n'
    )
    with pytest.raises(SystemExit) as exited:
        sql_launch(["--conf", str(environment)])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "groupscope: environment variable TEST_S3_SECRET ([storage.s3] secret_key_env) is not set"
    ]


@pytest.mark.parametrize("launcher", ["spark-sql.sh", "scripts/thriftserver.sh"])
def test_the_sql_launchers_refuse_a_web_server_that_is_not_s3_in_one_line_before_their_jvm(launcher, tmp_path):
    # Their JVM's first request to the store would be the metastore's, inside Hive (issue 71 §4 a); a job's
    # session checks inside its own JVM instead (tests/integration/test_s3.py).
    credentials = new_credentials()
    web = WebServer(tmp_path / "web")  # answers HTTP (404 to GET and HEAD, 501 to PUT), and is not S3
    environment = tmp_path / "not-s3.toml"
    environment.write_text(store_settings(web.endpoint, "s3a://groupscope/warehouse", tmp_path / "metastore"))
    try:
        launched = subprocess.run(
            [str(REPO_ROOT / launcher), "--conf", str(environment)],
            cwd=REPO_ROOT, env={**os.environ, **credentials}, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        web.stop()
    assert launched.returncode == 1, launched.stdout + launched.stderr
    assert launched.stderr.splitlines() == [
        f"groupscope: cannot use s3a://groupscope at the S3 endpoint {web.endpoint}: {NO_SUCH_BUCKET}. Nothing was "
        "written; check [storage.s3] (endpoint, region, path_style_access) and the credentials in the environment "
        "variables it names"
    ]
    assert launched.stdout == "" and credentials[SECRET_KEY_ENV] not in launched.stderr
    assert web.requests == [("HEAD", "/groupscope")]  # read only, and nothing after it: no JVM started
    assert not (tmp_path / "metastore" / "metastore_db").exists()
