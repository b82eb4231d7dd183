"""The SQL views of sql/, over tables the jobs built from a real capture, checked against Kafka and the lab.

The quickstart capture (one real Kafka 4.2.1 broker running the cooperative-sticky, static, lifecycle,
transactions and KIP-848 scenarios) goes through `spark-submit.sh nightly` with the capture's end-offset
snapshot (the session's local nightly run, conftest `local_nightly`); its tables are registered in a
database of the test session's catalog and the views created there. Each view's
answer is compared with what Kafka's `kafka-consumer-groups` printed at that moment (describe.txt,
describe-state.txt) or with what the lab's members lived through (scenario.json), never with numbers
taken from our own output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from jobs.steps.views import SQL_DIR, VIEWS, create_views, database_identifier, view_statement
from jobs.tables import sql_string_literal
from tests.background_runs import CAPTURE, CLUSTER
from tests.background_runs import DATABASE as NIGHTLY_DATABASE
from tests.conftest import REPO_ROOT
from tests.delta_compare import delta_tables

DATABASE = "groupscope_views"
NO_CONSUMER = "-"  # kafka-consumer-groups' CONSUMER-ID for a partition nobody is assigned
# How the lab's notes (scenario.json 'expected') say why a group rebalanced, in the `cause` vocabulary;
# the first phrase found wins ("its only member left: Empty" is the group emptying, not a departure).
CAUSES_BY_NOTE = (
    ("Empty", "group_emptied"),
    ("session timeout", "member_left_after_timeout"),
    ("left", "member_left_cleanly"),
    ("joined", "member_joined"),
    ("back", "member_joined"),
    ("grew", "partitions_added"),
)
HOW_BY_CAUSE = {"member_left_after_timeout": "timeout", "member_left_cleanly": "clean"}
# A KIP-848 member's leave heartbeat and its fencing at session timeout write the same tombstones; only its
# silence before the rebalance tells them apart, and an idle member is silent either way
# (transforms/gold/departures.py). So for KIP-848 the timeline must name the member that left, not how.
KIP848_DEPARTURE_CAUSES = {*HOW_BY_CAUSE, "member_left"}
REPORT_COMMAND = "./spark-submit.sh report"  # the README's; run here on the session's nightly


@pytest.fixture(scope="module")
def views(spark, spark_config, local_nightly):
    """The session's `spark-submit.sh nightly` of the capture (with its end-offset snapshot), its tables
    registered in a database of this session's catalog, and the views created over them."""
    tables = delta_tables(local_nightly.wait(), NIGHTLY_DATABASE)
    config = replace(spark_config, database=DATABASE, cluster=CLUSTER)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database_identifier(DATABASE)}")
    for name, location in tables.items():
        location_literal = sql_string_literal(str(location))
        spark.sql(f"CREATE TABLE IF NOT EXISTS {config.table(name)} USING delta LOCATION {location_literal}")
    return config, create_views(spark, config)


def view_rows(spark, config, view: str) -> list:
    return spark.table(config.table(view)).where(F.col("cluster") == CLUSTER).collect()


def kafka_describe_rows() -> list[dict]:
    """`kafka-consumer-groups --describe --all-groups`: one dict per (group, topic, partition) line."""
    columns = ("group", "topic", "partition", "current", "end", "lag", "consumer_id", "host", "client_id")
    lines = (CAPTURE / "describe.txt").read_text().splitlines()
    rows = [dict(zip(columns, line.split(), strict=True)) for line in lines if line and not line.startswith("GROUP ")]
    return [{**row, "partition": int(row["partition"])} for row in rows]


def kafka_group_states() -> dict[str, dict]:
    """`kafka-consumer-groups --describe --state`: group -> state, assignment strategy, member count."""
    states = {}
    for line in (CAPTURE / "describe-state.txt").read_text().splitlines():
        if line and not line.startswith("GROUP "):
            fields = line.split()
            states[fields[0]] = {"strategy": fields[-3], "state": fields[-2], "members": int(fields[-1])}
    return states


