"""The embedded metastore (storage.metastore = "embedded"): Derby in a local folder beside the tables,
so a local run needs no service. Its settings are built here for every process that opens it: the jobs'
sessions (jobs/session.py), the driver ./spark-submit.sh starts (through `python -m jobs check`), and
the SQL shells and servers (jobs/sql_launch.py).
"""

from __future__ import annotations

from pathlib import Path


def derby_home_option(metastore_home: Path) -> str:
    """The driver's Java option that makes the metastore's own folder Derby's home. Any other home breaks
    the second process to open the database when the folder's path starts with the home's (conf/s3.toml's
    `warehouse-s3-metastore` beside a home of `warehouse`): Derby 10.16 then fails to re-open it, deep in
    its boot (a NullPointerException in RawStore.setupEncryptionEngines), while the first run, which
    creates it, succeeds."""
    return f"-Dderby.system.home={metastore_home}"


def embedded_metastore_conf(metastore_home: Path) -> dict[str, str]:
    """A session's settings for the Derby-backed Hive metastore in `metastore_home`."""
    metastore_db = metastore_home / "metastore_db"
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={metastore_db};create=true",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.driver.extraJavaOptions": derby_home_option(metastore_home),
    }
