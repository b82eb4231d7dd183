"""The run lock's conditional-write probe (jobs/lock_store.py) against an endpoint that answers HTTP but is
not S3 (issue 71 §4): a real http.server on loopback, reached through the session's real S3A. S3A reads the
server's 404s as "no such object", so the run's reachability check passes; the probe's first put is the
first request that fails, and it must fail as one line, not as a Java traceback."""

from __future__ import annotations

import pytest

from jobs.lock_store import EXIT_FAILED, UnguardedStore, require_conditional_writes
from tests.web_server import WebServer


def s3a_filesystem(spark, endpoint: str, path: str):
    """S3A on `endpoint`, with conf/s3.toml's bounded retries, uncached (the session's cache keeps buckets)."""
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    settings = {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key": "not-a-key",
        "fs.s3a.secret.key": "not-a-secret",
        "fs.s3a.attempts.maximum": "2",
        "fs.s3a.retry.limit": "2",
        "fs.s3a.retry.interval": "500ms",
        "fs.s3a.create.conditional.enabled": "true",
        "fs.s3a.impl.disable.cache": "true",
    }
    for key, value in settings.items():
        conf.set(key, value)
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(conf), hadoop_path


def test_a_web_server_that_is_not_s3_fails_the_lock_probe_in_one_line(spark, tmp_path):
    web = WebServer(tmp_path)
    try:
        fs, lock = s3a_filesystem(spark, web.endpoint, "s3a://groupscope/warehouse/_groupscope/locks/any.lock")
        assert not fs.exists(lock), "S3A reads the server's 404 as an absent object: the reachability check passes"
        with pytest.raises(UnguardedStore) as refused:
            require_conditional_writes(fs, lock, "run-1")
    finally:
        web.stop()
    message = str(refused.value)
    assert refused.value.code == EXIT_FAILED
    assert message.startswith("cannot write the run lock to s3a://groupscope: S3Exception: "), message
    assert "Status Code: 501" in message and "Nothing was written" in message
    assert "\n" not in message and "at org.apache" not in message
