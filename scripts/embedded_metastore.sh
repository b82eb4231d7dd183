# Sourced by the SQL launchers. hold_embedded_metastore WAREHOUSE: takes the lock the jobs take
# (jobs/session.py) on WAREHOUSE/.embedded-metastore.lock, or exits 75 naming its holder. Derby serves
# one process; without the lock a job started beside the shell would fail with Derby's boot errors.
# The lock is on file descriptor 9, which the launcher's exec hands to the JVM: it lasts as long as the
# server or shell does, and the OS drops it when that process ends, however it ends.
hold_embedded_metastore() {
  local lock="$1/.embedded-metastore.lock"
  exec 9>>"$lock"
  if ! flock -n 9; then
    echo "another groupscope process is using the embedded metastore of $1: $(cat "$lock" 2>/dev/null || true). Run again when it has finished (a Hive metastore service lets them run side by side)" >&2
    exit 75
  fi
  printf 'pid %s on %s since %s UTC (%s)\n' "$$" "$(hostname)" "$(date -u '+%Y-%m-%d %H:%M:%S')" "$(basename "$0")" >"$lock"
}
