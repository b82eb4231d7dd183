#!/usr/bin/env bash
# A Hive metastore service that the jobs, ./spark-sql.sh and the Thrift server share (docs/hive.md): the
# Hive 3.1.3 standalone metastore from Maven Central (jvm/metastore), its tables in a private PostgreSQL
# cluster (Debian's package) listening on loopback only, schema made by the metastore's own schematool.
#   scripts/metastore.sh start    install what is missing, start PostgreSQL and the metastore, wait until it serves
#   scripts/metastore.sh stop     stop both (their data stays in the folder)
#   scripts/metastore.sh status   exit 0 when both run
# Settings (environment): GROUPSCOPE_METASTORE_PORT (9083, the thrift port), GROUPSCOPE_METASTORE_BIND
# (127.0.0.1: the address the thrift port listens on; the service has no authentication, so give another
# address only on a network you trust), GROUPSCOPE_METASTORE_DB_PORT (54329, PostgreSQL's, always on
# loopback), GROUPSCOPE_METASTORE_DIR (build/metastore), GROUPSCOPE_METASTORE_HEAP (256m).
# The PostgreSQL password of the metastore's role is read from GROUPSCOPE_METASTORE_DB_PASSWORD at each start:
# it reaches PostgreSQL through a pipe and the service through its environment (its site file names the
# variable, ${env.GROUPSCOPE_METASTORE_DB_PASSWORD}), never a file, a command line or a log.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port="${GROUPSCOPE_METASTORE_PORT:-9083}"
bind="${GROUPSCOPE_METASTORE_BIND:-127.0.0.1}"
# Where this script, and the service's own site file, reach it: the bound address, or loopback for a wildcard.
case "$bind" in 0.0.0.0 | ::) host=127.0.0.1 ;; *) host="$bind" ;; esac
db_port="${GROUPSCOPE_METASTORE_DB_PORT:-54329}"
dir="$(realpath -m "${GROUPSCOPE_METASTORE_DIR:-$root/build/metastore}")"
heap="${GROUPSCOPE_METASTORE_HEAP:-256m}"
password_env=GROUPSCOPE_METASTORE_DB_PASSWORD
jars="$root/jvm/metastore/jars"
release="apache-hive-metastore-3.1.3-bin"
launcher_jar="$jars/groupscope-metastore.jar"
data="$dir/postgres"
pid_file="$dir/metastore.pid"
db_role=groupscope
db_name=metastore
start_timeout_s=180

say() { echo "metastore: $*" >&2; }
fail() { say "$*"; exit 1; }

