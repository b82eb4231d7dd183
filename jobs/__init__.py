"""groupscope's jobs: the modules named in JOBS are the ones `./spark-submit.sh JOB` runs.

Kept free of imports so that `python -m jobs` (the usage and the preflight check) answers in a
fraction of a second, before any JVM starts.
"""

JOBS = {
    "nightly": "all of the below in order (capture only when a cluster is configured)",
    "capture": "new __consumer_offsets records from a live cluster ([capture])",
    "end_offsets": "snapshot the consumed topics' end offsets (or --from-files lab captures)",
    "ingest": "segment files and landed tables into raw_records (new rows only)",
    "decode": "raw_records into the silver tables; fails unless raw = decoded + quarantined",
    "history": "generations, rebalances, causes, partition movements, frequency",
    "metrics": "offset and time lag, daily summaries, consumer and group status",
    "views": "create the SQL views of sql/",
    "report": "a static site of the groups: health, rebalances, ownership, lag, status (--out DIR)",
    "maintenance": "weekly: OPTIMIZE, VACUUM, raw retention",
    "forget": "undo an input: --source-file PATH or --capture-run ID, and all derived from it",
}
