#!/usr/bin/env bash
# SQL over groupscope's tables: ./spark-sql.sh [--conf conf/<env>.toml] [-e 'SELECT ...'] [spark-sql options]
# Opens the warehouse and metastore the jobs use, with their Spark settings (jobs/sql_launch.py):
# conf/local.toml's (./warehouse and its embedded metastore) unless --conf names another environment file;
# GROUPSCOPE_WAREHOUSE overrides the warehouse. Derby allows one process at a time: while a job runs this
# exits 75, and a job started while this shell is open is refused the same way. With a Hive metastore
# service (conf/hive.toml, docs/hive.md) shells, jobs and the Thrift server run side by side. An s3a://
# warehouse (conf/s3.toml, docs/s3.md) needs the credential variables its file names in the environment.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/scripts/bootstrap.sh" job
config_args=()
# spark-sql's own --conf takes key=value; an environment file is a path.
if [[ "${1:-}" == "--conf" && "${2:-}" != *=* ]]; then config_args+=(--conf "$(realpath -m "$2")"); shift 2; fi
[[ -n "${GROUPSCOPE_WAREHOUSE:-}" ]] && config_args+=(--warehouse "$(realpath -m "$GROUPSCOPE_WAREHOUSE")")
source "$root/scripts/embedded_metastore.sh"
sql_session_settings ${config_args[@]+"${config_args[@]}"}
# The configuration's master (jobs/sql_launch.py passes it first, as --master MASTER) decides, as for the jobs.
source "$root/scripts/loopback.sh"
bind_local_driver_to_loopback "${session_settings[1]}"
# Spark's jars, and Hadoop's S3A with the AWS SDK modules it calls (s3a:// warehouses, docs/s3.md), as
# spark-submit.sh gives the jobs. On S3 the credentials reach the JVM only through its environment: the
# settings above name the variables ([storage.s3]), never their values, so `ps` shows no secret.
jars="$(ls "$root"/jvm/spark/jars/*.jar "$root"/jvm/s3/jars/*.jar | paste -sd,)"
# The venv's Spark launchers find Spark through the Python on PATH; point them at the venv's pyspark.
export PATH="$root/.venv/bin:$PATH"
export SPARK_HOME="$("$root/.venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
# The console shows the answer with its headers and errors, nothing else: -S drops the shell's notes (the
# master and application id, each statement's time taken), and the JVM's note that Spark's launcher adds an
# incubator module (jdk.incubator.vector) is filtered out of stderr, as is each statement's "Time taken", which
# Spark 4.2's CLI prints even with -S (the filter does not hold the metastore lock).
exec "$root/.venv/bin/spark-sql" \
  --properties-file "$root/conf/spark-defaults.conf" \
  --jars "$jars" \
  "${session_settings[@]}" \
  --conf "spark.ui.enabled=false" \
  --hiveconf hive.cli.print.header=true \
  -S \
  "$@" 2> >(exec 9>&-; exec grep --line-buffered -v -e '^WARNING: Using incubator modules: ' -e '^Time taken: ' >&2)
