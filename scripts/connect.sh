#!/usr/bin/env bash
# A Spark Connect server for the jobs (docs/connect.md): the server in the pinned pyspark's own distribution
# (pyspark/jars/spark-connect_2.13-*.jar), with Delta and groupscope's decoder extension configured on the
# server's side, over the warehouse and metastore of the environment file it is started with.
#   scripts/connect.sh start [--conf conf/<env>.toml] [--warehouse DIR]   start it detached, wait until it listens
#   scripts/connect.sh stop                                              stop it
#   scripts/connect.sh status                                            exit 0 when it runs
# Settings (environment): GROUPSCOPE_CONNECT_PORT (15002), GROUPSCOPE_CONNECT_BIND (127.0.0.1),
# GROUPSCOPE_CONNECT_DIR (build/connect: pid and logs), GROUPSCOPE_CONNECT_MEMORY (2g, the server's driver: at 1g a nightly of the 170-record sample ran it out of heap).
# The warehouse, metastore and static Spark settings are the server's (spark.sql.warehouse.dir cannot change
# after a session starts): start it with the environment file the jobs use, e.g. conf/connect.toml.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port="${GROUPSCOPE_CONNECT_PORT:-15002}"
bind="${GROUPSCOPE_CONNECT_BIND:-127.0.0.1}"
dir="$(realpath -m "${GROUPSCOPE_CONNECT_DIR:-$root/build/connect}")"
memory="${GROUPSCOPE_CONNECT_MEMORY:-2g}"
pid_file="$dir/connect.pid"
start_timeout_s=180

say() { echo "connect: $*" >&2; }
fail() { say "$*"; exit 1; }
running() { [[ -f "$pid_file" ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; }
accepts() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

start() {
  mkdir -p "$dir"
  if running; then say "already running (pid $(cat "$pid_file")) on sc://$bind:$port"; return 0; fi
  accepts "$bind" "$port" && fail "port $port is taken: set GROUPSCOPE_CONNECT_PORT to a free one"
  "$root/scripts/bootstrap.sh" job
  local jars driver_class_path
  jars="$(ls "$root"/jvm/spark/jars/*.jar "$root"/jvm/s3/jars/*.jar | paste -sd,)"
  # On the driver's class path too: the extensions are instantiated when the server's first session is
  # built, through a class loader that does not see --jars (as for the Thrift server).
  driver_class_path="$(ls "$root"/jvm/spark/jars/*.jar "$root"/jvm/s3/jars/*.jar | paste -sd:)"
  export PATH="$root/.venv/bin:$PATH"
  export SPARK_HOME="$("$root/.venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
  [[ "$bind" == 127.* ]] && export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
  # The jobs' configuration decides the master, warehouse, metastore and Spark settings (jobs/sql_launch.py);
  # with the embedded metastore the server holds its lock (file descriptor 9) for as long as it runs.
  source "$root/scripts/embedded_metastore.sh"
  sql_session_settings "$@"
  cd "$root"
  # Python workers (the decoder's Python part, mapInArrow) run the venv's interpreter on the server's side.
  PYSPARK_PYTHON="$root/.venv/bin/python" GROUPSCOPE_HOME="$root" setsid "$root/.venv/bin/spark-submit" \
    --class org.apache.spark.sql.connect.service.SparkConnectServer \
    --name "groupscope Spark Connect server" \
    --properties-file "$root/conf/spark-defaults.conf" \
    --driver-memory "$memory" \
    --jars "$jars" \
    --driver-class-path "$driver_class_path" \
    "${session_settings[@]}" \
    --conf "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension,groupscope.DecoderExtension" \
    --conf "spark.connect.grpc.binding.address=$bind" \
    --conf "spark.connect.grpc.binding.port=$port" \
    --conf "spark.connect.grpc.port.maxRetries=0" \
    >"$dir/connect.log" 2>&1 &
  echo $! >"$pid_file"
  exec 9>&-
  # The embedded metastore's lock names its holder: the server, not this script, which ends now.
  if [[ -n "${held_metastore_lock:-}" ]]; then
    printf 'pid %s on %s since %s UTC (Spark Connect server, scripts/connect.sh)\n' "$(cat "$pid_file")" "$(hostname)" \
      "$(date -u '+%Y-%m-%d %H:%M:%S')" >"$held_metastore_lock"
  fi
  # The server binds its port once its SparkContext and the gRPC service are up: a connection accepted is a
  # server that answers.
  local deadline=$((SECONDS + start_timeout_s))
  until accepts "$bind" "$port"; do
    if ! running; then
      say "the server exited while starting; its log ($dir/connect.log) ends:"
      grep -v '^\s*at ' "$dir/connect.log" | tail -5 >&2 || true
      rm -f "$pid_file"
      exit 1
    fi
    if ((SECONDS > deadline)); then say "no answer on port $port after ${start_timeout_s}s"; stop; exit 1; fi
    sleep 0.2
  done
  echo "connect: sc://$bind:$port (pid $(cat "$pid_file")), log in $dir/connect.log"
}

stop() {
  if running; then
    local pid
    pid="$(cat "$pid_file")"
    kill "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    say "server stopped"
  fi
  rm -f "$pid_file"
}

status() {
  if running; then echo "server: running (pid $(cat "$pid_file")), sc://$bind:$port"; else echo "server: stopped"; return 3; fi
}

command="${1:-}"
shift || true
case "$command" in
  start) start "$@" ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: scripts/connect.sh start [--conf conf/<env>.toml] [--warehouse DIR] | stop | status" >&2; exit 2 ;;
esac
