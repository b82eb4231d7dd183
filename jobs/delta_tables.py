"""`DeltaTable` for the jobs, on either kind of session.

A classic session gets delta-spark's own class, unchanged. A Spark Connect session gets `SqlDeltaTable`: the
same calls, made as Delta's SQL (MERGE INTO, DELETE FROM, DESCRIBE DETAIL / HISTORY, CREATE TABLE). delta-spark's
Python API over Connect sends Delta's own plan messages, which a server handles only with Delta's Connect
plugin (io.delta:delta-connect-server), and Maven Central has no build of it for Spark 4.2 / Delta 4.4; SQL
needs nothing on the server but Delta's session extension. Only what the jobs call is here.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from delta.tables import DeltaTable as _ClassicDeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType


def is_connect(spark: SparkSession) -> bool:
    """A Spark Connect session (pyspark.sql.connect), whose client has no JVM behind it."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _quoted(name: str) -> str:
    return ".".join(f"`{part}`" for part in name.split("."))


def _quoted_column(name: str) -> str:
    """A column name as delta-spark takes it in a values map, backquoted or not, backquoted once."""
    return name if name.startswith("`") else f"`{name}`"


def _column(field: StructField) -> str:
    return f"`{field.name}` {field.dataType.simpleString()}{'' if field.nullable else ' NOT NULL'}"


class _Merge:
    """MERGE INTO target USING source ON condition, with its clauses in the order they were added."""

    def __init__(self, table: SqlDeltaTable, source: DataFrame, condition: str | Column) -> None:
        self._table, self._source, self._condition = table, source, condition
        self._clauses: list[str] = []

    def _add(self, clause: str, condition: str | None, action: str) -> _Merge:
        self._clauses.append(f"{clause}{f' AND ({condition})' if condition else ''} THEN {action}")
        return self

    def whenMatchedUpdate(self, condition: str | None = None, set: Mapping[str, str] | None = None) -> _Merge:
        target = self._table.alias_name
        assignments = ", ".join(f"{target}.`{column}` = {value}" for column, value in (set or {}).items())
        return self._add("WHEN MATCHED", condition, f"UPDATE SET {assignments}")

    def whenMatchedDelete(self, condition: str | None = None) -> _Merge:
        return self._add("WHEN MATCHED", condition, "DELETE")

    def whenMatchedUpdateAll(self, condition: str | None = None) -> _Merge:
        return self._add("WHEN MATCHED", condition, "UPDATE SET *")

    def whenNotMatchedInsert(self, condition: str | None = None, values: Mapping[str, str] | None = None) -> _Merge:
        values = values or {}
        columns, inserted = ", ".join(map(_quoted_column, values)), ", ".join(values.values())
        return self._add("WHEN NOT MATCHED", condition, f"INSERT ({columns}) VALUES ({inserted})")

    def whenNotMatchedInsertAll(self, condition: str | None = None) -> _Merge:
        return self._add("WHEN NOT MATCHED", condition, "INSERT *")

    def execute(self) -> None:
        if isinstance(self._condition, Column):
            self._insert_unmatched()
            return
        spark, view = self._table.spark, f"groupscope_merge_source_{uuid.uuid4().hex}"
        self._source.createOrReplaceTempView(view)
        try:
            spark.sql(
                f"MERGE INTO {_quoted(self._table.name)} AS {self._table.alias_name} USING {view} AS source"
                f" ON {self._condition} {' '.join(self._clauses)}"
            ).collect()
        finally:
            spark.catalog.dropTempView(view)

    def _insert_unmatched(self) -> None:
        """An insert-only merge on a Column condition (SQL text cannot carry one): the source rows that match
        no target row, appended, as Delta itself runs such a merge (an anti join, then an append)."""
        if self._clauses != ["WHEN NOT MATCHED THEN INSERT *"]:
            raise NotImplementedError("through Spark Connect a merge on a Column condition can only insert")
        table = self._table
        target = table.spark.table(table.name).alias(table.alias_name)
        unmatched = self._source.join(target, on=self._condition, how="left_anti")
        location = table_location(table.spark, table.name)
        unmatched.select(*target.columns).write.format("delta").mode("append").save(location)


