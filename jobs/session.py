"""The one place a SparkSession is built: Delta, the catalog, the warehouse, the jars, and the
decoder's Java function (registered here, so a missing jar fails a run at its start, not mid-decode).

Under `spark-submit.sh` the launcher has already set the master, the jars and Delta's extensions
(GROUPSCOPE_SUBMITTED=1); run directly (tests, `python -m jobs.x`) this sets them itself from the
jars scripts/bootstrap.sh fetched.
"""

from __future__ import annotations

import fcntl
import functools
import os
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from pyspark.sql import SparkSession

from jobs.config import REPO_ROOT, Config
from jobs.connect import build_remote_session
from jobs.embedded_metastore import embedded_metastore_conf
from jobs.hive_metastore import hive_settings, reach_metastore
from jobs.locks import RunRefused, prove_lock_store
from jobs.object_store import (
    check_reachable,
    configure_workers,
    credentials,
    hadoop_settings,
    pyarrow_environment,
    s3_paths,
)
from schemas.coordinator_records import OFFSET_COMMIT_VALUE
from transforms import silver

SPARK_JARS_DIR = REPO_ROOT / "jvm" / "spark" / "jars"
# Hadoop's S3A and the AWS SDK modules it calls (jvm/s3/pom.xml), loaded always: a class path entry
# costs nothing until an s3a:// path is used.
S3_JARS_DIR = REPO_ROOT / "jvm" / "s3" / "jars"


def spark_jars() -> list[str]:
    jars = sorted(str(path) for path in SPARK_JARS_DIR.glob("*.jar"))
    if not jars:
        raise RuntimeError(f"no Spark jars in {SPARK_JARS_DIR}: run scripts/bootstrap.sh job first")
    return jars + sorted(str(path) for path in S3_JARS_DIR.glob("*.jar"))


# Open for the life of the process: the OS drops an flock when its process ends, even on SIGKILL.
_held_metastores: dict[Path, TextIO] = {}


def hold_embedded_metastore(warehouse: Path) -> None:
    """Derby serves one process: a second one gets a clear refusal instead of Derby's boot errors."""
    warehouse = warehouse.resolve()
    if warehouse in _held_metastores:
        return
    handle = open(warehouse / ".embedded-metastore.lock", "a+")  # noqa: SIM115 - held until the process ends
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "a process that is just starting"
        handle.close()
        message = (
            f"another groupscope process is using the embedded metastore of {warehouse}: {holder}. Nothing was "
            "changed; run again when it has finished (a Hive metastore service lets jobs run side by side)"
        )
        print(message, file=sys.stderr, flush=True)
        raise RunRefused(message) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC\n")
    handle.flush()
    _held_metastores[warehouse] = handle


def build_session(config: Config, app_name: str) -> SparkSession:
    if config.remote:  # a Spark Connect server: it holds the warehouse, the metastore and the jars
        return build_remote_session(config, app_name)
    # The local directory: the warehouse, or beside an s3a:// warehouse the embedded metastore's home.
    warehouse = config.warehouse_dir
    warehouse.mkdir(parents=True, exist_ok=True)
    if config.metastore == "embedded":
        hold_embedded_metastore(warehouse)
    builder = SparkSession.builder.appName(app_name)
    on_s3 = bool(s3_paths(config))
    secrets = credentials(config) if on_s3 else {}
    settings: dict[str, str] = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.warehouse.dir": config.warehouse,
        "spark.sql.session.timeZone": "UTC",
        **(hadoop_settings(config, secrets) if on_s3 else {}),
        **config.spark_conf,
    }
    if config.metastore == "embedded":
        settings.update(embedded_metastore_conf(warehouse))
    else:
        settings.update({**hive_settings(config), **config.spark_conf})  # [spark.conf] may tune the client
    if os.environ.get("GROUPSCOPE_SUBMITTED") != "1":
        settings["spark.master"] = config.master
        settings["spark.jars"] = ",".join(spark_jars())
        # Python workers must run this interpreter (the venv), not whatever python3 is on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.enableHiveSupport().getOrCreate()
    if os.environ.get("GROUPSCOPE_SUBMITTED") != "1":
        session.sparkContext.setLogLevel("WARN")  # spark-submit.sh's log4j2 config sends the rest to a file
    if on_s3:
        configure_workers(session, pyarrow_environment(config, secrets))
        try:
            check_reachable(session, config, secrets)
            prove_lock_store(session, config)  # before the metastore's first write into the bucket
        except BaseException:  # UnguardedStore is a SystemExit
            session.stop()
            raise
    if config.metastore == "hive":
        reach_metastore(session, config.database, settings)
    register_decoder_functions(session)
    if not session.catalog.databaseExists(config.database):  # IF NOT EXISTS alone makes the metastore log an error
        session.sql(f"CREATE DATABASE IF NOT EXISTS `{config.database}`")
    return session


def register_decoder_functions(session: SparkSession) -> None:
    """The decoder's Java fast path as the Spark function transforms.silver calls by name.

    Registered from the JVM side, where it can be marked nondeterministic (see the Java class). The
    class is the one OffsetCommit's declaration names; it refuses to register unless it returns the
    columns silver expects and decodes the versions the declaration claims for it.
    """
    fast_path = OFFSET_COMMIT_VALUE.fast_path
    java_class = functools.reduce(getattr, fast_path.java_class.split("."), session._jvm)
    if not callable(getattr(java_class, "register", None)):
        raise RuntimeError(
            f"{fast_path.java_class} is not on Spark's classpath: scripts/bootstrap.sh builds "
            "jvm/spark/jars/groupscope-decoder.jar, and spark-submit.sh passes it with the other jars"
        )
    java_class.register(
        session._jsparkSession, silver.FAST_PATH_FUNCTION, silver.FAST_PATH_TYPE.json(), fast_path.versions
    )
