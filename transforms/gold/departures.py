"""How members left in a rebalance, and how long an eager rebalance paused consumption (estimates).

A member that leaves cleanly (LeaveGroup, or a KIP-848 leave heartbeat) triggers the rebalance at once;
one that crashed is only removed when its session times out. So the silence between the member's last
sign of life (the last record that shows it alive, see below, or its partitions' last commit) and
the end of the rebalance's join phase tells them apart:
- silent < session timeout: it cannot have timed out -> 'clean';
- session timeout <= silent <= session timeout + slack: -> 'timeout';
A KIP-848 member's session runs from its last heartbeat, and a commit may follow that heartbeat by up
to one heartbeat interval (commits are not heartbeats there), so for those members the session
timeout above is shortened by the heartbeat interval (both broker settings, not in the records).
- longer: the records cannot tell (an idle member leaves no sign of life) -> 'unknown'.
A classic generation's record is written when every member of it has joined, so it is a sign of life of
each. A KIP-848, streams or share member's signs of life are its own records instead: those its own
heartbeats made the coordinator write (its member metadata and current assignments with its member id,
`member_own_records`), not the epoch's, which any member's heartbeat may have made. A crashed member
stays in the group until its session runs out, and the epochs others cause meanwhile would make its
fencing look like a prompt clean leave (kip848-crash, 4.2.1 and 4.4.0: the killed k2 was fenced 6.0 s
after its own last record, 3.4 and 3.5 s after the epoch k4 joined in; share, 4.4.0: m3's session ran
out 5.7 s after the last member reconciled, 6.0 s after m3's own last record). A share member commits no
offset, so no commit can follow its own records and the full session timeout applies.

Pause (eager groups only): every member stops consuming when an eager rebalance starts and resumes
after it completes, so the gap in the group's commits around it - from its last commit at or before
the join phase ended to its first commit after the new generation was recorded - estimates the pause
(from above: it includes up to one commit interval). Marked `commit_gap`; `no_commit_in_generation`
when the group committed nothing in the generation before the join (no pause can be measured); none
while the group has made no commit since the rebalance.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from transforms.gold.generations import (
    GROUP,
    GROUP_PROTOCOL_CLASSIC,
    GROUP_PROTOCOL_SHARE,
    INCARNATION,
    REBALANCE,
    member_key,
)
from transforms.gold.offsets import OFFSET_KEY
from transforms.gold.timeline import earliest_after, latest_at_or_before

HOW_CLEAN, HOW_TIMEOUT, HOW_UNKNOWN = "clean", "timeout", "unknown"
PAUSE_COMMIT_GAP = "commit_gap"
# The group committed nothing from the generation before the join to the join: no commit can start the
# gap, now or later (an unknown pause without it waits for the group's first commit after the rebalance).
PAUSE_NO_COMMIT_BEFORE = "no_commit_in_generation"
PROTOCOL_EAGER = "eager"


MINUTE_MS = 60_000
PAUSE_PROBE_TIMES = ("join_completed_at", "recorded_at")


def commit_times_around(
    commits: DataFrame, probes: DataFrame, keys: Sequence[str], probe_times: Sequence[str]
) -> DataFrame:
    """(keys, record_at): the commit times an as-of lookup from `probes` can land on, of the keys probed.

    The latest commit at or before a probe time is either in the probe time's minute or the last of an
    earlier minute; the earliest after it is in that minute or the first of a later one. So the first and
    last commit of each minute, and every commit of a minute holding a probe time, give the same lookups
    as every commit: a few rows per key and minute instead of one per commit to sort. The keys probed and
    their probed minutes are few next to commits, so they are broadcast.
    """
    probed = probes.select(*keys, *[_minute(F.col(at)).alias(at) for at in probe_times])
    probed_minutes = functools.reduce(
        DataFrame.unionByName, [probed.select(*keys, F.col(at).alias("minute")) for at in probe_times]
    ).distinct()
    probed_keys = F.broadcast(probed_minutes.select(*keys).distinct())
    of_probed_keys = commits.join(probed_keys, on=list(keys), how="left_semi").select(
        *keys, "record_at", _minute(F.col("record_at")).alias("minute")
    )
    flagged = of_probed_keys.join(
        F.broadcast(probed_minutes.withColumn("is_probed", F.lit(True))), on=[*keys, "minute"], how="left"
    )
    return _minute_ends_and_probed(flagged, keys, F.col("is_probed"))


def _minute(at: Column) -> Column:
    return F.floor(F.unix_millis(at) / F.lit(MINUTE_MS))


def _minute_ends_and_probed(commits: DataFrame, keys: Sequence[str], is_probed: Column) -> DataFrame:
    """Commits (keys, record_at, minute) with `is_probed` (true for every commit of a probed minute, else
    null or false) -> (keys, record_at), each time once: every commit time of a probed minute, the first
    and last of any other. A probed minute is grouped by its commit times, the others by the minute, and
    only minima and maxima are taken: a list of the probed times (or a distinct of the two kinds' union)
    made Spark aggregate with objects, which sorts past 128 keys a task (at 50M records, history's
    largest query: 140 task-s, 12 GB spilled)."""
    per_minute = commits.groupBy(*keys, "minute", F.when(is_probed, F.col("record_at")).alias("probed_at")).agg(
        F.min("record_at").alias("first_at"), F.max("record_at").alias("last_at")
    )
    times = F.when(F.col("probed_at").isNull(), F.array_distinct(F.array("first_at", "last_at"))).otherwise(
        F.array("probed_at")
    )
    return per_minute.select(*keys, F.explode(times).alias("record_at"))


def _leavers(rebalances: DataFrame) -> DataFrame:
    """framed rebalances -> one row per member that left, with its member_key; the generation's last record
    is a sign of life of a classic member only (`has_own_records`: the others' are their own records)."""
    has_own_records = F.col("group_protocol") != F.lit(GROUP_PROTOCOL_CLASSIC)
    return rebalances.select(
        *REBALANCE,
        "before_generation",
        "join_completed_at",
        F.when(~has_own_records, F.col("before_last_recorded_at")).alias("before_last_recorded_at"),
        has_own_records.alias("has_own_records"),
        (F.col("group_protocol") == F.lit(GROUP_PROTOCOL_SHARE)).alias("is_share"),
        F.explode("left_members").alias("m"),
    ).withColumn("member_key", member_key(F.col("m")))


def _leaver_probes(left: DataFrame, assignments: DataFrame) -> DataFrame:
    """Each leaver's partitions of the generation it left, probed at the join: its last commit of each."""
    owned = assignments.select(
        *INCARNATION, F.col("generation").alias("before_generation"), "member_key", "topic", "partition"
    )
    return left.select(*REBALANCE, "before_generation", "member_key", "join_completed_at").join(
        owned, on=[*INCARNATION, "before_generation", "member_key"], how="inner"
    )


def _eager(rebalances: DataFrame) -> DataFrame:
    return rebalances.where(F.col("rebalance_protocol") == F.lit(PROTOCOL_EAGER))


def _pause_probes(rebalances: DataFrame) -> DataFrame:
    """Eager rebalances after a generation of the log, probed at the join (the group's last commit) and
    completion (its first after). A group's first generation in the log has no generation before it for
    the group to have committed in: no pause, whatever commits precede it (none is looked for, so that
    computing such a rebalance reads no commit before it)."""
    return (
        _eager(rebalances)
        .where(F.col("before_recorded_at").isNotNull())
        .select(*REBALANCE, "join_completed_at", "recorded_at", "before_recorded_at")
    )


def commit_lookups(rebalances: DataFrame, assignments: DataFrame, member_own_records: DataFrame) -> DataFrame:
    """framed rebalances + assignments + members' own records -> the "latest commit at or before"
    lookups that members_left and pause_estimates make: (cluster, group_id, topic, partition, probed_at,
    known_from). A leaver's is in one partition; a pause's in any of its group's (topic and partition
    null). A commit earlier than `known_from` cannot change what the lookup yields: the leaver's last
    sign of life is the latest of it and the generation's last record (an epoch group member's: its own
    last record), and a pause starts only from a commit at or after the generation before was recorded
    (`before_recorded_at`). Their other lookup, the earliest commit after completion, looks forward
    from `recorded_at`."""
    leavers = _leavers(rebalances)
    last_records = leavers.join(
        _last_own_records(leavers, member_own_records), on=[*REBALANCE, "member_key"], how="left"
    ).select(*REBALANCE, "member_key", F.coalesce("before_last_recorded_at", "last_own_record_at").alias("known_from"))
    of_leavers = _leaver_probes(leavers, assignments).join(last_records, on=[*REBALANCE, "member_key"], how="inner")
    of_pauses = _pause_probes(rebalances).select(
        *GROUP,
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        "join_completed_at",
        F.col("before_recorded_at").alias("known_from"),
    )
    return (
        of_leavers.select(*OFFSET_KEY, "join_completed_at", "known_from")
        .unionByName(of_pauses)
        .select(*OFFSET_KEY, F.col("join_completed_at").alias("probed_at"), "known_from")
    )


def commit_times_read_by(rebalances: DataFrame, assignments: DataFrame, commits: DataFrame) -> DataFrame:
    """framed rebalances + assignments + their groups' counted commits -> (OFFSET_KEY, record_at): the commit times that
    `members_left` and `pause_estimates` of these rebalances can land on, found in one pass over the
    commits (each reads them twice, see commit_times_around; here they read these few rows instead).

    Per group partition and minute: the first and last commit, and every commit of a minute that a
    leaver's partition is probed in or that its group is probed in by a pause. commit_times_around over
    these rows gives what it gives over all commits, at either level: a group's minute ends are the ends
    of its partitions' ones, and a group-probed minute keeps every commit of each of its partitions.
    """
    leaver_minutes = _leaver_probes(_leavers(rebalances), assignments).select(
        *OFFSET_KEY, _minute(F.col("join_completed_at")).alias("minute")
    )
    pauses = _pause_probes(rebalances)
    group_minutes = functools.reduce(
        DataFrame.unionByName, [pauses.select(*GROUP, _minute(F.col(at)).alias("minute")) for at in PAUSE_PROBE_TIMES]
    )
    flagged = (
        commits.select(*OFFSET_KEY, "record_at", _minute(F.col("record_at")).alias("minute"))
        .join(
            F.broadcast(leaver_minutes.distinct().withColumns({"is_probed": F.lit(True)})),
            on=[*OFFSET_KEY, "minute"],
            how="left",
        )
        .join(
            F.broadcast(group_minutes.distinct().withColumns({"is_group_probed": F.lit(True)})),
            on=[*GROUP, "minute"],
            how="left",
        )
    )
    return _minute_ends_and_probed(flagged, OFFSET_KEY, F.col("is_probed") | F.col("is_group_probed"))


def _last_own_records(left: DataFrame, member_own_records: DataFrame) -> DataFrame:
    """_leavers + members' own records -> (rebalance, member_key, last_own_record_at) of the leavers judged by
    them (KIP-848, streams and share members), their last at or before the join."""
    own_records = member_own_records.select(
        "cluster", "group_id", F.col("member_id").alias("own_member_id"), F.col("record_at").alias("own_record_at")
    )
    return (
        left.where(F.col("has_own_records"))
        .select(*REBALANCE, "member_key", "join_completed_at", F.col("m.member_id").alias("own_member_id"))
        .join(own_records, on=["cluster", "group_id", "own_member_id"], how="inner")
        .where(F.col("own_record_at") <= F.col("join_completed_at"))
        .groupBy(*REBALANCE, "member_key")
        .agg(F.max("own_record_at").alias("last_own_record_at"))
    )


def members_left(
    rebalances: DataFrame,
    assignments: DataFrame,
    commits: DataFrame,
    member_own_records: DataFrame,
    departure_slack_ms: int,
    default_session_timeout_ms: int,
    default_heartbeat_interval_ms: int,
) -> DataFrame:
    """framed rebalances (left_members, before_generation, ...) + members' own records (cluster, group_id,
    member_id, record_at: `epochs.member_own_records`) -> (rebalance, members_left: DEPARTUREs)."""
    left = _leavers(rebalances)
    last_own_records = _last_own_records(left, member_own_records)
    probes = _leaver_probes(left, assignments)
    last_commits = (
        latest_at_or_before(
            probes,
            commit_times_around(commits, probes, OFFSET_KEY, ["join_completed_at"]),
            OFFSET_KEY,
            probe_time="join_completed_at",
            event_time="record_at",
            as_name="last_commit",
        )
        .groupBy(*REBALANCE, "member_key")
        .agg(F.max("last_commit.record_at").alias("last_commit_at"))
    )
    last_seen = F.greatest("before_last_recorded_at", "last_commit_at", "last_own_record_at")
    silent_ms = F.unix_millis("join_completed_at") - F.unix_millis(last_seen)
    timeout_ms = F.coalesce(F.col("m.session_timeout_ms"), F.lit(default_session_timeout_ms)).cast("long")
    heartbeat_after_commit_ms = F.when(
        F.col("m.session_timeout_ms").isNull() & ~F.col("is_share"), F.lit(default_heartbeat_interval_ms)
    )
    how = (
        F.when(silent_ms < timeout_ms - F.coalesce(heartbeat_after_commit_ms, F.lit(0)), F.lit(HOW_CLEAN))
        .when(silent_ms <= timeout_ms + F.lit(departure_slack_ms), F.lit(HOW_TIMEOUT))
        .otherwise(F.lit(HOW_UNKNOWN))
    )
    departure = F.struct(
        F.col("m.member_id").alias("member_id"),
        F.col("m.group_instance_id").alias("group_instance_id"),
        how.alias("how"),
        last_seen.alias("last_seen_at"),
        silent_ms.alias("silent_ms"),
        timeout_ms.cast("int").alias("session_timeout_ms"),
    )
    return (
        left.join(last_commits, on=[*REBALANCE, "member_key"], how="left")
        .join(last_own_records, on=[*REBALANCE, "member_key"], how="left")
        .groupBy(*REBALANCE)
        .agg(F.array_sort(F.collect_list(departure)).alias("members_left"))
    )


def pause_estimates(rebalances: DataFrame, commits: DataFrame) -> DataFrame:
    """framed eager rebalances with commits around them -> (rebalance, estimated_pause_ms, method)."""
    probes = _pause_probes(rebalances)
    group_commits = commit_times_around(commits, probes, GROUP, PAUSE_PROBE_TIMES)
    around = earliest_after(
        latest_at_or_before(
            probes, group_commits, ("cluster", "group_id"), "join_completed_at", "record_at", "last_before"
        ),
        group_commits,
        ("cluster", "group_id"),
        "recorded_at",
        "record_at",
        "first_after",
    )
    has_start = F.coalesce(F.col("last_before.record_at") >= F.col("before_recorded_at"), F.lit(False))
    is_known = has_start & F.col("first_after").isNotNull()
    firsts = _eager(rebalances).where(F.col("before_recorded_at").isNull())
    return (
        around.where(is_known | ~has_start)
        .select(
            *REBALANCE,
            F.when(is_known, F.unix_millis("first_after.record_at") - F.unix_millis("last_before.record_at")).alias(
                "estimated_pause_ms"
            ),
            F.when(is_known, F.lit(PAUSE_COMMIT_GAP))
            .otherwise(F.lit(PAUSE_NO_COMMIT_BEFORE))
            .alias("pause_estimate_method"),
        )
        .unionByName(
            firsts.select(
                *REBALANCE,
                F.lit(None).cast("long").alias("estimated_pause_ms"),
                F.lit(PAUSE_NO_COMMIT_BEFORE).alias("pause_estimate_method"),
            )
        )
    )
