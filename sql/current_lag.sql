-- current_lag: how far behind each group is now. One row per (cluster, group_id, topic, partition) at the
-- cluster's latest end-offset snapshot with a lag row (the end_offsets job stamps every row of one
-- snapshot with one observed_at), for groups holding a committed offset then: a group whose offsets were
-- deleted or expired before that snapshot has no row, nor has a partition the snapshot does not list (its
-- topic deleted). With Burrow's status at that snapshot and the partition's current owner (null: nobody
-- is assigned the partition).
CREATE OR REPLACE VIEW ${database}.current_lag AS
WITH latest_snapshots AS (
  -- Per cluster, not per partition: a partition's own latest row can be a snapshot from before its
  -- group's offsets went, which is not now.
  SELECT cluster, max(observed_at) AS observed_at
  FROM ${database}.lag
  GROUP BY cluster
)
SELECT
  lag.cluster,
  lag.group_id,
  lag.topic,
  lag.partition,
  lag.observed_at,
  lag.committed_offset,
  lag.committed_at,
  lag.end_offset,
  lag.offset_lag,
  lag.is_committed_ahead,
  lag.time_lag_seconds,
  lag.time_lag_method,
  lag.time_lag_uncertainty_seconds,
  status.status,
  status.last_commit_at,
  owner.member_id AS owner_member_id,
  owner.group_instance_id AS owner_group_instance_id,
  owner.client_id AS owner_client_id,
  owner.client_host AS owner_client_host,
  owner.owned_since
FROM ${database}.lag AS lag
JOIN latest_snapshots USING (cluster, observed_at)
LEFT JOIN ${database}.consumer_status AS status
  ON status.cluster = lag.cluster
  AND status.group_id = lag.group_id
  AND status.topic = lag.topic
  AND status.partition = lag.partition
  AND status.evaluated_at = lag.observed_at
LEFT JOIN ${database}.current_assignment AS owner
  ON owner.cluster = lag.cluster
  AND owner.group_id = lag.group_id
  AND owner.topic = lag.topic
  AND owner.partition = lag.partition
