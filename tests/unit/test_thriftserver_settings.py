"""[thriftserver] without Spark: the Thrift server's authentication as scripts/thriftserver.sh receives it
from jobs/sql_launch.py (issue 71 §2). The server itself, with the password check on, is
tests/integration/test_thriftserver.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.config import ConfigError, load_config
from jobs.sql_launch import PASSWORD_CHECK_CLASS, thrift_server_arguments
from jobs.sql_launch import main as sql_launch

PASSWORD_ON = {"thriftserver": {"authentication": "password", "user_env": "TEST_USER", "password_env": "TEST_PASSWORD"}}


def hiveconf(arguments: list[str]) -> dict[str, str]:
    pairs = [arguments[i + 1] for i, argument in enumerate(arguments) if argument == "--hiveconf"]
    return dict(pair.split("=", 1) for pair in pairs)


def password_environment_file(folder: Path) -> Path:
    """An environment file turning the password check on, with the variables TEST_USER and TEST_PASSWORD."""
    environment = folder / "thrift.toml"
    environment.write_text(
        f'[storage]\nwarehouse_dir = "{folder / "warehouse"}"\n\n[thriftserver]\nauthentication = "password"\n'
        'user_env = "TEST_USER"\npassword_env = "TEST_PASSWORD"\n'
    )
    return environment


def test_by_default_the_server_gets_no_authentication_so_any_password_is_accepted():
    assert thrift_server_arguments(load_config(), {}) == []


def test_with_a_password_the_server_checks_it_knowing_the_variables_by_name_only():
    environment = {"TEST_USER": "analyst", "TEST_PASSWORD": "pa55-value"}
    arguments = thrift_server_arguments(load_config(overrides=PASSWORD_ON), environment)
    assert hiveconf(arguments) == {
        "hive.server2.authentication": "CUSTOM",
        "hive.server2.custom.authentication.class": PASSWORD_CHECK_CLASS,
        "groupscope.thriftserver.user_env": "TEST_USER",
        "groupscope.thriftserver.password_env": "TEST_PASSWORD",
    }
    assert not [argument for argument in arguments if "pa55-value" in argument]


def test_an_unknown_authentication_is_refused_naming_the_choices():
    config = load_config(overrides={"thriftserver": {"authentication": "ldap"}})
    with pytest.raises(ConfigError, match=r"'ldap': write \"none\" or \"password\""):
        thrift_server_arguments(config, {})


def test_the_server_exits_2_in_one_line_when_a_variable_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEST_USER", "analyst")
    monkeypatch.setenv("TEST_PASSWORD", "")
    environment = password_environment_file(tmp_path)
    with pytest.raises(SystemExit) as exited:
        sql_launch(["--thrift-server", "--conf", str(environment)])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "groupscope: environment variable TEST_PASSWORD ([thriftserver] password_env) is not set, or is empty"
    ]


def test_spark_sql_gets_no_server_arguments(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEST_USER", "analyst")
    monkeypatch.setenv("TEST_PASSWORD", "pa55-value")
    environment = password_environment_file(tmp_path)
    sql_launch(["--conf", str(environment)])
    assert "--hiveconf" not in capsys.readouterr().out.split("\0")
