-- rebalance_timeline: when each group rebalanced and why. One row per logical rebalance (a cooperative
-- revoke round and its assign round are one), in the words an operator uses: who joined, who left and
-- how (clean | timeout | unknown), the cause, how many partitions moved against the fewest that had to,
-- how long it took and how long since the one before.
CREATE OR REPLACE VIEW ${database}.rebalance_timeline AS
SELECT
  rebalance.cluster,
  rebalance.group_id,
  rebalance.incarnation,
  rebalance.completed_at,
  rebalance.generation,
  rebalance.previous_generation,
  rebalance.rebalance_protocol,
  rebalance.assignor,
  rebalance.cause,
  rebalance.causes,
  rebalance.member_count_before,
  rebalance.member_count_after,
  transform(rebalance.members_joined, m -> coalesce(m.group_instance_id, m.client_id, m.member_id)) AS members_joined,
  transform(
    rebalance.members_left,
    d -> concat(
      coalesce(
        d.group_instance_id,
        element_at(filter(previous.members, m -> m.member_id = d.member_id), 1).client_id,
        d.member_id
      ),
      ' (', d.how, ')'
    )
  ) AS members_left,
  size(rebalance.static_replacements) AS static_replacement_count,
  rebalance.moved_partition_count,
  rebalance.minimal_moves,
  rebalance.moved_partition_count - rebalance.minimal_moves AS unnecessary_moves,
  rebalance.newly_assigned_partition_count,
  rebalance.unassigned_partition_count,
  rebalance.stickiness,
  rebalance.skew,
  rebalance.round_count,
  rebalance.failed_round_count,
  (unix_micros(rebalance.completed_at) - unix_micros(rebalance.join_completed_at)) DIV 1000 AS duration_ms,
  rebalance.estimated_pause_ms,
  (
    unix_micros(rebalance.completed_at)
    - unix_micros(lag(rebalance.completed_at) OVER (
        PARTITION BY rebalance.cluster, rebalance.group_id
        ORDER BY rebalance.incarnation, rebalance.completed_at, rebalance.generation
      ))
  ) / 1000000.0 AS seconds_since_previous_rebalance
FROM ${database}.rebalances AS rebalance
LEFT JOIN ${database}.generations AS previous
  ON previous.cluster = rebalance.cluster
  AND previous.group_id = rebalance.group_id
  AND previous.incarnation = rebalance.incarnation
  AND previous.generation = rebalance.previous_generation
