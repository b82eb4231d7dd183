-- whatif_summary: what each assignor would have cost a group. One row per (cluster, group_id, assignor,
-- period): period 'day' (one row per UTC day with rebalances, `period_start` that day) and 'last_30_days'
-- (the 30 days ending at the cluster's latest rebalance, so the answer does not depend on when you ask;
-- `period_start` its first instant). Moves, revocations and idle members are summed over the group's logical
-- rebalances replayed through Kafka's own assignors (table rebalance_whatif); `is_actual_assignor` marks the
-- assignor the group really used, whose `moved_partition_count` is what really moved where the replay
-- agrees with the records (`same_as_actual_count` of `rebalance_count`).
CREATE OR REPLACE VIEW ${database}.whatif_summary AS
WITH windowed AS (
  SELECT
    *,
    max(completed_at) OVER (PARTITION BY cluster) - INTERVAL 30 DAYS AS last_30_days_start
  FROM ${database}.rebalance_whatif
),
periods AS (
  SELECT *, 'day' AS period, CAST(date_trunc('DAY', completed_at) AS TIMESTAMP) AS period_start FROM windowed
  UNION ALL
  SELECT *, 'last_30_days' AS period, last_30_days_start AS period_start
  FROM windowed
  WHERE completed_at > last_30_days_start
)
SELECT
  cluster,
  group_id,
  group_protocol,
  assignor,
  bool_or(is_actual_assignor) AS is_actual_assignor,
  period,
  period_start,
  count(*) AS rebalance_count,
  count_if(is_same_as_actual) AS same_as_actual_count,
  sum(moved_partition_count) AS moved_partition_count,
  sum(moved_partition_count - minimal_moves) AS unnecessary_moves,
  sum(revoked_partition_count) AS revoked_partition_count,
  sum(round_count) AS round_count,
  avg(stickiness) AS average_stickiness,
  max(skew) AS max_skew,
  max(idle_member_count) AS max_idle_member_count,
  sum(estimated_pause_ms) AS estimated_pause_ms,
  sum(actual_moved_partition_count) AS actual_moved_partition_count
FROM periods
GROUP BY cluster, group_id, group_protocol, assignor, period, period_start
