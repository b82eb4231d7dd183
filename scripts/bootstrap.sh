#!/usr/bin/env bash
# Installs what groupscope needs, idempotently: a Python venv from the pinned pyproject.toml and the
# JVM jars (Delta, Spark's Kafka source, the Kafka brokers for lab/) from Maven Central, and compiles
# groupscope's own Java (the decoder's fast path, jvm/decoder) against Spark's jars. A second run
# with nothing changed does no network I/O: stamps record what was installed from which inputs.
# Arguments name more jar sets (folders under jvm/) to fetch, for the scripts that need them:
# scripts/metastore.sh asks for `metastore`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Launchers started together on a fresh machine wait for one install instead of racing pip and Maven.
exec 8>"$root/.bootstrap.lock"
flock 8

python_bin="${GROUPSCOPE_PYTHON:-python3.11}"
command -v "$python_bin" >/dev/null || python_bin=python3
venv="$root/.venv"

stamp_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

want="$(stamp_of pyproject.toml)"
if [[ ! -x "$venv/bin/python" || "$(cat "$venv/.groupscope-stamp" 2>/dev/null)" != "$want" ]]; then
  echo "bootstrap: installing Python packages into .venv (pyspark builds from source the first time: a few minutes)" >&2
  "$python_bin" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -e ".[dev,lab]"
  echo "$want" > "$venv/.groupscope-stamp"
fi

# Spark already ships Hadoop, Parquet, Jackson, logging, Scala and the codecs; loading a second copy
# of those from Delta's POM only risks clashes.
spark_excludes="org.apache.hadoop,org.apache.parquet,com.fasterxml.jackson.core,com.fasterxml.jackson.datatype,org.apache.logging.log4j,org.slf4j,org.scala-lang,org.xerial.snappy,com.github.luben,org.lz4,commons-logging,javax.annotation,com.google.code.findbugs,at.yawk.lz4,io.airlift,commons-pool,org.locationtech.jts"
fetch_jars() {  # $1 = folder under jvm/ holding pom.xml; $2 = groupIds to exclude
  local dir="jvm/$1" want
  want="$(stamp_of "$dir/pom.xml")-$(echo "${2:-}" | sha256sum | cut -c1-8)"
  if [[ -d "$dir/jars" && "$(cat "$dir/jars/.stamp" 2>/dev/null)" == "$want" ]]; then return; fi
  echo "bootstrap: fetching $1 jars from Maven Central (cached in ~/.m2)" >&2
  rm -rf "$dir/jars"
  # Maven's console writes colour resets even in quiet batch mode: its output is shown only on failure.
  local log
  log="$(mktemp)"
  if ! mvn -q -B -Dstyle.color=never -f "$dir/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$root/$dir/jars" ${2:+-DexcludeGroupIds="$2"} >"$log" 2>&1; then
    sed 's/\x1b\[[0-9;]*m//g' "$log" >&2
    rm -f "$log"
    echo "bootstrap: Maven could not fetch the $1 jars (above); is Maven Central reachable?" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$want" > "$dir/jars/.stamp"
}
fetch_jars spark "$spark_excludes"
# Hadoop's S3A for s3a:// warehouses and inputs (docs/s3.md): hadoop-aws and the few AWS SDK modules it
# calls; Netty, the Apache HTTP client, commons-codec/-logging and SLF4J are Spark's own copies.
fetch_jars s3 "io.netty,org.apache.httpcomponents,commons-codec,commons-logging,org.slf4j"

