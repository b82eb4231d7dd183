"""The one helper the Delta table declarations share (schemas/bronze.py, silver.py, gold.py, ops.py)."""

from __future__ import annotations

from pyspark.sql.types import DataType, StructField


def column(name: str, data_type: DataType, nullable: bool = True) -> StructField:
    """A column, nullable unless said otherwise: the declarations name the non-null ones."""
    return StructField(name, data_type, nullable)
