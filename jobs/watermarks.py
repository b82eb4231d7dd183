"""What a step has covered of its input tables, kept in the commits of the tables it writes.

A step that continues from its last run (decode from raw_records, history and metrics from silver)
needs to know which versions of its inputs its outputs already hold. That note travels inside each
output commit, as the commit's `userMetadata`: the rows and the note commit together or not at all, so
a crash can never leave one without the other, and there is no side file to fall out of step.

A note is JSON: {"groupscope": step, "cluster": cluster, "covered": {input table: version}}. Reading
it is a scan of the table's history for the newest note of that step and cluster. Delta keeps history
for `delta.logRetentionDuration` (30 days by default), and every run of a step notes every table it
owns, so the newest note is always at most one run old.

What changed in an input since a version comes from Delta's Change Data Feed (`changes_since`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.appended_files import RangeFiles, missing_files, range_files, read_appended
from jobs.delta_tables import DeltaTable, is_connect
from jobs.tables import materialized, sql_string_literal

# Spark's session setting that Delta copies into the userMetadata of every commit made while it is set.
_COMMIT_NOTE_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# Delta skips a commit that adds and removes nothing; a note with no new rows must still be committed.
_RECORD_EMPTY_COMMITS_CONF = "spark.databricks.delta.skipRecordingEmptyCommits"
CHANGE_INSERT, CHANGE_UPDATE, CHANGE_DELETE = "insert", "update_postimage", "delete"


def note(step: str, cluster: str, covered: Mapping[str, int], **details: object) -> str:
    """`details`: what else the step tells its later runs (forget: the names it deleted the records of)."""
    return json.dumps({"groupscope": step, "cluster": cluster, "covered": dict(covered), **details}, sort_keys=True)


def notes(
    spark: SparkSession, table: str, step: str, cluster: str, newest: int | None = None
) -> list[tuple[int, dict[str, int]]]:
    """(version, covered) of every commit of `step` for `cluster` among the table's `newest` commits (all
    still in its history when None), newest first."""
    return [
        (version, {name: int(value) for name, value in parsed["covered"].items()})
        for version, parsed in noted_commits(spark, table, step, cluster, newest)
    ]


def noted_commits(
    spark: SparkSession, table: str, step: str, cluster: str, newest: int | None = None
) -> list[tuple[int, dict]]:
    """(version, the whole note) of every commit of `step` for `cluster`, as `notes`."""
    if not spark.catalog.tableExists(table):
        return []
    history = DeltaTable.forName(spark, table).history(*(() if newest is None else (newest,)))
    commits = (
        history.where(F.col("userMetadata").isNotNull())
        .orderBy(F.col("version").desc())
        .select("version", "userMetadata")
        .collect()
    )
    found = []
    for row in commits:
        try:
            parsed = json.loads(row["userMetadata"])
        except ValueError:
            continue
        if isinstance(parsed, dict) and parsed.get("groupscope") == step and parsed.get("cluster") == cluster:
            found.append((row["version"], parsed))
    return found


# A run commits a few times to each table it writes, so the newest note is nearly always among the last
# few commits; the whole history (a read of every commit file in it) is the fallback, not the rule.
_RECENT_COMMITS = 32


def newest_note(spark: SparkSession, table: str, step: str, cluster: str) -> dict | None:
    """The whole note of the newest commit of `step` for `cluster` to `table`; None when no such commit is
    in the table's history (never written by the step, or a table from an earlier version)."""
    found = noted_commits(spark, table, step, cluster, _RECENT_COMMITS) or noted_commits(spark, table, step, cluster)
    return found[0][1] if found else None


def covered_versions(spark: SparkSession, table: str, step: str, cluster: str) -> dict[str, int] | None:
    """The input versions the newest commit of `step` for `cluster` to `table` noted (None: as newest_note)."""
    found = newest_note(spark, table, step, cluster)
    return None if found is None else {name: int(value) for name, value in found["covered"].items()}


def current_version(spark: SparkSession, table: str) -> int:
    return DeltaTable.forName(spark, table).history(1).select("version").first()["version"]


@contextmanager
def noting(spark: SparkSession, commit_note: str) -> Iterator[None]:
    """Every Delta commit made inside carries `commit_note` (MERGE and DELETE have no writer option)."""
    spark.conf.set(_COMMIT_NOTE_CONF, commit_note)
    try:
        yield
    finally:
        spark.conf.unset(_COMMIT_NOTE_CONF)


@contextmanager
def recording_empty_commits(spark: SparkSession) -> Iterator[None]:
    """Delta commits inside even when they add and remove nothing: the note must move on."""
    spark.conf.set(_RECORD_EMPTY_COMMITS_CONF, "false")
    try:
        yield
    finally:
        spark.conf.unset(_RECORD_EMPTY_COMMITS_CONF)


def write_noted(rows: DataFrame, location: str, commit_note: str, replace_where: str | None = None) -> None:
    """Appends `rows` to the Delta table at `location` (or atomically replaces the rows matching the SQL
    predicate `replace_where`) in one commit carrying `commit_note`, committed even when there are no
    rows: the note must move on. `cluster_predicate` makes the predicate for one cluster's rows."""
    spark = rows.sparkSession
    writer = rows.write.format("delta").option("userMetadata", commit_note)
    if replace_where is None:
        writer = writer.mode("append")
    else:
        writer = writer.mode("overwrite").option("replaceWhere", replace_where)
    with recording_empty_commits(spark):
        writer.save(location)


