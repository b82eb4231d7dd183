-- group_health: how each group is doing now. One row per (cluster, group_id) that the records show
-- (classic, KIP-848 and offsets-only groups), as of the latest data held: its state and members, Burrow's
-- status at the latest evaluation window, its total lag at the latest snapshot (`current_lag`), its last
-- rebalance, and the lifecycle flags of its latest day (stale, offsets about to expire, deleted); members of its
-- current generation that own nothing, since when, and `is_long_idle` (24 hours or more: view idle_members).
CREATE OR REPLACE VIEW ${database}.group_health AS
WITH latest_days AS (
  SELECT *, row_number() OVER (PARTITION BY cluster, group_id ORDER BY day DESC) AS recency
  FROM ${database}.group_daily
),
latest_generations AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY cluster, group_id ORDER BY incarnation DESC, source_partition DESC, source_offset DESC
    ) AS recency
  FROM ${database}.generations
),
latest_rebalances AS (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY cluster, group_id ORDER BY incarnation DESC, completed_at DESC, generation DESC
    ) AS recency
  FROM ${database}.rebalances
),
latest_statuses AS (
  SELECT *, row_number() OVER (PARTITION BY cluster, group_id ORDER BY evaluated_at DESC) AS recency
  FROM ${database}.group_status
),
idle_now AS (
  SELECT
    cluster,
    group_id,
    max(idle_member_count) AS idle_member_count,
    min(idle_since) AS idle_since,
    bool_or(is_long_idle) AS is_long_idle
  FROM ${database}.idle_members
  WHERE is_current
  GROUP BY cluster, group_id
),
lag_now AS (
  SELECT
    cluster,
    group_id,
    count(*) AS partition_count,
    sum(offset_lag) AS total_offset_lag,
    max(time_lag_seconds) AS max_time_lag_seconds,
    max(observed_at) AS lag_observed_at
  FROM ${database}.current_lag
  GROUP BY cluster, group_id
)
SELECT
  day.cluster,
  day.group_id,
  generation.state AS group_state,
  generation.group_protocol,
  generation.protocol_type,
  generation.assignor,
  generation.generation,
  generation.member_count,
  status.status,
  status.evaluated_at AS status_evaluated_at,
  status.error_partition_count,
  lag_now.partition_count,
  lag_now.total_offset_lag,
  lag_now.max_time_lag_seconds,
  lag_now.lag_observed_at,
  day.last_commit_at,
  day.is_stale,
  day.offsets_expire_at,
  day.is_expiring_soon,
  day.is_deleted,
  rebalance.completed_at AS last_rebalance_at,
  rebalance.cause AS last_rebalance_cause,
  day.day AS last_day,
  day.rebalance_count AS rebalance_count_last_day,
  day.moved_partition_count AS moved_partition_count_last_day,
  coalesce(idle_now.idle_member_count, 0) AS idle_member_count,
  idle_now.idle_since,
  coalesce(idle_now.is_long_idle, false) AS is_long_idle
FROM latest_days AS day
LEFT JOIN latest_generations AS generation
  ON generation.cluster = day.cluster AND generation.group_id = day.group_id AND generation.recency = 1
LEFT JOIN latest_rebalances AS rebalance
  ON rebalance.cluster = day.cluster AND rebalance.group_id = day.group_id AND rebalance.recency = 1
LEFT JOIN latest_statuses AS status
  ON status.cluster = day.cluster AND status.group_id = day.group_id AND status.recency = 1
LEFT JOIN lag_now
  ON lag_now.cluster = day.cluster AND lag_now.group_id = day.group_id
LEFT JOIN idle_now
  ON idle_now.cluster = day.cluster AND idle_now.group_id = day.group_id
WHERE day.recency = 1
