#!/usr/bin/env bash
# beeline, Hive's JDBC shell from the pinned pyspark, for the Thrift server (scripts/thriftserver.sh):
#   scripts/beeline.sh -u jdbc:hive2://127.0.0.1:10000/groupscope -e 'SELECT * FROM group_health'
# Every argument is beeline's. The venv's beeline finds Spark through the Python on PATH; this points it
# at the venv's pyspark, so it runs from any shell, with or without .venv/bin on PATH. It installs nothing:
# the Thrift server it talks to was started by a launcher that did.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ -x "$root/.venv/bin/beeline" ]] || { echo "beeline.sh: no $root/.venv yet: start scripts/thriftserver.sh first" >&2; exit 1; }
export PATH="$root/.venv/bin:$PATH"
export SPARK_HOME="$("$root/.venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
exec "$root/.venv/bin/beeline" "$@"