# The decoder's fast path is one Java class compiled against the pinned pyspark's jars and placed with
# the other Spark jars, so spark-submit.sh (--jars) and direct sessions (spark.jars) both load it.
decoder_jar="jvm/spark/jars/groupscope-decoder.jar"
want="$(stamp_of jvm/decoder/src/groupscope/*.java pyproject.toml)"
if [[ ! -f "$decoder_jar" || "$(cat jvm/spark/jars/.decoder-stamp 2>/dev/null)" != "$want" ]]; then
  echo "bootstrap: compiling the decoder's Java fast path (jvm/decoder)" >&2
  command -v javac >/dev/null || { echo "bootstrap: javac not found: install a Java 17 JDK, not only a JRE" >&2; exit 1; }
  pyspark_jars="$("$venv/bin/python" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')"
  classes="$(mktemp -d)"
  javac -nowarn --release 17 -cp "$pyspark_jars/*" -d "$classes" jvm/decoder/src/groupscope/*.java
  # Written beside it and renamed over it: a Spark JVM already running keeps reading the old file.
  jar cf "$decoder_jar.new" -C "$classes" groupscope
  mv -f "$decoder_jar.new" "$decoder_jar"
  rm -rf "$classes"
  echo "$want" > jvm/spark/jars/.decoder-stamp
fi
# The what-if replay runs Kafka's own assignors (jvm/assignors: the pinned kafka-clients and group
# coordinator) in a JVM of its own beside the history step; its one class is compiled against them.
fetch_jars assignors
replay_jar="jvm/assignors/jars/groupscope-assignors.jar"
want="$(stamp_of jvm/assignors/src/groupscope/*.java jvm/assignors/pom.xml)"
if [[ ! -f "$replay_jar" || "$(cat jvm/assignors/jars/.replay-stamp 2>/dev/null)" != "$want" ]]; then
  echo "bootstrap: compiling the assignor replay (jvm/assignors)" >&2
  command -v javac >/dev/null || { echo "bootstrap: javac not found: install a Java 17 JDK, not only a JRE" >&2; exit 1; }
  classes="$(mktemp -d)"
  javac -nowarn -XDsuppressNotes --release 17 -cp "jvm/assignors/jars/*" -d "$classes" jvm/assignors/src/groupscope/*.java
  jar cf "$replay_jar.new" -C "$classes" groupscope
  mv -f "$replay_jar.new" "$replay_jar"
  rm -rf "$classes"
  echo "$want" > jvm/assignors/jars/.replay-stamp
fi
# The group report's charting library (Apache ECharts, report/package.json, pinned by its lock file),
# copied beside every report the report job writes: the sites open from disk with no network.
want="$(stamp_of report/package.json report/package-lock.json)"
if [[ ! -f report/node_modules/echarts/dist/echarts.min.js || "$(cat report/node_modules/.groupscope-stamp 2>/dev/null)" != "$want" ]]; then
  # Only the report needs it: without npm every other job still runs, and the report job says what is missing.
  if command -v npm >/dev/null; then
    echo "bootstrap: installing the report's charting library (npm ci in report/)" >&2
    npm ci --prefix report --no-audit --no-fund --loglevel=error >/dev/null
    echo "$want" > report/node_modules/.groupscope-stamp
  else
    echo "bootstrap: npm not found, so the group report's charting library is not installed (Debian: apt-get install npm)" >&2
  fi
fi
if [[ "${GROUPSCOPE_SKIP_KAFKA_JARS:-0}" != 1 ]]; then
  fetch_jars kafka-4
  fetch_jars kafka-3.9
  fetch_jars kafka-4.3
  fetch_jars kafka-4.4  # the newest line Maven Central serves (broker and tools), for lab/
  # The lab's Kafka Streams application (lab/streams) of each line it runs on, apart from the broker's jars.
  fetch_jars kafka-streams
  fetch_jars kafka-streams-4.3
  fetch_jars kafka-streams-4.4
  # S3-compatible servers the tests start on loopback (scripts/s3proxy.sh): the current s3proxy, and
  # 2.6.0, which ignores conditional writes (a store the run lock must refuse).
  fetch_jars s3proxy
  fetch_jars s3proxy-2.6
  # The report's tests drive Debian's Chromium headless (tests/integration/test_report.py): a browser from
  # the distribution, not one a test library downloads.
  if ! command -v chromium >/dev/null; then
    echo "bootstrap: installing Debian's chromium for the report's browser tests" >&2
    [[ "$(id -u)" == 0 ]] || { echo "bootstrap: chromium is missing and installing it needs root: apt-get install chromium" >&2; exit 1; }
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi
for extra in "$@"; do fetch_jars "$extra"; done
