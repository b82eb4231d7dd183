#!/usr/bin/env bash
# Runs the whole test suite: ./test.sh [pytest args]. Installs what it needs first
# (scripts/bootstrap.sh: Python venv, Spark/Delta jars, Kafka broker jars for the lab tests).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
exec "$root/.venv/bin/pytest" "$@"
