"""The Spark settings of the SQL launchers, ./spark-sql.sh and scripts/thriftserver.sh: the jobs' own
configuration (conf/defaults.toml, the environment file, the flags) decides the master, the warehouse, the
metastore and the Spark settings, so a shell or a JDBC server opens what the jobs write.

    python -m jobs.sql_launch [--thrift-server] [--conf conf/<env>.toml] [--warehouse DIR] ...

prints, NUL-separated, the warehouse whose embedded metastore the launcher must lock (empty with a
metastore service, which serves every process at once), then spark-submit's arguments, and with
--thrift-server the server's own (its authentication, [thriftserver]). A wrong setting exits 2 with one
line, as a job's would. On S3 each bucket is asked for first (jobs/object_store.py check_buckets): a store
that refuses, does not answer or is not S3 exits 1 with one line, before any JVM starts.

On S3 (docs/s3.md) the shells get the jobs' S3A settings, but their credentials only as references to
the variables [storage.s3] names (`${env.NAME}`): these arguments end on spark-submit's command line,
which any user of the machine can read with `ps`, while the variables' values stay in the environment
the JVM inherits, where Hadoop's Configuration reads them when S3A asks for the keys.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence

from jobs.command_line import config_from_args, parser, refuse
from jobs.config import REPO_ROOT, Config, ConfigError
from jobs.hive_metastore import hive_settings
from jobs.object_store import (
    StoreUnavailable,
    check_buckets,
    credential_references,
    credentials,
    hadoop_settings,
    s3_paths,
)
from jobs.session import embedded_metastore_conf

EXIT_STORE_UNAVAILABLE = 1  # as a job's (jobs/runs.py): the store refused or did not answer
# The Thrift server's password check (jvm/thriftserver), and the system properties naming its variables.
PASSWORD_CHECK_CLASS = "groupscope.EnvironmentPasswordAuthenticator"
PASSWORD_CHECK_PROPERTIES = {
    "user_env": "groupscope.thriftserver.user_env",
    "password_env": "groupscope.thriftserver.password_env",
}
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def launch_arguments(config: Config) -> tuple[str, list[str]]:
    """(the warehouse to lock, or "" for a metastore service; spark-submit's --master and --conf arguments)."""
    # The local directory: the warehouse, or beside an s3a:// warehouse the embedded metastore's home.
    config.warehouse_dir.mkdir(parents=True, exist_ok=True)
    s3 = hadoop_settings(config, credential_references(config)) if s3_paths(config) else {}
    settings = {"spark.sql.warehouse.dir": config.warehouse, **s3, **config.spark_conf}
    locked = ""
    if config.metastore == "embedded":
        settings.update(embedded_metastore_conf(config.warehouse_dir))
        locked = str(config.warehouse_dir)
    else:
        settings.update({**hive_settings(config), **config.spark_conf})
    log_config = f"-Dlog4j2.configurationFile={REPO_ROOT / 'conf' / 'log4j2.properties'}"
    java_options = f"{settings.get('spark.driver.extraJavaOptions', '')} {log_config}".strip()
    settings["spark.driver.extraJavaOptions"] = java_options
    arguments = ["--master", config.master]
    for key, value in settings.items():
        arguments += ["--conf", f"{key}={value}"]
    return locked, arguments


def thrift_server_arguments(config: Config, environment: Mapping[str, str] | None = None) -> list[str]:
    """The Thrift server's --hiveconf arguments for [thriftserver] authentication: none for "none" (Hive's
    NONE, which accepts any user name and password), Hive's CUSTOM with groupscope's password check for
    "password". Only the variables' names go on the command line; both must be set and not empty here,
    before a JVM starts, as the S3 credentials are."""
    environment = os.environ if environment is None else environment
    section = config.section("thriftserver")
    authentication = section.get("authentication", "none")
    if authentication == "none":
        return []
    if authentication != "password":
        raise ConfigError(f'thriftserver.authentication {authentication!r}: write "none" or "password"')
    arguments = [
        "--hiveconf",
        "hive.server2.authentication=CUSTOM",
        "--hiveconf",
        f"hive.server2.custom.authentication.class={PASSWORD_CHECK_CLASS}",
    ]
    for key, java_property in PASSWORD_CHECK_PROPERTIES.items():
        name = str(section.get(key, ""))
        if not _VARIABLE_NAME.fullmatch(name):
            raise ConfigError(f"thriftserver.{key} {name!r} must name an environment variable (letters, digits and _)")
        if not environment.get(name):
            raise ConfigError(f"environment variable {name} ([thriftserver] {key}) is not set, or is empty")
        arguments += ["--hiveconf", f"{java_property}={name}"]
    return arguments


def main(argv: Sequence[str] | None = None) -> None:
    command_line = parser("the settings of ./spark-sql.sh and scripts/thriftserver.sh")
    command_line.add_argument("--thrift-server", action="store_true", help="add the Thrift server's own arguments")
    args = command_line.parse_args(argv)
    try:
        config = config_from_args(args)
        locked, arguments = launch_arguments(config)
        if args.thrift_server:
            arguments += thrift_server_arguments(config)
        if s3_paths(config):
            check_buckets(config, credentials(config))
    except ConfigError as error:
        refuse(str(error))
    except StoreUnavailable as unavailable:  # as a job's refused store: one line, exit 1, no secret
        print(f"groupscope: {unavailable}", file=sys.stderr)
        sys.exit(EXIT_STORE_UNAVAILABLE)
    sys.stdout.write("".join(f"{argument}\0" for argument in [locked, *arguments]))


if __name__ == "__main__":
    main()