def scenario() -> dict:
    return json.loads((CAPTURE / "scenario.json").read_text())


def cause_of(note: str) -> str:
    return next(cause for phrase, cause in CAUSES_BY_NOTE if phrase in note)


def moves_the_members_saw() -> dict[str, int]:
    """Per group, partitions whose owner changed between consecutive stable assignments the lab observed.

    The assignments are keyed by client id; every owner in these scenarios has its own (a static member
    that comes back under a new client id had lost its partitions in between, so no move is invented).
    """
    owners: dict[str, dict[str, str]] = {}
    moves: dict[str, int] = defaultdict(int)
    for event in scenario()["events"]:
        if event["event"] != "group_stable":
            continue
        owner = {partition: member for member, partitions in event["assignment"].items() for partition in partitions}
        before = owners.get(event["group"], {})
        moves[event["group"]] += sum(before.get(partition, member) != member for partition, member in owner.items())
        owners[event["group"]] = owner
    return moves


def test_every_view_in_sql_is_created_in_the_configured_database(spark, views):
    config, created = views
    assert sorted(created) == sorted(config.table(path.stem) for path in SQL_DIR.glob("*.sql"))
    catalog_views = {row.viewName for row in spark.sql(f"SHOW VIEWS IN {DATABASE}").collect() if not row.isTemporary}
    assert catalog_views == set(VIEWS)


def test_only_a_plain_identifier_is_substituted_for_the_database():
    assert "`groupscope_prod`.rebalance_timeline" in view_statement("rebalance_timeline", "groupscope_prod")
    for hostile in ("groupscope`; DROP TABLE x; --", "group scope", "1groupscope", "db.other", ""):
        with pytest.raises(ValueError, match="not a plain identifier"):
            view_statement("group_health", hostile)


def kafka_by_partition(*fields: str, where=lambda row: True) -> dict[tuple, tuple]:
    return {
        (row["group"], row["topic"], row["partition"]): tuple(row[field] for field in fields)
        for row in kafka_describe_rows()
        if where(row)
    }


def view_by_partition(spark, config, view: str, *columns: str) -> dict[tuple, tuple]:
    return {
        (row.group_id, row.topic, row.partition): tuple(row[column] for column in columns)
        for row in view_rows(spark, config, view)
    }


def test_current_lag_is_what_kafka_consumer_groups_reported(spark, views):
    config, _ = views
    kafka = {key: tuple(map(int, values)) for key, values in kafka_by_partition("current", "end", "lag").items()}
    assert view_by_partition(spark, config, "current_lag", "committed_offset", "end_offset", "offset_lag") == kafka


def test_current_assignment_names_the_consumers_kafka_described(spark, views):
    config, _ = views
    kafka = kafka_by_partition("consumer_id", "host", "client_id", where=lambda row: row["consumer_id"] != NO_CONSUMER)
    assert view_by_partition(spark, config, "current_assignment", "member_id", "client_host", "client_id") == kafka


def test_stuck_partitions_are_the_lagging_partitions_nobody_consumes(spark, views):
    config, _ = views
    kafka = kafka_by_partition("consumer_id", where=lambda row: int(row["lag"]) > 0)
    stuck = view_by_partition(spark, config, "stuck_partitions", "reason")
    assert kafka, "the capture has no lagging partition: this test would prove nothing"
    assert stuck.keys() == kafka.keys()
    for key, (consumer,) in kafka.items():
        assert (stuck[key] == ("no_consumer",)) == (consumer == NO_CONSUMER), key


