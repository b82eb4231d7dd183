"""The steps the jobs run: each `step(spark, config, run)` reads, calls transforms and writes.

A job (jobs/<name>.py) is its step behind `run_job`; the nightly job runs several, so steps live here
and jobs never import each other.
"""
