# Sourced by the launchers that start a Spark driver of their own (./spark-submit.sh, ./spark-sql.sh).
#
# bind_local_driver_to_loopback MASTER: a driver on a local master binds its ports (RPC, block manager) to
# 127.0.0.1, not to the external address Spark would guess: nothing outside the machine needs them, and
# the driver holds the S3 credentials. SPARK_LOCAL_IP already set wins; a cluster master keeps Spark's
# choice, an address its executors can reach.
bind_local_driver_to_loopback() {
  if [[ "$1" == local* ]]; then export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"; fi
}
