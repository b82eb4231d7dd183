-- top_moving_groups: which groups move partitions around the most. One row per (cluster, group_id) with
-- rebalances and partition moves over the last 7 days (ending at the cluster's latest rebalance, so the
-- answer does not depend on when you ask) and over all the history held; `moved_rank` 1 is the group that
-- moved the most partitions in those 7 days. Unnecessary moves are moves beyond the fewest that would
-- have balanced the same members (a sticky assignor keeps them near 0).
CREATE OR REPLACE VIEW ${database}.top_moving_groups AS
WITH windowed AS (
  SELECT
    *,
    completed_at > max(completed_at) OVER (PARTITION BY cluster) - INTERVAL 7 DAYS AS is_last_7_days
  FROM ${database}.rebalances
),
per_group AS (
  SELECT
    cluster,
    group_id,
    count_if(is_last_7_days) AS rebalance_count_last_7_days,
    coalesce(sum(CASE WHEN is_last_7_days THEN moved_partition_count END), 0) AS moved_partition_count_last_7_days,
    coalesce(
      sum(CASE WHEN is_last_7_days THEN moved_partition_count - minimal_moves END), 0
    ) AS unnecessary_moves_last_7_days,
    count(*) AS rebalance_count,
    sum(moved_partition_count) AS moved_partition_count,
    sum(moved_partition_count - minimal_moves) AS unnecessary_moves,
    avg(stickiness) AS average_stickiness,
    max(completed_at) AS last_rebalance_at
  FROM windowed
  GROUP BY cluster, group_id
),
storms AS (
  SELECT cluster, group_id, count_if(is_storm) AS storm_hour_count
  FROM ${database}.rebalance_frequency
  WHERE period = 'hour'
  GROUP BY cluster, group_id
)
SELECT
  per_group.cluster,
  per_group.group_id,
  rank() OVER (
    PARTITION BY per_group.cluster
    ORDER BY per_group.moved_partition_count_last_7_days DESC, per_group.moved_partition_count DESC
  ) AS moved_rank,
  per_group.moved_partition_count_last_7_days,
  per_group.unnecessary_moves_last_7_days,
  per_group.rebalance_count_last_7_days,
  per_group.moved_partition_count,
  per_group.unnecessary_moves,
  per_group.rebalance_count,
  per_group.average_stickiness,
  coalesce(storms.storm_hour_count, 0) AS storm_hour_count,
  per_group.last_rebalance_at
FROM per_group
LEFT JOIN storms USING (cluster, group_id)
