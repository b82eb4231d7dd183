"""Tests with the real things running: a Kafka broker, spark-submit.sh runs (local and on a standalone
cluster, killed and rerun), the Thrift server, Airflow.
"""
