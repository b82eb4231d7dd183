"""Records every Spark action a groupscope job's driver runs, with the groupscope frames that called it.

Python imports this module at start-up when its directory is on PYTHONPATH (a `sitecustomize`); it does
nothing unless GROUPSCOPE_ACTION_LOG names a file. Then each top-level action (a DataFrame's count,
collect, first, isEmpty, take, head, localCheckpoint, toArrow, toPandas; a write; a Delta MERGE, update
or delete) appends one tab-separated line: start (epoch seconds), wall seconds, the action, and the
calling frames in jobs/ and transforms/, innermost first. Actions an action runs are its own time, not
lines of their own. `python -m bench.actions` reads the file. For measurements only: it wraps pyspark's
and delta-spark's classes in the driver it runs in.
"""

import builtins
import functools
import os
import threading
import time
import traceback
from pathlib import Path

_LOG = os.environ.get("GROUPSCOPE_ACTION_LOG")
_inside = threading.local()
_DATAFRAME_ACTIONS = ("count", "collect", "first", "isEmpty", "take", "head", "localCheckpoint", "toArrow", "toPandas")


def _callers() -> str:
    """The calling frames in jobs/ and transforms/, innermost first, as `steps/history.py:300:history`."""
    stack = traceback.extract_stack()
    own = [frame for frame in stack if "/jobs/" in frame.filename or "/transforms/" in frame.filename]
    return "\t".join(
        f"{Path(frame.filename).parent.name}/{Path(frame.filename).name}:{frame.lineno}:{frame.name}"
        for frame in reversed(own)
    )


def _timed(cls, name: str) -> None:
    original = getattr(cls, name)

    @functools.wraps(original)
    def action(*args, **kwargs):
        if getattr(_inside, "action", False):
            return original(*args, **kwargs)
        _inside.action = True
        start = time.time()
        try:
            return original(*args, **kwargs)
        finally:
            _inside.action = False
            with open(_LOG, "a") as log:
                log.write(f"{start:.3f}\t{time.time() - start:.3f}\t{cls.__name__}.{name}\t{_callers()}\n")

    setattr(cls, name, action)


def _install() -> None:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.readwriter import DataFrameWriter

    for name in _DATAFRAME_ACTIONS:
        _timed(DataFrame, name)
    for name in ("save", "saveAsTable"):
        _timed(DataFrameWriter, name)
    _timed(DeltaMergeBuilder, "execute")
    for name in ("update", "delete"):
        _timed(DeltaTable, name)


if _LOG:
    # Installed once the job's own modules load (pyspark is importable by then: spark-submit put it on the path).
    _import = builtins.__import__

    def _import_then_install(name, *args, **kwargs):
        module = _import(name, *args, **kwargs)
        if name.startswith("jobs") and builtins.__import__ is _import_then_install:
            builtins.__import__ = _import
            _install()
        return module

    builtins.__import__ = _import_then_install
