"""The generator's small sample used by the tests: about a thousand records in every shape the
generator writes (compression mixed, snapshots, churn), fast enough for every test run."""

SAMPLE_ARGS = ["--groups", "40", "--topics", "24", "--max-partitions", "6", "--churn-minutes", "2",
               "--window-seconds", "900", "--compression", "mixed", "--snapshots", "12", "--workers", "1"]  # fmt: skip