def test_group_health_agrees_with_kafka_on_state_members_and_lag(spark, views):
    config, _ = views
    health = {row.group_id: row for row in view_rows(spark, config, "group_health")}
    assert health.keys() == set(scenario()["groups"])
    kafka_lag: dict[str, int] = defaultdict(int)
    for row in kafka_describe_rows():
        kafka_lag[row["group"]] += int(row["lag"])
    for group, kafka in kafka_group_states().items():
        ours = health[group]
        assert (ours.group_state, ours.member_count) == (kafka["state"].lower(), kafka["members"]), group
        assert ours.total_offset_lag == kafka_lag[group], group
        assert (ours.status == "OK") == (kafka_lag[group] == 0), group
        if ours.group_protocol == "classic" and kafka["members"] > 0:
            assert ours.assignor == kafka["strategy"], group
    deleted = {entry["group"] for entry in scenario()["expected"] if entry.get("deleted")}
    assert deleted, "the capture deletes no group: this test would prove nothing"
    for group in deleted:
        assert (health[group].group_state, health[group].is_deleted) == ("deleted", True), group


def test_rebalance_timeline_tells_when_and_why_as_the_scenario_happened(spark, views):
    config, _ = views
    timeline = defaultdict(list)
    for row in sorted(view_rows(spark, config, "rebalance_timeline"), key=lambda row: row.completed_at):
        timeline[row.group_id].append(row)
    expected = defaultdict(list)
    for entry in scenario()["expected"]:
        generation = entry.get("generation", entry.get("epoch"))
        if generation is not None and "replaced_instance" not in entry:  # a static replacement is no rebalance
            expected[entry["group"]].append({**entry, "generation": generation})
    for group, entries in expected.items():
        rows = {row.generation: row for row in timeline[group]}
        if entries[0]["generation"] == 1:  # followed from its first member: every rebalance is listed
            assert [row.generation for row in timeline[group]] == [entry["generation"] for entry in entries], group
        for entry in entries:
            row, cause, member = rows[entry["generation"]], cause_of(entry["note"]), entry["note"].split()[0]
            if "members" in entry:
                assert row.member_count_after == entry["members"], (group, entry["note"])
            if row.rebalance_protocol == "consumer" and cause in HOW_BY_CAUSE:
                assert row.cause in KIP848_DEPARTURE_CAUSES, (group, entry["note"])
                assert any(left.startswith(f"{member} (") for left in row.members_left), (group, entry["note"])
                continue
            assert row.cause == cause, (group, entry["note"])
            if cause == "member_joined":
                assert member in row.members_joined, (group, entry["note"])
            if cause in HOW_BY_CAUSE:
                assert f"{member} ({HOW_BY_CAUSE[cause]})" in row.members_left, (group, entry["note"])
    intervals = [row.seconds_since_previous_rebalance for rows in timeline.values() for row in rows[1:]]
    assert intervals and all(seconds >= 0 for seconds in intervals)


def test_top_moving_groups_counts_the_moves_the_members_saw(spark, views):
    config, _ = views
    seen = moves_the_members_saw()
    ranked = sorted(view_rows(spark, config, "top_moving_groups"), key=lambda row: row.moved_rank)
    assert {row.group_id: row.moved_partition_count for row in ranked} == {
        row.group_id: seen.get(row.group_id, 0) for row in ranked
    }
    movers = {group: moves for group, moves in seen.items() if moves > 0}
    assert len(set(movers.values())) == len(movers) > 1, "the ranking must be decided by the moves alone"
    assert [row.group_id for row in ranked[: len(movers)]] == sorted(movers, key=movers.get, reverse=True)
    assert [row.moved_rank for row in ranked[: len(movers)]] == list(range(1, len(movers) + 1))


def test_the_documented_queries_run(spark, views):
    """Every SQL example in docs/ runs as written against the views (database name aside)."""
    texts = {path.name: path.read_text() for path in (REPO_ROOT / "docs").glob("*.md")}
    examples = [found for text in texts.values() for found in re.findall(r"```sql\n(.*?)```", text, flags=re.DOTALL)]
    assert "```sql" in texts["sql.md"] and "```sql" in texts["internals.md"]
    for example in examples:
        for statement in filter(str.strip, example.split(";")):
            spark.sql(statement.replace("groupscope.", f"{DATABASE}.")).collect()


