"""Configuration that cannot work is refused before any session starts, with the key and the reason."""

from __future__ import annotations

import pytest

from jobs.command_line import parse_config, parser
from jobs.config import EXIT_USAGE


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


def _refusal(capsys, argv: list[str]) -> str:
    """The one line a mistaken command line gets; it must exit 2 and print no usage or traceback."""
    with pytest.raises(SystemExit) as exit_:
        parse_config(argv, "test")
    assert exit_.value.code == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_missing_configuration_file_is_named(capsys, tmp_path):
    line = _refusal(capsys, ["--conf", str(tmp_path / "prod.toml")])
    assert f"configuration file {tmp_path / 'prod.toml'} does not exist" in line


def test_a_misspelt_setting_is_refused_instead_of_ignored(capsys, tmp_path):
    env = tmp_path / "typo.toml"
    env.write_text('[input]\ncluster = "x"\nsegment_path = ["samples"]\n')
    assert "unknown setting 'input.segment_path'" in _refusal(capsys, ["--conf", str(env)])
    env.write_text("[gold]\nstorm_rebalances_per_hr = 3\n")
    assert "unknown [gold] settings ['storm_rebalances_per_hr']" in _refusal(capsys, ["--conf", str(env)])
    env.write_text('[capture.kafka]\n"security.protocol" = "SSL"\n[maintenance]\nvacuum_retain_hours = 24\n')
    assert parse_config(["--conf", str(env)], "test").section("maintenance")["vacuum_retain_hours"] == 24


def test_invalid_toml_is_one_line(capsys, tmp_path):
    env = tmp_path / "broken.toml"
    env.write_text("[input\n")
    assert "is not valid TOML" in _refusal(capsys, ["--conf", str(env)])


def test_a_date_that_is_not_one_says_the_format(capsys):
    assert "'2026-13-01' is not a date; write it as YYYY-MM-DD" in _refusal(capsys, ["--run-date", "2026-13-01"])


def test_a_missing_input_path_is_refused_before_any_run(capsys, tmp_path):
    line = _refusal(capsys, ["--segments", str(tmp_path / "nope")])
    assert f"{tmp_path / 'nope'} does not exist" in line
    assert parse_config(["--segments", "s3a://bucket/logs"], "test").segment_paths == ("s3a://bucket/logs",)


def test_an_unknown_option_is_one_line(capsys):
    assert "unrecognized arguments: --bogus" in _refusal(capsys, ["--bogus"])


def test_segments_with_no_path_is_refused_unless_another_input_is_left(capsys, tmp_path):
    line = _refusal(capsys, ["--segments"])
    assert line == (
        "groupscope: --segments was given no path, which leaves nothing to read: put the paths after it,"
        " or leave it out to read input.segment_paths and input.raw_table_paths"
    )
    # Cleared to read only a landed table (bench/pipeline.py does), it is what the user meant.
    config = parse_config(["--segments", "--raw-table", str(tmp_path)], "test")
    assert (config.segment_paths, config.raw_table_paths) == ((), (str(tmp_path),))


def test_a_path_list_written_as_one_string_is_refused_with_the_list_to_write(capsys, tmp_path):
    env = tmp_path / "string.toml"
    env.write_text('[input]\nsegment_paths = "samples/x"\n')
    line = _refusal(capsys, ["--conf", str(env)])
    assert line == f"groupscope: {env}: " + (
        'input.segment_paths must be a list of strings, e.g. segment_paths = ["samples/x"]'
    )
    env.write_text("[end_offsets]\nfiles = [1]\n")
    assert "end_offsets.files must be a list of strings" in _refusal(capsys, ["--conf", str(env)])


def test_forget_takes_only_what_it_uses_and_every_job_lists_verbose(capsys):
    forget_help = parser("forget", "forget").format_help()
    for option in ("--source-file", "--capture-run", "--conf", "--cluster", "--verbose"):
        assert option in forget_help
    for option in ("--segments", "--raw-table", "--run-date", "--full"):
        assert option not in forget_help
    assert "--verbose" in parser("nightly", "nightly").format_help()
    with pytest.raises(SystemExit) as exit_:
        parse_config(["--source-file", "x.log", "--segments", "samples"], "forget", "forget")
    assert exit_.value.code == EXIT_USAGE
    assert "unrecognized arguments: --segments samples" in capsys.readouterr().err
