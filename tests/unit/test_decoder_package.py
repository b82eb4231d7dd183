"""The decoder package is pure Python: importing it never loads pyspark, and it decodes without one;
bad bytes in either of its layers are one error type.

`jobs.dump` runs it with no JVM and Spark's Python workers import it for every task, so a pyspark
import slipping into it would make the one cost heavy and the other circular. Each check runs in a
fresh interpreter: this test process may have loaded pyspark already. No Spark.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO_ROOT
from transforms.decoder.compression import decompress
from transforms.decoder.errors import CorruptRecordError
from transforms.decoder.layout_reader import read_uvarint


def import_every_module(package: str) -> str:
    """Code that imports every module of `package`, found by walking it (so a new module is covered
    without editing a list), leaving their names in `names`."""
    return f"""
import importlib, pkgutil, sys
import {package} as package
names = [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
for name in names:
    importlib.import_module(name)
"""


IMPORT_EVERY_MODULE = import_every_module("transforms.decoder")
# As on a machine without pyspark: any attempt to import it fails.
BLOCK_PYSPARK = """
import sys
from importlib.abc import MetaPathFinder

class NoPyspark(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None

sys.meta_path.insert(0, NoPyspark())
"""


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def test_importing_every_decoder_module_loads_no_pyspark():
    result = run_python(
        IMPORT_EVERY_MODULE
        + """
import sys
loaded = sorted(name for name in sys.modules if name == "pyspark" or name.startswith("pyspark."))
print(len(names), loaded)
"""
    )
    assert result.returncode == 0, result.stderr
    count, loaded = result.stdout.split(" ", 1)
    assert int(count) >= 8, "the walk found the package's modules"
    assert loaded.strip() == "[]"


def test_the_decoder_reads_and_decodes_a_segment_with_pyspark_unimportable():
    """As on a machine without pyspark: any attempt to import it fails, and decoding still works."""
    result = run_python(
        BLOCK_PYSPARK
        + IMPORT_EVERY_MODULE
        + """
from bench import batch_builder as bb
from bench.encoding import i16, i32, i64, string
from transforms.decoder.decode_rows import decode_raw_row
from transforms.decoder.record_batches import read_segment_bytes

key = i16(1) + string("g") + string("t") + i32(0)
value = i16(3) + i64(42) + i32(-1) + string("") + i64(1700000000000)
(record,) = read_segment_bytes(bb.batch_v2(0, [bb.Rec(key, value)]), partition=3)
raw = {"cluster": "c", "record_id": "c/3/0", "source_partition": 3, "source_offset": 0, "record_at": 0,
       "key": record.key, "value": record.value}
row = decode_raw_row(raw)
print(row["destination"], row["group_id"], row["committed_offset"])
"""
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["offset_commit", "g", "42"]


def test_the_log_layer_and_the_record_layer_raise_one_error_with_where_expected_found():
    with pytest.raises(CorruptRecordError) as log_layer:
        decompress(1, b"\x1f\x8b not really gzip")
    with pytest.raises(CorruptRecordError) as record_layer:
        read_uvarint(b"\x80", 0)
    assert (log_layer.value.where, log_layer.value.expected) == ("gzip payload of 18 bytes", "bytes that decompress")
    assert str(log_layer.value).startswith("gzip payload of 18 bytes does not decompress: ")  # the wording kept
    assert (record_layer.value.where, record_layer.value.expected, record_layer.value.found) == (
        "byte 0",
        "an unsigned varint",
        "the end of the buffer",
    )
    assert str(record_layer.value) == "byte 0: expected an unsigned varint, found the end of the buffer"
