"""The history fold against today's Spark history on a bench estate, row by row (issue 72's proof).

    .venv/bin/python -m bench.fold_equality --records 1M [--data DIR] [--seed 1] [--work DIR]

Issue 72 deletes the Spark history (jobs.steps.history.build_history, transforms/gold) only once the
fold's tables equal it on every lab capture (tests/spark/test_history_fold_equality.py) and on a 1M bench
estate: this script. It generates the estate with bench.generate (kept in DATA and reused when its
manifest asks for the same records and seed), reads its segment files as ingest does and decodes them
into silver as the decode job does, then builds every history table twice from the same silver, each
path timed: the old one (build_history, each table held as it is stored) and the fold
(jobs.steps.history_fold.history_from_scratch: every group folded from its first record). Each table is
compared as a multiset of whole rows, maps by their sorted entries (tests/delta_compare.py `canonical`):
rows in each, rows only in one, and for a few groups the differing rows paired with their nearest
counterpart, column by column. Exits 1 when any table differs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from bench.estate import EstateShape
from bench.generate import MANIFEST, generate, parse_count
from bench.generate import arguments as generate_arguments
from bench.harness import REPO_ROOT, ProcessTree, estate_config, machine_report, print_block
from jobs.session import build_session
from jobs.steps.history import build_history
from jobs.steps.history_fold import history_from_scratch
from jobs.steps.ingest import read_inputs
from jobs.tables import HISTORY_TABLES, gold_rows, materialized
from schemas import ops
from transforms import silver

GROUP = ("cluster", "group_id")
# The code compared: another session may be changing it in the same working tree.
HISTORY_CODE = ("transforms/history", "transforms/gold", "jobs/steps/history.py", "jobs/steps/history_fold.py")
EXAMPLE_GROUPS = 20  # groups whose differing rows are paired, column by column
ROWS_PAIRED_PER_GROUP = 200
SHOWN_VALUE_CHARS = 240


def estate(data: Path, records: int, seed: int, groups: int) -> dict:
    """The manifest of a bench.generate output in `data` for these records, seed and groups, generated if
    missing."""
    manifest_path = data / MANIFEST
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if (manifest["records_requested"], manifest["seed"], manifest["groups"]) == (records, seed, groups):
            return manifest
    options = ["--records", str(records), "--seed", str(seed), "--groups", str(groups)]
    return generate(generate_arguments([str(data), *options]))


def bench_silver(spark: SparkSession, config) -> dict[str, DataFrame]:
    """The segments as ingest reads them, decoded as the decode job decodes them: the four silver inputs of
    history, each held once so that both paths read the same rows without decoding again."""
    decoded = materialized(silver.decode_raw_records(read_inputs(spark, config, "bench-fold-equality")))
    return {
        "offset_commits": materialized(silver.filter_offset_commits(decoded)),
        "group_metadata": materialized(silver.filter_group_metadata(decoded)),
        "group_members": materialized(silver.explode_group_members(decoded)),
        "consumer_group_records": materialized(silver.filter_consumer_group_records(decoded)),
    }


def old_history(silver_tables: Mapping[str, DataFrame], topic_ids: DataFrame, settings) -> dict[str, DataFrame]:
    tables: dict[str, DataFrame] = {}

    def store(name: str, rows: DataFrame) -> DataFrame:
        tables[name] = materialized(gold_rows(name, rows))
        return tables[name]

    build_history(silver_tables, topic_ids, settings, store)
    return tables


def fold_history(silver_tables: Mapping[str, DataFrame], topic_ids: DataFrame, settings) -> dict[str, DataFrame]:
    folded = history_from_scratch(silver_tables, topic_ids, settings)
    return {name: materialized(gold_rows(name, folded[name])) for name in HISTORY_TABLES}


def comparable(rows: DataFrame) -> DataFrame:
    """Rows a set operation can compare: a map as its entries sorted (their order is not data)."""
    return rows.select(
        *[
            F.array_sort(F.map_entries(field.name)).alias(field.name)
            if isinstance(field.dataType, MapType)
            else F.col(field.name)
            for field in rows.schema.fields
        ]
    )


def compare_table(old: DataFrame, fold: DataFrame) -> dict:
    old, fold = comparable(old), comparable(fold)
    only_old, only_fold = materialized(old.exceptAll(fold)), materialized(fold.exceptAll(old))
    return {
        "rows old": old.count(),
        "rows fold": fold.count(),
        "only in old": only_old.count(),
        "only in fold": only_fold.count(),
        "groups differing": only_old.select(*GROUP).unionByName(only_fold.select(*GROUP)).distinct().count(),
        "differences": paired_differences(only_old, only_fold),
    }


def paired_differences(only_old: DataFrame, only_fold: DataFrame) -> dict:
    """For the first EXAMPLE_GROUPS differing groups: each row only in old paired with the row only in the
    fold of its group that agrees with it in most columns; how often each column differs among the pairs,
    and the rows no counterpart was found for."""
    groups = only_old.select(*GROUP).unionByName(only_fold.select(*GROUP)).distinct().orderBy(*GROUP)
    wanted = F.broadcast(groups.limit(EXAMPLE_GROUPS))
    by_group: dict[tuple, tuple[list, list]] = {}
    for side, rows in enumerate((only_old, only_fold)):
        for row in rows.join(wanted, on=list(GROUP), how="left_semi").collect():
            group = by_group.setdefault((row["cluster"], row["group_id"]), ([], []))[side]
            if len(group) < ROWS_PAIRED_PER_GROUP:
                group.append(row.asDict(recursive=True))
    columns, examples, unpaired = Counter(), [], []
    for group, (old_rows, fold_rows) in sorted(by_group.items()):
        for old_row in old_rows:
            if not fold_rows:
                unpaired.append(("only in old", group, old_row))
                continue
            nearest = max(fold_rows, key=lambda fold_row: sum(old_row[k] == fold_row[k] for k in old_row))
            fold_rows.remove(nearest)
            differing = [name for name in old_row if old_row[name] != nearest[name]]
            columns.update(differing)
            examples.append((group, old_row, nearest, differing))
        unpaired.extend(("only in fold", group, row) for row in fold_rows)
    # The groups' ids, to read their records with `python -m jobs.dump`.
    return {"groups": sorted(by_group), "columns": columns, "examples": examples, "unpaired": unpaired}


def shown(value) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_VALUE_CHARS else f"{text[:SHOWN_VALUE_CHARS]}... ({len(text):,} chars)"


def print_table_result(name: str, result: dict, examples: int) -> None:
    differences = result["differences"]
    print_block(name, {key: f"{value:,}" for key, value in result.items() if key != "differences"})
    if differences["groups"]:
        print(f"  groups differing (first {EXAMPLE_GROUPS}): {', '.join(group for _, group in differences['groups'])}")
    if differences["columns"]:
        print("  columns differing in the rows paired (first groups only):")
        for column, count in differences["columns"].most_common():
            print(f"    {column}: {count:,}")
    for group, old_row, fold_row, differing in differences["examples"][:examples]:
        at = f", generation {old_row['generation']}" if "generation" in old_row else ""
        print(f"  {group}{at}:")
        for column in differing:
            print(f"    {column}:\n      old  {shown(old_row[column])}\n      fold {shown(fold_row[column])}")
    for side, group, row in differences["unpaired"][:examples]:
        print(f"  {side}, {group}: {shown(row)}")


def code_report() -> dict[str, str]:
    def git(*command: str) -> str:
        return subprocess.run(["git", *command], cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip()

    changed = git("status", "--short", "--", *HISTORY_CODE).splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD"), "history code changed since": ", ".join(changed) or "none"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=parse_count, default=1_000_000, help="about this many records (1M, 100k)")
    parser.add_argument("--seed", type=int, default=1)
    # The estate's records before its window (about one a group's partition) set its least size: about 550k.
    parser.add_argument("--groups", type=int, default=EstateShape.groups, help="fewer for an estate below 550k")
    parser.add_argument(
        "--data", type=Path, help="bench.generate output (default /work/benchdata/fold-equality/<records>)"
    )
    parser.add_argument("--work", type=Path, help="scratch space for the session's warehouse")
    parser.add_argument("--examples", type=int, default=3, help="differences shown per table")
    args = parser.parse_args(argv)
    data = (args.data or Path(f"/work/benchdata/fold-equality/{args.records}")).resolve()
    print_block("machine", machine_report())
    print_block("code", code_report())
    manifest = estate(data, args.records, args.seed, args.groups)
    print_block("estate", {"directory": str(data), "records": f"{manifest['records']:,}",
                           "groups": json.dumps(manifest["groups_by_protocol"])})  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="groupscope-fold-equality-", dir=args.work))
    config = estate_config(data, work / "warehouse")
    tree = ProcessTree()
    spark = build_session(config, "groupscope-bench-fold-equality")
    try:
        settings = config.gold_settings()
        topic_ids = spark.read.schema(ops.topic_ids_schema).parquet(str(data / "topic_ids.parquet"))
        with tree.phase("decode") as decode:
            silver_tables = bench_silver(spark, config)
        with tree.phase("old") as old_phase:
            old = old_history(silver_tables, topic_ids, settings)
        with tree.phase("fold") as fold_phase:
            fold = fold_history(silver_tables, topic_ids, settings)
        results = {name: compare_table(old[name], fold[name]) for name in HISTORY_TABLES}
    finally:
        spark.stop()
        tree.close()
    for name, result in results.items():
        print_table_result(name, result, args.examples)
    print_block("time (the old path first, then the fold, one session)", {
        "decode to silver": f"{decode.seconds:,.1f} s wall, {decode.cpu_seconds:,.1f} s CPU",
        "old path (build_history)": f"{old_phase.seconds:,.1f} s wall, {old_phase.cpu_seconds:,.1f} s CPU",
        "fold (history_from_scratch)": f"{fold_phase.seconds:,.1f} s wall, {fold_phase.cpu_seconds:,.1f} s CPU",
        "fold / old": f"{fold_phase.seconds / old_phase.seconds:.2f} wall, "
                      f"{fold_phase.cpu_seconds / old_phase.cpu_seconds:.2f} CPU",
    })  # fmt: skip
    differing = [name for name, result in results.items() if result["only in old"] or result["only in fold"]]
    print(f"\n{'tables differing: ' + ', '.join(differing) if differing else 'every table equal, row by row'}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
