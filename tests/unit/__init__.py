"""Tests that need no Spark: the decoder, configuration, the launcher's checks and Kafka's own
decoder as the oracle (a JVM tool, no broker). Seconds.
"""
