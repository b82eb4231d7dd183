"""Views: creates or replaces the SQL views of `sql/` in the configured catalog database."""

from __future__ import annotations

import re

from pyspark.sql import SparkSession

from jobs.config import REPO_ROOT, Config
from jobs.runs import JobRun
from jobs.tables import ensure_table
from schemas.share_gold import SHARE_SCHEMAS
from schemas.whatif import WHATIF_SCHEMAS

SQL_DIR = REPO_ROOT / "sql"
DATABASE_PLACEHOLDER = "${database}"
# Views that read other views come after them.
VIEWS = (
    "current_assignment",
    "current_lag",
    "stuck_partitions",
    "idle_members",
    "group_health",
    "rebalance_timeline",
    "top_moving_groups",
    "current_share_lag",
    "whatif_summary",
)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TABLE_REFERENCE = re.compile(re.escape(DATABASE_PLACEHOLDER) + r"\.([A-Za-z_][A-Za-z0-9_]*)")


class ViewInputMissing(RuntimeError):
    """The warehouse lacks a table the views read: the nightly has not written it yet."""


def tables_read(name: str) -> set[str]:
    """The tables (not views) sql/<name>.sql reads."""
    template = (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8")
    return set(TABLE_REFERENCE.findall(template)) - set(VIEWS)


def database_identifier(database: str) -> str:
    """The database name as SQL text: a plain identifier, quoted, or an error (never spliced unchecked)."""
    if not IDENTIFIER.fullmatch(database):
        raise ValueError(
            f"catalog.database {database!r} is not a plain identifier (letters, digits, underscores; "
            "not starting with a digit)"
        )
    return f"`{database}`"


def view_statement(name: str, database: str) -> str:
    template = (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8")
    if DATABASE_PLACEHOLDER not in template:
        raise ValueError(f"sql/{name}.sql does not use {DATABASE_PLACEHOLDER}")
    statement = template.replace(DATABASE_PLACEHOLDER, database_identifier(database))
    # Spark would read any other ${...} as a variable to substitute from its own configuration.
    if "${" in statement:
        raise ValueError(f"sql/{name}.sql has a placeholder other than {DATABASE_PLACEHOLDER}")
    return statement


def create_views(spark: SparkSession, config: Config) -> list[str]:
    """Creates or replaces every view in `config.database`; returns their qualified names, in creation order."""
    # A cluster without share groups never writes the share tables its view reads; a warehouse an earlier
    # groupscope wrote has no what-if or capacity tables until its next history run.
    for name, schema in {**SHARE_SCHEMAS, **WHATIF_SCHEMAS}.items():
        ensure_table(spark, config.table(name), schema, partition_by=("cluster",))
    read = set().union(*(tables_read(name) for name in VIEWS))
    missing = sorted(name for name in read if not spark.catalog.tableExists(config.table(name)))
    if missing:  # else Spark's analysis error, hundreds of lines of plan, for what one line can say
        raise ViewInputMissing(f"{config.database} has no {', '.join(missing)} yet: run the nightly first")
    created = []
    for name in VIEWS:
        statement = view_statement(name, config.database)
        try:
            spark.sql(statement)
        except Exception as error:
            raise RuntimeError(f"view {config.table(name)} (sql/{name}.sql) could not be created: {error}") from error
        created.append(config.table(name))
    return created


def views(spark: SparkSession, config: Config, run: JobRun) -> None:
    run.progress("views", ", ".join(create_views(spark, config)))
