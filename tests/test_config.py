"""Configuration that cannot work is refused before any session starts, with the key and the reason."""

from __future__ import annotations

import pytest

from jobs.config import parse_config


def test_the_quick_start_configuration_loads():
    config = parse_config([], "test")
    assert (config.database, config.cluster) == ("groupscope", "sample")
    assert config.table("raw_records") == "groupscope.raw_records"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--database", "groupscope; DROP DATABASE x"],
            "catalog.database 'groupscope; DROP DATABASE x' is not a plain SQL name",
        ),
        (["--database", "1st"], "is not a plain SQL name"),
        (["--database", ""], "is not a plain SQL name"),
        (["--cluster", ""], "input.cluster '' must be 1 to 255 printable characters"),
        (["--cluster", "prod\n"], "must be 1 to 255 printable characters"),
    ],
)
def test_an_unusable_name_exits_2_with_the_reason(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_config(flags, "test")
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_any_printable_cluster_name_is_data():
    assert parse_config(["--cluster", "eu-west/prod 'blue'"], "test").cluster == "eu-west/prod 'blue'"
