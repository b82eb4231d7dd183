"""The history fold's package is pure Python, like the decoder: importing any of its modules loads no
pyspark, and it folds a group's records where pyspark cannot be imported at all (Spark's Python workers
run it over Arrow batches; its tests need no JVM). Each check runs in a fresh interpreter. No Spark.
"""

from __future__ import annotations

from tests.unit.test_decoder_package import BLOCK_PYSPARK, import_every_module, run_python

IMPORT_EVERY_MODULE = (
    import_every_module("transforms.history")
    + """
loaded = sorted(name for name in sys.modules if name == "pyspark" or name.startswith("pyspark."))
"""
)


def test_importing_every_history_module_loads_no_pyspark():
    result = run_python(IMPORT_EVERY_MODULE + "print(len(names), loaded)")
    assert result.returncode == 0, result.stderr
    count, loaded = result.stdout.split(" ", 1)
    assert int(count) >= 7, "the walk found the package's modules"
    assert loaded.strip() == "[]"


def test_the_fold_folds_a_group_with_pyspark_unimportable():
    result = run_python(
        BLOCK_PYSPARK
        + IMPORT_EVERY_MODULE
        + """
from datetime import datetime
from transforms.history.fold import fold
from transforms.history.records import classic_records

at = datetime(2026, 1, 1)
metadata = {"cluster": "c", "group_id": "g", "record_id": "c/0/0", "source_partition": 0, "source_offset": 0,
            "record_at": at, "is_tombstone": False, "protocol_type": "consumer", "generation": 1,
            "protocol": "range", "leader": "m1", "state_changed_at": at}
member = {"record_id": "c/0/0", "member_index": 0, "member_id": "m1", "group_instance_id": None, "client_id": "c",
          "client_host": "/h", "rack_id": None, "session_timeout_ms": 45000, "rebalance_timeout_ms": 300000,
          "subscribed_topics": ["t"], "assigned_partitions": [{"topic": "t", "partitions": [0, 1]}]}
record = classic_records([metadata], [member])[0]
rows, state = fold(None, [record])
print(len(rows.tables["generations"]), len(rows.tables["generation_assignments"]), len(rows.tables["rebalances"]))
"""
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "2", "1"]
