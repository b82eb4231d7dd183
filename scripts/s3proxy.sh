#!/usr/bin/env bash
# A local S3-compatible server for trying groupscope on object storage (docs/s3.md) and for the tests:
# s3proxy from Maven Central (jvm/s3proxy, fetched by `scripts/bootstrap.sh s3proxy`), on loopback, keeping its
# objects in a local folder (each bucket a subfolder).
#   scripts/s3proxy.sh start    start it, create the bucket, wait until it answers; prints the endpoint
#   scripts/s3proxy.sh stop     stop it (the objects stay in the folder)
# Settings (environment): GROUPSCOPE_S3PROXY_PORT (9090), GROUPSCOPE_S3PROXY_DIR (.s3proxy),
# GROUPSCOPE_S3PROXY_BUCKET (groupscope), GROUPSCOPE_S3PROXY_JARS (jvm/s3proxy/jars: the server's
# release). The server's key pair is read from GROUPSCOPE_S3_ACCESS_KEY and GROUPSCOPE_S3_SECRET_KEY,
# the variables conf/s3.toml names, and handed to it through a pipe, never a file or its command line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port="${GROUPSCOPE_S3PROXY_PORT:-9090}"
dir="$(realpath -m "${GROUPSCOPE_S3PROXY_DIR:-$root/.s3proxy}")"
bucket="${GROUPSCOPE_S3PROXY_BUCKET:-groupscope}"
jars="${GROUPSCOPE_S3PROXY_JARS:-$root/jvm/s3proxy/jars}"
pid_file="$dir/s3proxy.pid"
start_timeout_s=120

running() { [[ -f "$pid_file" ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; }

start() {
  if running; then echo "s3proxy: already running (pid $(cat "$pid_file")) on http://127.0.0.1:$port" >&2; return 0; fi
  : "${GROUPSCOPE_S3_ACCESS_KEY:?set GROUPSCOPE_S3_ACCESS_KEY (the access key id the server accepts)}"
  : "${GROUPSCOPE_S3_SECRET_KEY:?set GROUPSCOPE_S3_SECRET_KEY (the secret key the server accepts)}"
  # Its own release only: a server started from a fresh clone fetches one jar, not the lab's Kafka lines.
  if [[ -z "${GROUPSCOPE_S3PROXY_JARS:-}" ]]; then "$root/scripts/bootstrap.sh" s3proxy; fi
  [[ -d "$jars" ]] || { echo "s3proxy: no s3proxy release in $jars (GROUPSCOPE_S3PROXY_JARS)" >&2; exit 1; }
  local jar
  jar="$(ls "$jars"/s3proxy-*-jar-with-dependencies.jar | head -1)"
  mkdir -p "$dir/$bucket"  # the filesystem backend's buckets are its folders
  # Detached from this shell (its own session), its output in a log beside the objects. The properties
  # come through a pipe (process substitution): the secret never lands on disk or in `ps`.
  setsid java -jar "$jar" --properties <(printf '%s\n' \
    "s3proxy.endpoint=http://127.0.0.1:$port" \
    "s3proxy.authorization=aws-v2-or-v4" \
    "s3proxy.identity=$GROUPSCOPE_S3_ACCESS_KEY" \
    "s3proxy.credential=$GROUPSCOPE_S3_SECRET_KEY" \
    "jclouds.provider=filesystem" \
    "jclouds.filesystem.basedir=$dir") >"$dir/s3proxy.log" 2>&1 &
  echo $! >"$pid_file"
  # Ready when it answers HTTP (403 to an unsigned request), not after a guessed delay.
  local deadline=$((SECONDS + start_timeout_s))
  until [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)" =~ ^[1-5] ]]; do
    if ! running; then
      echo "s3proxy: exited while starting; its log ($dir/s3proxy.log) ends:" >&2
      tail -5 "$dir/s3proxy.log" >&2
      rm -f "$pid_file"
      exit 1
    fi
    if ((SECONDS > deadline)); then echo "s3proxy: no answer on port $port after ${start_timeout_s}s" >&2; stop; exit 1; fi
    sleep 0.2
  done
  echo "s3proxy: http://127.0.0.1:$port (pid $(cat "$pid_file")), bucket s3a://$bucket/, objects in $dir"
}

stop() {
  if ! running; then rm -f "$pid_file"; echo "s3proxy: not running" >&2; return 0; fi
  local pid
  pid="$(cat "$pid_file")"
  kill "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  rm -f "$pid_file"
  echo "s3proxy: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: scripts/s3proxy.sh start|stop" >&2; exit 2 ;;
esac
