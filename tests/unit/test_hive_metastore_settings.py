"""storage.metastore = "hive" without Spark: the client settings a session and the SQL launchers get, and the
refusals that come before any JVM starts (tests/integration/test_hive_metastore.py runs the real service)."""

from __future__ import annotations

import pytest

from jobs.config import ConfigError, load_config
from jobs.hive_metastore import check_metastore_settings, hive_settings
from jobs.sql_launch import launch_arguments


def hive_config(tmp_path, hive: dict | None = None, spark_conf: dict | None = None, metastore: str = "hive"):
    storage = {"warehouse_dir": str(tmp_path / "warehouse"), "metastore": metastore, "hive": hive or {}}
    return load_config(overrides={"storage": storage, "spark": {"conf": spark_conf or {}}})


def conf_arguments(arguments: list[str]) -> dict[str, str]:
    pairs = [arguments[i + 1] for i, argument in enumerate(arguments) if argument == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_client_waits_a_bounded_time_for_the_named_service(tmp_path):
    settings = hive_settings(hive_config(tmp_path, {"uris": "thrift://meta.example:9083", "timeout_s": 12}))
    assert settings["spark.hadoop.hive.metastore.uris"] == "thrift://meta.example:9083"
    assert settings["spark.hadoop.hive.metastore.client.socket.timeout"] == "12s"  # Hive's default: 600 s
    assert settings["spark.hadoop.hive.metastore.connect.retries"] == "2"
    assert settings["spark.hadoop.hive.metastore.failure.retries"] == "1"
    assert settings["spark.sql.catalogImplementation"] == "hive"


def test_the_older_spark_conf_setting_still_names_the_service(tmp_path):
    config = hive_config(tmp_path, spark_conf={"spark.hadoop.hive.metastore.uris": "thrift://old.example:9083"})
    assert hive_settings(config)["spark.hadoop.hive.metastore.uris"] == "thrift://old.example:9083"


@pytest.mark.parametrize(
    ("hive", "metastore", "refusal"),
    [
        ({}, "hive", "set storage.hive.uris"),
        ({"uris": "http://meta.example:9083"}, "hive", "is not thrift://host:port"),
        ({"uris": "thrift://meta.example:9083", "timeout_s": 0}, "hive", "timeout_s 0"),
        ({}, "derby", "storage.metastore 'derby' is not one of embedded, hive"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_before_spark_starts(tmp_path, hive, metastore, refusal):
    with pytest.raises(ConfigError, match=refusal):
        check_metastore_settings(hive_config(tmp_path, hive, metastore=metastore))


def test_the_sql_launchers_lock_only_the_embedded_metastore(tmp_path):
    service = hive_config(tmp_path, {"uris": "thrift://127.0.0.1:9083"})
    locked, arguments = launch_arguments(service)
    assert locked == ""  # a service serves the shell, the Thrift server and the jobs at once
    settings = conf_arguments(arguments)
    assert settings["spark.hadoop.hive.metastore.uris"] == "thrift://127.0.0.1:9083"
    assert not any(key.startswith("spark.hadoop.javax.jdo") for key in settings)  # no Derby
    locked, arguments = launch_arguments(hive_config(tmp_path, metastore="embedded"))
    assert locked == str(tmp_path / "warehouse")
    assert "jdbc:derby:" in conf_arguments(arguments)["spark.hadoop.javax.jdo.option.ConnectionURL"]


def test_the_nightly_summary_opens_the_run_s_own_environment_in_the_sql_shell(tmp_path):
    from jobs.steps.nightly import _environment_option

    hive = tmp_path / "hive.toml"
    hive.write_text('[storage]\nmetastore = "hive"\n\n[storage.hive]\nuris = "thrift://127.0.0.1:9083"\n')
    assert _environment_option(load_config(hive)) == f" --conf {hive}"
    assert _environment_option(load_config()) == ""  # conf/local.toml: the shell's default
