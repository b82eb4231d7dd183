"""The README's environment files to start from (conf/examples/) load as they are, so they cannot rot: a
setting renamed or removed from conf/defaults.toml fails here, not for the user who copies them."""

from __future__ import annotations

from pathlib import Path

from jobs.config import REPO_ROOT, load_config
from jobs.kafka_security import capture_configured, kafka_connection

EXAMPLES = REPO_ROOT / "conf" / "examples"


def test_the_live_capture_example_connects_with_its_secrets_from_the_environment():
    config = load_config(EXAMPLES / "live.toml")
    assert config.gold_settings().offsets_retention_minutes == 10_080
    assert capture_configured(config) and config.segment_paths == ()
    secrets = {"GROUPSCOPE_KAFKA_JAAS": "jaas line", "GROUPSCOPE_TRUSTSTORE_PASSWORD": "truststore password"}
    connection = kafka_connection(config, secrets)
    assert connection.properties["sasl.jaas.config"] == "jaas line"
    assert connection.properties["security.protocol"] == "SASL_SSL"
    assert connection.secret_values == ("jaas line", "truststore password")


def test_the_segments_example_reads_a_log_directory_and_connects_to_nothing():
    config = load_config(EXAMPLES / "segments.toml")
    assert config.gold_settings().offsets_retention_minutes == 10_080
    assert not capture_configured(config)
    assert config.segment_paths == ("/var/lib/kafka/data",)


def test_every_example_is_named_in_the_readme():
    readme = (REPO_ROOT / "README.md").read_text()
    examples = sorted(path.relative_to(REPO_ROOT) for path in EXAMPLES.glob("*.toml"))
    assert examples == [Path("conf/examples/live.toml"), Path("conf/examples/segments.toml")]
    assert all(f"({example})" in readme for example in examples)
