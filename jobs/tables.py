"""Delta table I/O shared by the jobs: create, merge new rows, replace one cluster's rows."""

from __future__ import annotations

from collections.abc import Sequence

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType


def ensure_table(spark: SparkSession, name: str, schema: StructType, partition_by: Sequence[str] = ()) -> None:
    builder = DeltaTable.createIfNotExists(spark).tableName(name).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    builder.execute()


def merge_new_rows(spark: SparkSession, name: str, rows: DataFrame, key_columns: Sequence[str]) -> None:
    """Inserts rows whose key is not in the table yet: re-running a capture adds nothing twice."""
    condition = " AND ".join(f"target.`{column}` = source.`{column}`" for column in key_columns)
    (
        DeltaTable.forName(spark, name)
        .alias("target")
        .merge(rows.alias("source"), condition)
        .whenNotMatchedInsertAll()
        .execute()
    )


def sql_string_literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def table_location(spark: SparkSession, name: str) -> str:
    return DeltaTable.forName(spark, name).detail().select("location").first()["location"]


def replace_cluster_rows(spark: SparkSession, name: str, rows: DataFrame, cluster: str) -> None:
    """Atomically replaces one cluster's rows: a re-run or a run after a crash gives the same table.

    Written by location: the schema is fixed by `ensure_table`, and writing through the Hive catalog
    would make it try (and fail, noisily) to alter the placeholder schema it keeps for Delta tables.
    """
    (
        rows.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", f"cluster = {sql_string_literal(cluster)}")
        .save(table_location(spark, name))
    )


def cluster_row_count(spark: SparkSession, name: str, cluster: str) -> int:
    return spark.table(name).where(F.col("cluster") == F.lit(cluster)).count()
