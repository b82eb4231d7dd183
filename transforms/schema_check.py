"""Checks a transform's output against its table's declared schema, instead of casting to it.

A cast to the declared type hides a wrong type: a long cast to int is truncated, a string cast to a
number is null. So a transform selects its columns as they are (casting only where a conversion is
meant, such as epoch ms to TIMESTAMP) and this check refuses any difference in column names, order or
types, naming the table, the column, the declared type and the one found. Types are compared as
Spark writes them (`simpleString`, nested fields and element types included) without nullability:
Spark derives that from expressions, and the table enforces its own on write.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType


class SchemaMismatch(TypeError):
    """A transform's output differs from its table's declared schema."""


def check_declared_types(rows: DataFrame, declared: StructType, table: str) -> DataFrame:
    """`rows`, unchanged, when its columns are the declared ones in order with the declared types."""
    found_names, declared_names = rows.schema.names, declared.names
    if found_names != declared_names:
        raise SchemaMismatch(f"{table}: declared columns {declared_names}, found {found_names}")
    for found, wanted in zip(rows.schema.fields, declared.fields, strict=True):
        declared_type, found_type = wanted.dataType.simpleString(), found.dataType.simpleString()
        if found_type != declared_type:
            raise SchemaMismatch(f"{table}.{wanted.name}: declared {declared_type}, found {found_type}")
    return rows
