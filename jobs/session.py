"""The one place a SparkSession is built: Delta, the catalog, the warehouse, the jars.

Under `spark-submit.sh` the launcher has already set the master, the jars and Delta's extensions
(GROUPSCOPE_SUBMITTED=1); run directly (tests, `python -m jobs.x`) this sets them itself from the
jars scripts/bootstrap.sh fetched.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.config import REPO_ROOT, Config

SPARK_JARS_DIR = REPO_ROOT / "jvm" / "spark" / "jars"


def spark_jars() -> list[str]:
    jars = sorted(str(path) for path in SPARK_JARS_DIR.glob("*.jar"))
    if not jars:
        raise RuntimeError(f"no Spark jars in {SPARK_JARS_DIR}: run scripts/bootstrap.sh first")
    return jars


def embedded_metastore_conf(warehouse_dir: Path) -> dict[str, str]:
    """A Derby-backed Hive metastore kept beside the tables, so a local run needs no service."""
    metastore_db = warehouse_dir / "metastore_db"
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={metastore_db};create=true",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={warehouse_dir}",
    }


def build_session(config: Config, app_name: str) -> SparkSession:
    warehouse = config.warehouse_dir
    warehouse.mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.appName(app_name)
    settings: dict[str, str] = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.sql.session.timeZone": "UTC",
        **config.spark_conf,
    }
    if config.metastore == "embedded":
        settings.update(embedded_metastore_conf(warehouse))
    else:
        settings["spark.sql.catalogImplementation"] = "hive"
    if os.environ.get("GROUPSCOPE_SUBMITTED") != "1":
        settings["spark.master"] = config.master
        settings["spark.jars"] = ",".join(spark_jars())
        # Python workers must run this interpreter (the venv), not whatever python3 is on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.enableHiveSupport().getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    if not session.catalog.databaseExists(config.database):  # IF NOT EXISTS alone makes the metastore log an error
        session.sql(f"CREATE DATABASE IF NOT EXISTS `{config.database}`")
    return session
