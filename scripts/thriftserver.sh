#!/usr/bin/env bash
# The Spark Thrift JDBC/ODBC server over groupscope's tables and views, in the foreground (SIGTERM or
# Ctrl-C stops it):
#   scripts/thriftserver.sh [--conf conf/<env>.toml] [--warehouse DIR] [--port N] [--bind HOST] [-- spark-submit options]
# It opens the warehouse and metastore the jobs use, with their Spark settings (conf/defaults.toml, the
# environment file, then the flags), and listens on 127.0.0.1:10000 unless told otherwise. Connect with
#   scripts/beeline.sh -u jdbc:hive2://127.0.0.1:10000/groupscope -e 'SELECT * FROM group_health'
# Authentication is [thriftserver] in conf/*.toml. Without it (authentication = "none", the default) ANY user
# name and password are accepted, and anyone reaching the port can read, drop or overwrite every table. With
# authentication = "password" only the user name and password in the server's environment variables that
# [thriftserver] names are (GROUPSCOPE_THRIFT_USER, GROUPSCOPE_THRIFT_PASSWORD by default; both must be set,
# or it exits 2); give beeline the password through a pipe, never on its command line:
#   scripts/beeline.sh -u jdbc:hive2://127.0.0.1:10000/groupscope -n "$GROUPSCOPE_THRIFT_USER" \
#     -w <(printf %s "$GROUPSCOPE_THRIFT_PASSWORD") -e 'SELECT * FROM group_health'
# Either way every session runs as the user who started the server, with its access to the warehouse (on S3,
# its credentials). The traffic is not encrypted: --bind another address only on a network you trust.
# The embedded metastore (Derby) lets one process at a time open the warehouse: while a job runs this exits
# 75, and jobs started while the server runs are refused the same way; stop it before the next run. With a
# Hive metastore service (storage.metastore = "hive", docs/hive.md) the server and the jobs run side by side.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port=10000
bind=127.0.0.1
config_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --conf | --warehouse) config_args+=("$1" "$2"); shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --bind) bind="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "thriftserver.sh: unknown option '$1' (spark-submit options go after --)" >&2; exit 2 ;;
  esac
done

"$root/scripts/bootstrap.sh" job
# Spark's jars, and Hadoop's S3A with the AWS SDK modules it calls (s3a:// warehouses, docs/s3.md). On the
# driver's own class path too: each JDBC session resolves Delta's catalog through a class loader that
# does not see --jars. On S3 the credentials reach the JVM only through its environment (the settings
# name the variables [storage.s3] names, never their values), so `ps` shows no secret.
jars="$(ls "$root"/jvm/spark/jars/*.jar "$root"/jvm/s3/jars/*.jar | paste -sd,)"
driver_class_path="$(ls "$root"/jvm/spark/jars/*.jar "$root"/jvm/s3/jars/*.jar | paste -sd:)"
export PATH="$root/.venv/bin:$PATH"
export SPARK_HOME="$("$root/.venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
[[ "$bind" == 127.* ]] && export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"

# The jobs' own configuration decides the master, the warehouse, the metastore and the Spark settings, and
# [thriftserver] the server's authentication (its --hiveconf arguments: the variables' names, not their values).
source "$root/scripts/embedded_metastore.sh"
sql_session_settings --thrift-server ${config_args[@]+"${config_args[@]}"}

cd "$root"
exec "$root/.venv/bin/spark-submit" \
  --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2 \
  --name "groupscope Thrift JDBC server" \
  --properties-file "$root/conf/spark-defaults.conf" \
  --jars "$jars" \
  --driver-class-path "$driver_class_path" \
  "${session_settings[@]}" \
  --hiveconf "hive.server2.thrift.port=$port" \
  --hiveconf "hive.server2.thrift.bind.host=$bind" \
  "$@"
