"""Views: creates or replaces the SQL views of `sql/` in the configured catalog database.

    spark-submit.sh views [--conf conf/<env>.toml] [--database NAME]

Each `sql/<view>.sql` holds one `CREATE OR REPLACE VIEW ${database}.<view> AS ...` over the gold and
silver tables. The database name from the configuration is the only thing substituted, after it is
checked to be a plain identifier; group ids and topic names are never part of a view's text. Run it
after the tables exist (the nightly job calls `create_views` at its end); running it again is harmless.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from pyspark.sql import SparkSession

from jobs.config import REPO_ROOT, Config
from jobs.runs import run_job

SQL_DIR = REPO_ROOT / "sql"
DATABASE_PLACEHOLDER = "${database}"
# Views that read other views come after them.
VIEWS = (
    "current_assignment",
    "current_lag",
    "stuck_partitions",
    "group_health",
    "rebalance_timeline",
    "top_moving_groups",
)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
    created = []
    for name in VIEWS:
        statement = view_statement(name, config.database)
        try:
            spark.sql(statement)
        except Exception as error:
            raise RuntimeError(f"view {config.table(name)} (sql/{name}.sql) could not be created: {error}") from error
        created.append(config.table(name))
    return created


def main(argv: Sequence[str] | None = None) -> int:
    return run_job(
        "views", lambda spark, config, run: run.progress("views", ", ".join(create_views(spark, config))), argv, __doc__
    )


if __name__ == "__main__":
    sys.exit(main())
