#!/usr/bin/env bash
# SQL over groupscope's tables: ./spark-sql.sh [-e 'SELECT ...'] [spark-sql options]
# Uses the same warehouse and embedded metastore as the jobs (./warehouse by default; override with
# GROUPSCOPE_WAREHOUSE). Derby allows one process at a time: while a job runs this exits 75, and a job
# started while this shell is open is refused the same way.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GROUPSCOPE_SKIP_KAFKA_JARS="${GROUPSCOPE_SKIP_KAFKA_JARS:-1}" "$root/scripts/bootstrap.sh"
warehouse="$(realpath -m "${GROUPSCOPE_WAREHOUSE:-$root/warehouse}")"
mkdir -p "$warehouse"
source "$root/scripts/embedded_metastore.sh"
hold_embedded_metastore "$warehouse"
jars="$(ls "$root"/jvm/spark/jars/*.jar | paste -sd,)"
# The venv's Spark launchers find Spark through the Python on PATH; point them at the venv's pyspark.
export PATH="$root/.venv/bin:$PATH"
export SPARK_HOME="$("$root/.venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
exec "$root/.venv/bin/spark-sql" \
  --properties-file "$root/conf/spark-defaults.conf" \
  --jars "$jars" \
  --conf "spark.sql.warehouse.dir=$warehouse" \
  --conf "spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName=$warehouse/metastore_db;create=true" \
  --conf "spark.hadoop.datanucleus.schema.autoCreateAll=true" \
  --conf "spark.hadoop.hive.metastore.schema.verification=false" \
  --conf "spark.driver.extraJavaOptions=-Dderby.system.home=$warehouse -Dlog4j2.configurationFile=$root/conf/log4j2.properties" \
  --conf "spark.ui.enabled=false" \
  --hiveconf hive.cli.print.header=true \
  "$@"
