# Sourced by the SQL launchers (./spark-sql.sh, scripts/thriftserver.sh).
#
# sql_session_settings [--conf FILE] [--warehouse DIR]: fills the array session_settings with spark-submit's
# arguments for the jobs' configuration (jobs/sql_launch.py) and, when that is the embedded metastore, takes
# its lock. A mistake in the configuration exits 2 with one line, an S3 store that cannot be used 1.
sql_session_settings() {
  local settings_file status=0
  settings_file="$(mktemp)"
  # Through a file, not a pipe, so that a failure stops the launcher with its status; NUL-separated.
  (cd "$root" && "$root/.venv/bin/python" -m jobs.sql_launch "$@" >"$settings_file") || status=$?
  if ((status)); then
    rm -f "$settings_file"
    exit "$status"
  fi
  session_settings=()
  while IFS= read -r -d '' argument; do session_settings+=("$argument"); done <"$settings_file"
  rm -f "$settings_file"
  local embedded_warehouse="${session_settings[0]}"
  session_settings=("${session_settings[@]:1}")
  if [[ -n "$embedded_warehouse" ]]; then hold_embedded_metastore "$embedded_warehouse"; fi
}

# hold_embedded_metastore WAREHOUSE: takes the lock the jobs take (jobs/session.py) on
# WAREHOUSE/.embedded-metastore.lock, or exits 75 naming its holder. Derby serves one process; without the
# lock a job started beside the shell would fail with Derby's boot errors. The lock is on file descriptor 9,
# which the launcher's exec hands to the JVM: it lasts as long as the server or shell does, and the OS drops
# it when that process ends, however it ends. A Hive metastore service needs no such lock.
hold_embedded_metastore() {
  local lock="$1/.embedded-metastore.lock"
  exec 9>>"$lock"
  if ! flock -n 9; then
    echo "another groupscope process is using the embedded metastore of $1: $(cat "$lock" 2>/dev/null || true). Run again when it has finished (a Hive metastore service lets them run side by side)" >&2
    exit 75
  fi
  printf 'pid %s on %s since %s UTC (%s)\n' "$$" "$(hostname)" "$(date -u '+%Y-%m-%d %H:%M:%S')" "$(basename "$0")" >"$lock"
  held_metastore_lock="$lock"  # for a launcher whose server outlives it (scripts/connect.sh) to name the server
}
