"""End offsets: snapshots of the end offsets of the topics a cluster's groups consume -> ops `end_offsets`.

    spark-submit.sh end_offsets [--conf conf/<env>.toml] [--cluster NAME]    # a live snapshot; every few minutes
    spark-submit.sh end_offsets --from-files PATH...                        # lab captures' end_offsets.json
                                                                            # (the final snapshot and its series)

A live snapshot asks the cluster (Kafka's AdminClient, ListOffsets with OffsetSpec.latest) through the
same connection settings as the capture ([capture], [capture.kafka], [capture.secrets]); all its rows
carry one `observed_at`, the time the request was sent. By default the end offset is the high watermark
(read_uncommitted), the one `kafka-consumer-groups --describe` subtracts for LAG; `[end_offsets]
isolation_level = "read_committed"` stores the last stable offset instead. Which topics: `[end_offsets]
topics` if set, else the topics the cluster's groups committed offsets for (silver `offset_commits`)
that still exist, else every non-internal topic.

Rows are merged on (cluster, topic, partition, observed_at): loading the same file, or replaying a
snapshot, adds nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import partial

from jobs.command_line import parse_arguments
from jobs.runs import run_job
from jobs.steps.end_offsets import end_offsets


def main(argv: Sequence[str] | None = None) -> int:
    from_files = parse_arguments(argv, __doc__, "end_offsets")[1].from_files
    return run_job("end_offsets", partial(end_offsets, from_files=from_files), argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
