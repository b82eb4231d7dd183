-- stuck_partitions: partitions that have lag now and are not being worked off. One row per
-- (cluster, group_id, topic, partition) of `current_lag` with offset_lag > 0 and either nobody assigned
-- (reason 'no_consumer': the group is empty or the partition unassigned) or Burrow's status STOP (the
-- owner stopped committing), STALL (committing the same offset) or REWIND (went back).
CREATE OR REPLACE VIEW ${database}.stuck_partitions AS
SELECT
  cluster,
  group_id,
  topic,
  partition,
  CASE WHEN owner_member_id IS NULL THEN 'no_consumer' ELSE lower(status) END AS reason,
  status,
  offset_lag,
  time_lag_seconds,
  committed_offset,
  end_offset,
  committed_at,
  (unix_micros(observed_at) - unix_micros(committed_at)) / 1000000.0 AS seconds_since_commit,
  owner_member_id,
  owner_group_instance_id,
  owner_client_id,
  owner_client_host,
  owned_since,
  observed_at
FROM ${database}.current_lag
WHERE offset_lag > 0 AND (owner_member_id IS NULL OR status IN ('STOP', 'STALL', 'REWIND'))
