#!/usr/bin/env bash
# Installs what a groupscope command needs, idempotently, in parts; each launcher asks for its own:
#   scripts/bootstrap.sh PART...
#   job        the Python venv (pinned pyproject.toml), Spark's jars (Delta, the Kafka source), Hadoop's S3A,
#              groupscope's Java compiled against them (the decoder's fast path, the Thrift server's password
#              check, the what-if assignor replay) and the report's charting library: ./spark-submit.sh,
#              ./spark-sql.sh, scripts/thriftserver.sh, scripts/connect.sh, scripts/beeline.sh
#   s3proxy    the s3proxy release, and nothing else (scripts/s3proxy.sh)
#   metastore  the venv (the service runs on pyspark's Hadoop jars), the Hive metastore release and Debian's
#              PostgreSQL (scripts/metastore.sh)
#   lab        the venv and each Kafka line's broker jars and Kafka Streams sets (lab/)
#   tests      every part above, s3proxy 2.6 (a store without conditional writes) and Debian's Chromium (the
#              report's browser tests): ./test.sh, so CI, starting bare, has all the suite needs
# A second run with nothing changed does no network I/O: stamps record what was installed from which inputs.
# GROUPSCOPE_BOOTSTRAP=plan prints each step of the parts asked for, "ready" or "to install", installs
# nothing and exits 3, which stops the command that called it: what a command would install on this machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
EXIT_PLANNED=3

usage() { echo "usage: scripts/bootstrap.sh job|s3proxy|metastore|lab|tests... (the parts are listed in its header)" >&2; exit 2; }
(($# > 0)) || usage
steps=()
add_steps() { local step; for step in "$@"; do [[ " ${steps[*]} " == *" $step "* ]] || steps+=("$step"); done; }
job_steps=(venv jars:spark jars:s3 decoder thriftserver jars:assignors assignor-replay report-charts)
lab_steps=(venv jars:kafka-4 jars:kafka-3.9 jars:kafka-4.3 jars:kafka-4.4 jars:kafka-streams jars:kafka-streams-4.3
  jars:kafka-streams-4.4)
metastore_steps=(venv jars:metastore postgresql)
for part in "$@"; do
  case "$part" in
    job) add_steps "${job_steps[@]}" ;;
    s3proxy) add_steps jars:s3proxy ;;
    metastore) add_steps "${metastore_steps[@]}" ;;
    lab) add_steps "${lab_steps[@]}" ;;
    tests) add_steps "${job_steps[@]}" "${lab_steps[@]}" "${metastore_steps[@]}" jars:s3proxy jars:s3proxy-2.6 chromium ;;
    *) echo "bootstrap: no part '$part'" >&2; usage ;;
  esac
done

planning=0
if [[ "${GROUPSCOPE_BOOTSTRAP:-}" == plan ]]; then
  planning=1
  echo "bootstrap plan: $*"
else
  # Launchers started together on a fresh machine wait for one install instead of racing pip and Maven.
  exec 8>"$root/.bootstrap.lock"
  flock 8
fi
# to_install STEP READY: true when STEP must be installed now (READY is 0); in plan mode it says which and
# answers false, so nothing is installed.
to_install() {
  if ((planning)); then
    echo "  $1: $( (($2)) && echo ready || echo "to install")"
    return 1
  fi
  ((!$2))
}

stamp_of() { sha256sum "$@" | sha256sum | cut -c1-16; }
stamped() { [[ -e "$1" && "$(cat "$2" 2>/dev/null)" == "$3" ]] && echo 1 || echo 0; }  # TARGET STAMP_FILE WANT
need_javac() {
  command -v javac >/dev/null || { echo "bootstrap: javac not found: install a Java 17 JDK, not only a JRE" >&2; exit 1; }
}

python_bin="${GROUPSCOPE_PYTHON:-python3.11}"
command -v "$python_bin" >/dev/null || python_bin=python3
venv="$root/.venv"
install_venv() {
  local want
  want="$(stamp_of pyproject.toml)"
  to_install venv "$(stamped "$venv/bin/python" "$venv/.groupscope-stamp" "$want")" || return 0
  echo "bootstrap: installing Python packages into .venv (pyspark builds from source the first time: a few minutes)" >&2
  "$python_bin" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -e ".[dev,lab]"
  echo "$want" >"$venv/.groupscope-stamp"
}

# Spark already ships Hadoop, Parquet, Jackson, logging, Scala and the codecs; loading a second copy
# of those from Delta's POM only risks clashes.
spark_excludes="org.apache.hadoop,org.apache.parquet,com.fasterxml.jackson.core,com.fasterxml.jackson.datatype,org.apache.logging.log4j,org.slf4j,org.scala-lang,org.xerial.snappy,com.github.luben,org.lz4,commons-logging,javax.annotation,com.google.code.findbugs,at.yawk.lz4,io.airlift,commons-pool,org.locationtech.jts"
# Hadoop's S3A for s3a:// warehouses and inputs (docs/s3.md): hadoop-aws and the few AWS SDK modules it
# calls; Netty, the Apache HTTP client, commons-codec/-logging and SLF4J are Spark's own copies.
s3_excludes="io.netty,org.apache.httpcomponents,commons-codec,commons-logging,org.slf4j"
fetch_jars() {  # $1 = folder under jvm/ holding pom.xml; $2 = groupIds to exclude
  local dir="jvm/$1" want log
  want="$(stamp_of "$dir/pom.xml")-$(echo "${2:-}" | sha256sum | cut -c1-8)"
  to_install "jars:$1" "$(stamped "$dir/jars" "$dir/jars/.stamp" "$want")" || return 0
  echo "bootstrap: fetching $1 jars from Maven Central (cached in ~/.m2)" >&2
  rm -rf "$dir/jars"
  # Maven's console writes colour resets even in quiet batch mode: its output is shown only on failure.
  log="$(mktemp)"
  if ! mvn -q -B -Dstyle.color=never -f "$dir/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$root/$dir/jars" ${2:+-DexcludeGroupIds="$2"} >"$log" 2>&1; then
    sed 's/\x1b\[[0-9;]*m//g' "$log" >&2
    rm -f "$log"
    echo "bootstrap: Maven could not fetch the $1 jars (above); is Maven Central reachable?" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$want" >"$dir/jars/.stamp"
}

