"""[storage.s3] without Spark: what a run on S3 reads from its configuration and environment, and the
refusals that come before any JVM starts (tests/integration/test_s3.py runs the real thing)."""

from __future__ import annotations

import pytest

from jobs.config import ConfigError, load_config
from jobs.locks import lock_path
from jobs.object_store import credentials, hadoop_settings, pyarrow_environment, redact, s3_paths

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
