"""History as a fold: one group's records in log order, and the state where its last fold stopped, in; the
group's rows of the gold history tables, and its new state, out. Pure Python: never imports pyspark, so
Spark's Python workers run it over Arrow batches and its tests need no JVM (like transforms.decoder).

Entry point: `transforms.history.fold.fold(state, records, commits, settings, topic_names) -> (rows, state)`.
It covers classic groups (protocol type `consumer`, eager and cooperative, dynamic and static members, and
Connect's; records.classic_records), KIP-848 consumer groups (records types 3-8 and 16;
records.consumer_records, epochs.py), share groups (KIP-932, types 10-14) and streams groups (KIP-1071,
types 17, 19-22), the last two read as their KIP-848 twins (twins.py), and the tables `generations`,
`generation_assignments`, `generation_capacity`, `rebalances`, `partition_movements`,
`rebalance_frequency` and (streams groups; streams.py) `streams_members`, with the rules of transforms/gold
as they stand (see fold.py for what is left). An epoch group's partitions are keyed by topic id:
`topic_names` (topic id -> (topic, topic_name_source)) is an explicit input, the map
transforms/gold/topic_names.py builds from the cluster's partition metadata, commits and topic-id table.

Continuation. A fold emits every row of a group from its *frontier* on, and the caller replaces the
group's stored rows from there on (`Rows.replaces`): rows with a higher incarnation, or the frontier's
incarnation and a generation at or above the frontier's or null (a deletion). Below the frontier no
later record can change a row; at and after it, one can:
- the last generation of the live incarnation: a later record of the same generation adds to its record
  count, last record time and static replacements; the next generation ends its assignments' validity
  and decides whether it was a cooperative revoke round (then it produces no rebalance of its own and
  its successor's rebalance spans both);
- an eager rebalance whose pause waits for the group's first commit after it;
- an epoch (KIP-848, share, streams) that holds a partition still held, or that a member has not reached
  yet, or that shares a holding with the latest epoch (epoch_fold.py); the latest epoch's streams members,
  whose tasks follow their records.
The state holds the generations from the closing generation before the frontier (the "before" side of
the frontier's rebalance) on, so folding a prefix and then the rest from its state equals folding all.
`rebalance_frequency`, keyed by period, is given again from the frontier's day on (frequency.py).

The rules were first Spark queries in transforms/gold, deleted when this fold replaced them (issue 72).
Where a module here names one of those files for its reasoning, it is in git: `git log --diff-filter=D
--name-only -- transforms/gold/` finds the commit, and `git show <commit>^:<path>` shows the file.
"""