class _CreateIfNotExists:
    """CREATE TABLE IF NOT EXISTS ... USING delta, as delta-spark's builder makes it."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._name = ""
        self._columns: list[StructField] = []
        self._partitions: Sequence[str] = ()
        self._location: str | None = None
        self._properties: dict[str, str] = {}

    def tableName(self, name: str) -> _CreateIfNotExists:
        self._name = name
        return self

    def addColumns(self, schema: StructType) -> _CreateIfNotExists:
        self._columns += schema.fields
        return self

    def location(self, location: str) -> _CreateIfNotExists:
        self._location = location
        return self

    def partitionedBy(self, *columns: str) -> _CreateIfNotExists:
        self._partitions = columns
        return self

    def property(self, key: str, value: str) -> _CreateIfNotExists:
        self._properties[key] = value
        return self

    def execute(self) -> None:
        columns = ", ".join(map(_column, self._columns))
        text = f"CREATE TABLE IF NOT EXISTS {_quoted(self._name)} ({columns}) USING delta"
        if self._partitions:
            text += f" PARTITIONED BY ({', '.join(f'`{column}`' for column in self._partitions)})"
        if self._location:
            text += " LOCATION '" + self._location.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if self._properties:
            properties = ", ".join(f"'{key}' = '{value}'" for key, value in self._properties.items())
            text += f" TBLPROPERTIES ({properties})"
        self._spark.sql(text).collect()


class _Optimize:
    """OPTIMIZE table [WHERE predicate]: its result is executeCompaction's (path, metrics)."""

    def __init__(self, table: SqlDeltaTable) -> None:
        self._table, self._where = table, ""

    def where(self, predicate: str) -> _Optimize:
        self._where = f" WHERE {predicate}"
        return self

    def executeCompaction(self) -> DataFrame:
        return self._table.spark.sql(f"OPTIMIZE {_quoted(self._table.name)}{self._where}")


class SqlDeltaTable:
    """The calls the jobs make on delta-spark's DeltaTable, through SQL (Spark Connect sessions)."""

    def __init__(self, spark: SparkSession, name: str, alias_name: str = "target") -> None:
        self.spark, self.name, self.alias_name = spark, name, alias_name

    @classmethod
    def forName(cls, spark: SparkSession, name: str) -> SqlDeltaTable:
        return cls(spark, name)

    @classmethod
    def createIfNotExists(cls, spark: SparkSession) -> _CreateIfNotExists:
        return _CreateIfNotExists(spark)

    def alias(self, alias_name: str) -> SqlDeltaTable:
        return SqlDeltaTable(self.spark, self.name, alias_name)

    def toDF(self) -> DataFrame:
        return self.spark.table(self.name)

    def merge(self, source: DataFrame, condition: str | Column) -> _Merge:
        # The jobs alias the source "source" (rows.alias("source")), and the condition says so.
        return _Merge(self, source, condition)

    def delete(self, condition: str | None = None) -> None:
        if isinstance(condition, Column):  # SQL text cannot carry a Column
            raise NotImplementedError("a delete on a Column condition has no Spark Connect path: give SQL text")
        self.spark.sql(f"DELETE FROM {_quoted(self.name)}{f' WHERE {condition}' if condition else ''}").collect()

    def detail(self) -> DataFrame:
        return self.spark.sql(f"DESCRIBE DETAIL {_quoted(self.name)}")

    def optimize(self) -> _Optimize:
        return _Optimize(self)

    def vacuum(self) -> DataFrame:
        return self.spark.sql(f"VACUUM {_quoted(self.name)}")

    def history(self, limit: int | None = None) -> DataFrame:
        return self.spark.sql(f"DESCRIBE HISTORY {_quoted(self.name)}{f' LIMIT {int(limit)}' if limit else ''}")


class DeltaTable:
    """delta-spark's DeltaTable for a classic session, SqlDeltaTable for a Spark Connect one."""

    @staticmethod
    def forName(spark: SparkSession, name: str):
        return (SqlDeltaTable if is_connect(spark) else _ClassicDeltaTable).forName(spark, name)

    @staticmethod
    def createIfNotExists(spark: SparkSession):
        return (SqlDeltaTable if is_connect(spark) else _ClassicDeltaTable).createIfNotExists(spark)


def table_location(spark: SparkSession, name: str) -> str:
    """The table's location as the catalog holds it: DESCRIBE runs no Spark job, where Delta's detail()
    runs one, and every write asks."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect():
        if row.col_name == "Location":
            return row.data_type
    raise LookupError(f"{name}: the catalog names no location for it")