# groupscope's Java for Spark's JVMs, compiled against the pinned pyspark's jars and placed with the other
# Spark jars, so spark-submit.sh (--jars), direct sessions (spark.jars) and the SQL launchers' driver class
# path all load it: the decoder's fast path (jvm/decoder), and the Thrift server's password check
# (jvm/thriftserver, [thriftserver] authentication = "password").
compile_for_spark() {  # $1 = step and folder under jvm/; $2 = what it is, for the console
  local jar="jvm/spark/jars/groupscope-$1.jar" want pyspark_jars classes
  want="$(stamp_of "jvm/$1"/src/groupscope/*.java pyproject.toml)"
  to_install "$1" "$(stamped "$jar" "jvm/spark/jars/.$1-stamp" "$want")" || return 0
  echo "bootstrap: compiling $2 (jvm/$1)" >&2
  need_javac
  pyspark_jars="$("$venv/bin/python" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')"
  classes="$(mktemp -d)"
  javac -nowarn --release 17 -cp "$pyspark_jars/*" -d "$classes" "jvm/$1"/src/groupscope/*.java
  # Written beside it and renamed over it: a Spark JVM already running keeps reading the old file.
  jar cf "$jar.new" -C "$classes" groupscope
  mv -f "$jar.new" "$jar"
  rm -rf "$classes"
  echo "$want" >"jvm/spark/jars/.$1-stamp"
}

# The what-if replay runs Kafka's own assignors (jvm/assignors: the pinned kafka-clients and group
# coordinator) in a JVM of its own beside the history step; its one class is compiled against them.
compile_assignor_replay() {
  local jar="jvm/assignors/jars/groupscope-assignors.jar" want classes
  want="$(stamp_of jvm/assignors/src/groupscope/*.java jvm/assignors/pom.xml)"
  to_install assignor-replay "$(stamped "$jar" jvm/assignors/jars/.replay-stamp "$want")" || return 0
  echo "bootstrap: compiling the assignor replay (jvm/assignors)" >&2
  need_javac
  classes="$(mktemp -d)"
  javac -nowarn -XDsuppressNotes --release 17 -cp "jvm/assignors/jars/*" -d "$classes" jvm/assignors/src/groupscope/*.java
  jar cf "$jar.new" -C "$classes" groupscope
  mv -f "$jar.new" "$jar"
  rm -rf "$classes"
  echo "$want" >jvm/assignors/jars/.replay-stamp
}

# The group report's charting library (Apache ECharts, report/package.json, pinned by its lock file),
# copied beside every report the report job writes: the sites open from disk with no network.
install_report_charts() {
  local want
  want="$(stamp_of report/package.json report/package-lock.json)"
  to_install report-charts "$(stamped report/node_modules/echarts/dist/echarts.min.js report/node_modules/.groupscope-stamp "$want")" ||
    return 0
  # Only the report needs it: without npm every other job still runs, and the report job says what is missing.
  if ! command -v npm >/dev/null; then
    echo "bootstrap: npm not found, so the group report's charting library is not installed (Debian: apt-get install npm)" >&2
    return 0
  fi
  echo "bootstrap: installing the report's charting library (npm ci in report/)" >&2
  npm ci --prefix report --no-audit --no-fund --loglevel=error >/dev/null
  echo "$want" >report/node_modules/.groupscope-stamp
}

# install_debian_package STEP PACKAGE PRESENT WHY: Debian's own build, through apt, which needs root.
install_debian_package() {
  local log
  to_install "$1" "$3" || return 0
  echo "bootstrap: installing Debian's $2 ($4)" >&2
  [[ "$(id -u)" == 0 ]] || { echo "bootstrap: $2 is missing and installing it needs root: apt-get install $2" >&2; exit 1; }
  log="$(mktemp)"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get install -y -q "$2" || { apt-get update -q && apt-get install -y -q "$2"; }; } >"$log" 2>&1; then
    tail -5 "$log" >&2
    echo "bootstrap: apt-get install $2 failed (log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
}
present() { "$@" >/dev/null 2>&1 && echo 1 || echo 0; }

for step in "${steps[@]}"; do
  case "$step" in
    venv) install_venv ;;
    jars:spark) fetch_jars spark "$spark_excludes" ;;
    jars:s3) fetch_jars s3 "$s3_excludes" ;;
    jars:*) fetch_jars "${step#jars:}" ;;
    decoder) compile_for_spark decoder "the decoder's Java fast path" ;;
    thriftserver) compile_for_spark thriftserver "the Thrift server's password check" ;;
    assignor-replay) compile_assignor_replay ;;
    report-charts) install_report_charts ;;
    # The metastore service keeps its tables in a private cluster of Debian's PostgreSQL (scripts/metastore.sh).
    postgresql) install_debian_package postgresql postgresql "$(present compgen -G '/usr/lib/postgresql/*/bin')" \
      "the Hive metastore's database" ;;
    # The report's tests drive Debian's Chromium headless (tests/integration/test_report.py): a browser from
    # the distribution, not one a test library downloads.
    chromium) install_debian_package chromium chromium "$(present command -v chromium)" "the report's browser tests" ;;
  esac
done
if ((planning)); then exit "$EXIT_PLANNED"; fi
