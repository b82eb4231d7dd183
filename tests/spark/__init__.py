"""Tests on a local SparkSession (conftest `spark`) over tiny frames and the lab's real captures; no
broker, no spark-submit.
"""
