#!/usr/bin/env bash
# Runs the test suite: ./test.sh [unit|spark|integration] [pytest args]. With no kind, every test.
# Installs what the suite needs first (`scripts/bootstrap.sh tests`: every part, the lab's Kafka lines and the browser).
#
# The whole suite runs the integration tests (brokers, spark-submit runs, Airflow, S3) in one pytest process
# and the in-process Spark tests (unit, spark) beside it in two pytest-xdist workers, each with its own
# session, warehouse and metastore, a test file at a time. A Spark session of the suite keeps about half a
# core busy (its driver plans on one thread, and its tasks are tiny): alone, one process of them took
# longer than the integration tests and left a core idle for its last twenty minutes. The integration
# output follows the other's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$root/scripts/bootstrap.sh" tests
cd "$root"
pytest="$root/.venv/bin/pytest"
case "${1:-}" in
  unit | spark | integration) kind="$1"; shift; exec "$pytest" "tests/$kind" "$@" ;;
esac
for argument in "$@"; do  # tests named on the command line: one process runs just those
  [[ "$argument" == tests* || -e "${argument%%::*}" ]] && exec "$pytest" "$@"
done

work="$(mktemp -d "${TMPDIR:-/tmp}/groupscope-tests.XXXXXX")"
integration_log="$work/integration.log"
# Distinct base directories: two pytest processes sharing the default one would prune each other's.
"$pytest" tests/integration --basetemp="$work/integration" "$@" >"$integration_log" 2>&1 &
integration=$!
# SIGINT, as Ctrl-C: pytest then tears its fixtures down (brokers, servers, background runs).
trap 'kill -INT "$integration" 2>/dev/null || true' INT TERM
echo "test.sh: the integration tests run alongside; their output follows ($integration_log)"
code=0
"$pytest" tests/unit tests/spark --numprocesses=2 --dist=loadfile --basetemp="$work/spark" "$@" || code=$?
integration_code=0
wait "$integration" || integration_code=$?
echo
echo "test.sh: integration tests ($integration_log):"
cat "$integration_log"
echo
echo "test.sh: unit and spark tests exited $code, integration tests $integration_code"
# pytest's codes: 0 passed, 1 some failed, 2-4 interrupted or misused, 5 nothing collected (a -k that
# selects tests of one kind only is fine). The worse one wins.
(( code == 5 && integration_code == 0 )) && code=0
(( integration_code == 5 && code == 0 )) && integration_code=0
exit $((code > integration_code ? code : integration_code))
