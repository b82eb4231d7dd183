#!/usr/bin/env bash
# Runs the test suite: ./test.sh [unit|spark|integration] [pytest args]. With no kind, every test.
# Installs what it needs first (scripts/bootstrap.sh: Python venv, Spark/Delta jars, Kafka broker jars).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
case "${1:-}" in
  unit | spark | integration) kind="$1"; shift; exec "$root/.venv/bin/pytest" "tests/$kind" "$@" ;;
esac
exec "$root/.venv/bin/pytest" "$@"
