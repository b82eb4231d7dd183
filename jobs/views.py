"""Views: creates or replaces the SQL views of `sql/` in the configured catalog database.

    spark-submit.sh views [--conf conf/<env>.toml] [--database NAME]

Each `sql/<view>.sql` holds one `CREATE OR REPLACE VIEW ${database}.<view> AS ...` over the gold and
silver tables. The database name from the configuration is the only thing substituted, after it is
checked to be a plain identifier; group ids and topic names are never part of a view's text. Run it
after the tables exist (the nightly job calls `create_views` at its end); running it again is harmless.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobs.runs import run_job
from jobs.steps.views import views


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("views", views, argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