def cluster_predicate(cluster: str) -> str:
    return f"cluster = {sql_string_literal(cluster)}"


# Delta's errors for a feed that does not cover the range: never on, turned on later, or log cleaned up.
_NO_CHANGES_ERRORS = ("DELTA_MISSING_CHANGE_DATA", "DELTA_LOG_FILE_NOT_FOUND", "DELTA_CHANGE_DATA_FILE_NOT_FOUND")


class ChangesUnavailable(Exception):
    """The Change Data Feed does not reach back to the version asked for: the reader starts from scratch."""


def changes_since(spark: SparkSession, table: str, covered: int, until: int) -> DataFrame:
    """Rows inserted, updated (their new image) or deleted in `table` after version `covered`, up to
    `until`, with `_change_type` and `_commit_version`. Raises ChangesUnavailable when the feed was not
    on for part of that range (a table made by an earlier version) or its files were vacuumed.

    Versions that only appended files are read as those files (jobs.appended_files: the change feed
    reads them at twice the CPU), the others through the change feed."""
    feed = _change_feed(spark, table, covered + 1, until)
    files = _files_present(spark, table, covered + 1, until)
    appended = files.appended if files is not None else {}
    if not appended:
        return feed
    columns = StructType([field for field in feed.schema.fields if field.name not in _CHANGE_COLUMNS])
    parts = [_change_feed(spark, table, first, last) for first, last in _runs_without(appended, covered + 1, until)]
    appended_rows = read_appended(spark, [files for version in appended.values() for files in version], columns)
    parts += [appended_rows] if appended_rows is not None else []
    if not parts:  # versions that added no file: none of the feed's rows, with its columns
        return feed.limit(0)
    return functools.reduce(DataFrame.unionByName, parts)


def _files_present(spark: SparkSession, table: str, first: int, last: int) -> RangeFiles | None:
    """The range's files (None on Spark Connect, where they cannot be listed or checked); raises
    ChangesUnavailable when VACUUM deleted any of them."""
    if last < first:
        return None
    with _reading_feed(table, first):
        files = range_files(spark, table, first, last)
    if files is not None and (missing := missing_files(spark, files.read)):
        raise ChangesUnavailable(
            f"{table}: {len(missing):,} file(s) of versions {first}-{last} were deleted (VACUUM), e.g. {missing[0]}"
        )
    return files


_CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def net_changes(spark: SparkSession, table: str, covered: int, until: int, columns: Sequence[str]) -> DataFrame:
    """`columns` of the rows in `table` at version `covered` and not at `until` (`is_removed` true) or at
    `until` and not at `covered` (false), as multisets: what the table's change feed adds and removes
    in between, netted, so that a row deleted and written again unchanged is no change. Materialized;
    raises ChangesUnavailable as changes_since."""
    feed = _feed(spark, table, covered + 1, until)
    _files_present(spark, table, covered + 1, until)
    is_removal = F.col("_change_type").isin(CHANGE_DELETE, "update_preimage")
    removed, added = feed.where(is_removal).select(*columns), feed.where(~is_removal).select(*columns)
    netted = (
        removed.exceptAll(added)
        .withColumn("is_removed", F.lit(True))
        .unionByName(added.exceptAll(removed).withColumn("is_removed", F.lit(False)))
    )
    return materialized(netted)


def _feed(spark: SparkSession, table: str, first: int, last: int) -> DataFrame:
    """Every change of versions `first` to `last` (raises ChangesUnavailable)."""
    with _reading_feed(table, first):
        changes = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", first)
            .option("endingVersion", last)
            .table(table)
        )
        # Delta checks that the feed was on for the range as it plans the scan, not as it resolves it.
        if is_connect(spark):
            changes._explain_string(mode="simple")
        else:
            changes._jdf.queryExecution().executedPlan()
    return changes


@contextmanager
def _reading_feed(table: str, first: int) -> Iterator[None]:
    """Delta's errors for a range the feed does not cover (off, or its files vacuumed) as ChangesUnavailable."""
    try:
        yield
    except Exception as error:
        if any(code in str(error) for code in _NO_CHANGES_ERRORS):
            raise ChangesUnavailable(f"{table}: no change data feed from version {first}") from error
        raise


def _change_feed(spark: SparkSession, table: str, first: int, last: int) -> DataFrame:
    changes = _feed(spark, table, first, last)
    # The commit's time is not read downstream, and the blind appends read as files have none.
    return changes.where(F.col("_change_type") != F.lit("update_preimage")).drop("_commit_timestamp")


def _runs_without(versions: Mapping[int, object], first: int, last: int) -> list[tuple[int, int]]:
    """The runs of consecutive versions in [first, last] that are not in `versions`."""
    runs: list[tuple[int, int]] = []
    for version in range(first, last + 1):
        if version in versions:
            continue
        if runs and runs[-1][1] == version - 1:
            runs[-1] = (runs[-1][0], version)
        else:
            runs.append((version, version))
    return runs