# What ./spark-sql.sh printed on stderr with every answer before issue 70 §5.
SHELL_NOTES = (
    "SPARK_LOCAL_IP",
    "resolves to a loopback address",
    "Setting default log level",
    "To adjust logging level",
    "Spark master:",
    "Time taken:",
    "Using incubator modules",
)


def readme_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (REPO_ROOT / "README.md").read_text(), flags=re.DOTALL)


def readme_commands() -> list[str]:
    lines = [line.split("  #")[0].strip() for block in readme_blocks("bash") for line in block.splitlines()]
    return [line for line in lines if line and line != "./test.sh"]  # the test command is this suite


def test_every_readme_sql_example_returns_rows(spark, views):
    """Each returns rows on the sample, but the quarantine's: the sample decodes whole, as the README says."""
    statements = [s for block in readme_blocks("sql") for s in block.split(";") if s.strip()]
    assert len(statements) >= 3
    for statement in statements:
        rows = spark.sql(statement.replace("groupscope.", f"{DATABASE}.")).collect()
        if "groupscope.quarantine" in statement:
            assert rows == [], f"the sample quarantines nothing, yet:\n{statement}\n{rows}"
        else:
            assert rows, f"the README example returns nothing on the sample:\n{statement}"


def test_every_readme_command_runs_on_the_sample_and_shows_rows(local_nightly, tmp_path):
    """Each command as written; the nightly is the session's own run of it (on the sample's capture,
    into a warehouse of its own), the SQL shell and the report read that run's warehouse."""
    warehouse = local_nightly.wait()
    commands = readme_commands()
    assert {"./spark-submit.sh nightly", REPORT_COMMAND} <= set(commands)
    site = tmp_path / "report"
    for command in commands:
        if command == "./spark-submit.sh nightly":
            assert [Path(local_nightly.process.popen.args[0]).name, local_nightly.process.popen.args[1]] == [
                "spark-submit.sh",
                "nightly",
            ]
            (output,) = [text for text in local_nightly.outputs().values() if "groupscope nightly: cluster" in text]
            assert re.search(r"check: raw (\d[\d,]*) = decoded \1 \+ quarantined 0", output)
            # Quiet by default: Spark's info lines went to the run's log file, not to the console.
            # The local run has a rival started with it; the log to read is the one that ran (exit 0).
            (winner,) = [p for p in (local_nightly.process, local_nightly.rival) if p.popen.returncode == 0]
            (spark_log,) = (REPO_ROOT / "logs").glob(f"spark-*-{winner.popen.pid}.log")
            assert " INFO " in spark_log.read_text()
            assert all(" INFO " not in text for text in local_nightly.outputs().values())
            continue
        environment = {**os.environ, "GROUPSCOPE_WAREHOUSE": str(warehouse)}
        if command == REPORT_COMMAND:  # the nightly's tables, and a site beside this test, not in the checkout
            command += f" --warehouse {warehouse} --database {NIGHTLY_DATABASE} --cluster {CLUSTER} --out {site}"
        result = subprocess.run(
            ["bash", "-c", command.replace("groupscope.", f"{NIGHTLY_DATABASE}.")],
            cwd=REPO_ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, f"{command}:\n{result.stderr[-2000:]}"
        if command.startswith(REPORT_COMMAND):
            group_pages = list((site / "groups").glob("*.html"))
            assert (site / "index.html").is_file() and len(group_pages) == len(scenario()["groups"]), group_pages
            continue
        lines = result.stdout.splitlines()
        assert len(lines) >= 2, f"{command} printed {lines}"
        if command.startswith("./spark-sql.sh"):
            header = lines[0].split("\t")
            assert "group_id" in header and len(lines[1].split("\t")) == len(header), lines[:2]
            # Only the answer: none of the shell's notes on stderr.
            assert [line for line in result.stderr.splitlines() if any(note in line for note in SHELL_NOTES)] == []
        if "jobs.dump" in command:
            assert all(json.loads(line)["offset"] >= 0 for line in lines)