# PostgreSQL refuses to run as root: as root, its cluster belongs to the postgres user the package creates.
as_db_owner() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
psql_local() { as_db_owner "$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -h "$data" -p "$db_port" "$@"; }
running() { [[ -f "$pid_file" ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; }
postgres_running() { [[ -f "$data/PG_VERSION" ]] && as_db_owner "$(pg_bin)/pg_ctl" -D "$data" status >/dev/null 2>&1; }
accepts() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

install_metastore() {
  # Its part of bootstrap: the venv (pyspark's Hadoop jars), the release's jars and Debian's PostgreSQL.
  "$root/scripts/bootstrap.sh" metastore
  if [[ ! -d "$jars/$release/lib" ]]; then
    tar -xzf "$jars"/hive-standalone-metastore-*-bin.tar.gz -C "$jars"
  fi
  # groupscope's entry point to the service (jvm/metastore/src: Hive 3.1 itself cannot listen on one
  # address), compiled against the release's jars as the other Java in jvm/ is by scripts/bootstrap.sh.
  local want classes
  want="$(sha256sum "$root"/jvm/metastore/src/groupscope/*.java | sha256sum | cut -c1-16)"
  if [[ ! -f "$launcher_jar" || "$(cat "$jars/.launcher-stamp" 2>/dev/null)" != "$want" ]]; then
    command -v javac >/dev/null || fail "javac not found: install a Java 17 JDK, not only a JRE"
    classes="$(mktemp -d)"
    javac -nowarn -XDsuppressNotes --release 17 -cp "$(class_path)" -d "$classes" "$root"/jvm/metastore/src/groupscope/*.java
    jar cf "$launcher_jar.new" -C "$classes" groupscope
    mv -f "$launcher_jar.new" "$launcher_jar"
    rm -rf "$classes"
    echo "$want" >"$jars/.launcher-stamp"
  fi
}

# The class path: the release's jars, the driver and the few Hadoop libraries (jvm/metastore/pom.xml), and
# Hadoop itself from pyspark's client jars.
class_path() {
  local spark_jars
  spark_jars="$("$root/.venv/bin/python" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')"
  printf '%s' "$dir/conf:$jars/$release/lib/*:$jars/*:$(ls "$spark_jars"/hadoop-client-{api,runtime}-*.jar | paste -sd:)"
}

start_postgres() {
  if [[ ! -f "$data/PG_VERSION" ]]; then
    mkdir -p "$data"
    if ((EUID == 0)); then
      chown postgres: "$data"
      as_db_owner test -x "$dir" || fail "the postgres user cannot reach $dir: set GROUPSCOPE_METASTORE_DIR to a folder every user can enter"
    fi
    # Local connections (a socket inside the data folder) are the cluster owner's, by peer authentication;
    # TCP connections (loopback only) need a password.
    as_db_owner "$(pg_bin)/initdb" -D "$data" -E UTF8 --no-locale --auth-local=peer --auth-host=scram-sha-256 \
      >"$dir/initdb.log" 2>&1 || { tail -5 "$dir/initdb.log" >&2; fail "initdb failed (log: $dir/initdb.log)"; }
  fi
  if ! postgres_running; then
    accepts "$db_port" && fail "port $db_port is taken: set GROUPSCOPE_METASTORE_DB_PORT to a free one"
    touch "$dir/postgres.log"
    ((EUID == 0)) && chown postgres: "$dir/postgres.log"
    # -w: pg_ctl returns once the server accepts connections.
    as_db_owner "$(pg_bin)/pg_ctl" -D "$data" -l "$dir/postgres.log" -w -t "$start_timeout_s" -s \
      -o "-c listen_addresses=127.0.0.1 -c port=$db_port -c unix_socket_directories='$data'" start ||
      { tail -5 "$dir/postgres.log" >&2; fail "PostgreSQL did not start (log: $dir/postgres.log)"; }
  fi
  # The role's password is set at every start, from the environment: a changed variable takes effect, and
  # it never rests anywhere but in PostgreSQL's own (hashed) catalog. Through stdin, not the command line;
  # log_min_error_statement keeps the statement out of the server's log even if it fails.
  local password="${!password_env}"
  psql_local -d postgres <<SQL
SET log_min_error_statement = panic;
SELECT 'CREATE ROLE $db_role LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$db_role') \gexec
ALTER ROLE $db_role PASSWORD '${password//\'/\'\'}';
SELECT 'CREATE DATABASE $db_name OWNER $db_role' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$db_name') \gexec
SQL
}

write_site() {
  mkdir -p "$dir/conf" "$dir/warehouse"
  cat >"$dir/conf/metastore-site.xml" <<XML
<?xml version="1.0"?>
<!-- Written by scripts/metastore.sh at each start; the password is the variable's name, read by the service. -->
<configuration>
  <property><name>metastore.thrift.port</name><value>$port</value></property>
  <property><name>metastore.thrift.uris</name><value>thrift://$host:$port</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name><value>org.postgresql.Driver</value></property>
  <property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:postgresql://127.0.0.1:$db_port/$db_name</value></property>
  <property><name>javax.jdo.option.ConnectionUserName</name><value>$db_role</value></property>
  <property><name>javax.jdo.option.ConnectionPassword</name><value>\${env.$password_env}</value></property>
  <!-- The default database's folder; groupscope's databases are created where the jobs' warehouse is. -->
  <property><name>metastore.warehouse.dir</name><value>$dir/warehouse</value></property>
  <property><name>metastore.schema.verification</name><value>true</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>false</value></property>
  <!-- As the release's own site file: the partition-expression proxy and background task that need no hive-exec. -->
  <property><name>metastore.expression.proxy</name><value>org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy</value></property>
  <property><name>metastore.task.threads.always</name><value>org.apache.hadoop.hive.metastore.events.EventCleanerTask</value></property>
</configuration>
XML
}

init_schema() {
  local present
  present="$(psql_local -d "$db_name" -tAc "SELECT 1 FROM pg_tables WHERE tablename = 'VERSION'")"
  [[ -n "$present" ]] && return
  say "creating the metastore's tables with schematool"
  METASTORE_HOME="$jars/$release" java -cp "$(class_path)" org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool \
    -dbType postgres -initSchema >"$dir/schematool.log" 2>&1 ||
    { tail -5 "$dir/schematool.log" >&2; fail "schematool -initSchema failed (log: $dir/schematool.log)"; }
}

start() {
  mkdir -p "$dir"
  if running; then say "already running (pid $(cat "$pid_file")) on thrift://$host:$port"; return 0; fi
  [[ -n "${!password_env:-}" ]] || fail "set $password_env (the password of PostgreSQL's role $db_role, kept by the service's database)"
  export "${password_env?}"
  install_metastore
  start_postgres
  write_site
  init_schema
  accepts "$port" "$host" && fail "port $port is taken: set GROUPSCOPE_METASTORE_PORT to a free one"
  # On $bind only, through groupscope's entry point (jvm/metastore/src): Hive 3.1's HiveMetaStore has no
  # setting for the address and takes the port on every interface. Detached from this shell, its log
  # beside the data.
  METASTORE_HOME="$jars/$release" setsid java "-Xmx$heap" \
    "-Dlog4j.configurationFile=$jars/$release/conf/metastore-log4j2.properties" \
    "-Dmetastore.log.dir=$dir" -Dmetastore.log.file=metastore.log \
    -cp "$(class_path):$launcher_jar" groupscope.BoundMetaStore "$bind" "$port" >"$dir/metastore.out" 2>&1 &
  echo $! >"$pid_file"
  # The service binds its port only after it has connected to PostgreSQL and checked the schema version:
  # a connection accepted by our process is a service that answers.
  local deadline=$((SECONDS + start_timeout_s))
  until accepts "$port" "$host"; do
    if ! running; then
      say "the service exited while starting; its log ($dir/metastore.log) ends:"
      tail -n 5 "$dir/metastore.log" "$dir/metastore.out" >&2 || true
      rm -f "$pid_file"
      exit 1
    fi
    if ((SECONDS > deadline)); then say "no answer on port $port after ${start_timeout_s}s"; stop; exit 1; fi
    sleep 0.2
  done
  echo "metastore: thrift://$host:$port, listening on $bind (pid $(cat "$pid_file")), tables in PostgreSQL on 127.0.0.1:$db_port, data in $dir"
}

stop() {
  if running; then
    local pid
    pid="$(cat "$pid_file")"
    kill "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    say "service stopped"
  fi
  rm -f "$pid_file"
  if [[ -n "$(pg_bin)" ]] && postgres_running; then
    as_db_owner "$(pg_bin)/pg_ctl" -D "$data" -m fast -w -s stop
    say "PostgreSQL stopped"
  fi
}

status() {
  local code=0
  if running; then echo "service: running (pid $(cat "$pid_file")), thrift://$host:$port"; else echo "service: stopped"; code=3; fi
  if [[ -n "$(pg_bin)" ]] && postgres_running; then echo "PostgreSQL: running, data in $data"; else echo "PostgreSQL: stopped"; code=3; fi
  return "$code"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: scripts/metastore.sh start|stop|status" >&2; exit 2 ;;
esac
