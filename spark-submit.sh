#!/usr/bin/env bash
# Runs a groupscope job with spark-submit: ./spark-submit.sh [--master URL] JOB [job args]
#   JOB is one of the jobs listed in jobs/__init__.py (run with no JOB to see them); job args are
#   listed by JOB --help. --master defaults to $GROUPSCOPE_MASTER, else local[2]. Any Spark master
#   works (spark://, yarn, k8s://): the code travels to executors as a zip (--py-files), the jars with --jars.
# The first run installs what is missing (`scripts/bootstrap.sh job`); later runs need no network.
# --verbose shows Spark's own info lines on the console (they always go to logs/spark-*.log).
# Exit codes: 0 succeeded, 1 failed, 2 wrong command line (nothing ran), 75 refused (retry later).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
master="${GROUPSCOPE_MASTER:-local[2]}"
if [[ "${1:-}" == "--master" ]]; then master="$2"; shift 2; fi

"$root/scripts/bootstrap.sh" job

# --verbose (anywhere among the job's arguments) shows Spark's info lines on the console too; they
# always go to logs/spark-<time>-<pid>.log.
console_level=warn
args=()
for arg in "$@"; do
  if [[ "$arg" == "--verbose" ]]; then console_level=info; else args+=("$arg"); fi
done
set -- ${args[@]+"${args[@]}"}

# The command line is checked before any JVM starts: a mistake costs a second and one line, not a minute.
job="${1:-}"
if [[ -z "$job" || "$job" == -* ]]; then (cd "$root" && exec "$root/.venv/bin/python" -m jobs "$@"); exit $?; fi
shift
# --help is answered there too: the job's options, with no JVM.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then (cd "$root" && exec "$root/.venv/bin/python" -m jobs check "$job" "$@"); exit $?; fi
# It prints `remote sc://...`, or `driver_options ...`: Java options of the driver started below that the
# configuration decides (Derby's home is the configured metastore folder, as for every launcher).
checked="$(cd "$root" && "$root/.venv/bin/python" -m jobs check "$job" "$@")" || exit $?
# spark.remote set (docs/connect.md): the job is a Spark Connect client; the server runs Spark, so no JVM starts here.
# Its stderr joins its stdout, as spark-submit's Python runner joins a classic job's: progress on stdout either way.
if [[ "$checked" == "remote "* ]]; then
  cd "$root"
  export GROUPSCOPE_HOME="$root"
  exec "$root/.venv/bin/python" -m "jobs.$job" "$@" 2>&1
fi

mkdir -p "$root/build" "$root/logs"
spark_log="$root/logs/spark-$(date -u +%Y%m%dT%H%M%S)-$$.log"
# The code zip is named by its content and renamed into place whole: runs started together (a shared
# checkout, a test running two at once) never read, or ship to executors, a zip another run is rewriting.
staged_zip="$(mktemp "$root/build/.groupscope-code.XXXXXX")"
(cd "$root" && "$root/.venv/bin/python" -m zipfile -c "$staged_zip" jobs transforms schemas >/dev/null)
code_zip="$root/build/groupscope-code-$(sha256sum "$staged_zip" | cut -c1-16).zip"
mv -f "$staged_zip" "$code_zip"
# Zips of older code are kept a week, so a run still going never loses the zip it imports from.
find "$root/build" -maxdepth 1 -name 'groupscope-code-*.zip' ! -path "$code_zip" -mtime +7 -delete
# Spark's jars, and Hadoop's S3A with the AWS SDK modules it calls (jvm/s3: s3a:// paths, docs/s3.md).
jars="$(ls "$root"/jvm/spark/jars/*.jar "$root"/jvm/s3/jars/*.jar | paste -sd,)"
# The venv's Spark launchers find Spark through the Python on PATH; point them at the venv's pyspark.
export PATH="$root/.venv/bin:$PATH"
export SPARK_HOME="$("$root/.venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"

cd "$root"
source "$root/scripts/loopback.sh"
bind_local_driver_to_loopback "$master"
export GROUPSCOPE_SUBMITTED=1 GROUPSCOPE_HOME="$root" PYSPARK_PYTHON="$root/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$root/.venv/bin/python"
exec "$root/.venv/bin/spark-submit" \
  --master "$master" \
  --properties-file "$root/conf/spark-defaults.conf" \
  --conf "spark.driver.extraJavaOptions=${checked#driver_options } -Dlog4j2.configurationFile=$root/conf/log4j2.properties -Dgroupscope.console.level=$console_level -Dgroupscope.log.file=$spark_log" \
  --jars "$jars" \
  --py-files "$code_zip" \
  "$root/jobs/$job.py" "$@"
