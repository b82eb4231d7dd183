-- current_share_lag: each share group's backlog now. One row per (cluster, group_id, topic, partition) at
-- the cluster's latest end-offset snapshot with a share_lag row, for share partitions whose state exists
-- then (a deleted group or topic has none). start_offset and lag are what `kafka-share-groups --describe
-- --offsets` prints as START-OFFSET and LAG (null where it prints '-'); in_flight_count counts the
-- records delivered and not yet acknowledged or archived, max_delivery_count the most deliveries any of
-- them had. A backlog is stuck when the start offset has not moved for [share] stuck_after_minutes while
-- the lag stayed above 0; a redelivery storm when a record in flight was delivered more than [share]
-- redelivery_limit times.
CREATE OR REPLACE VIEW ${database}.current_share_lag AS
WITH latest_snapshots AS (
  SELECT cluster, max(observed_at) AS observed_at
  FROM ${database}.share_lag
  GROUP BY cluster
)
SELECT
  share_lag.cluster,
  share_lag.group_id,
  share_lag.topic,
  share_lag.partition,
  share_lag.observed_at,
  share_lag.end_offset,
  share_lag.start_offset,
  share_lag.lag,
  share_lag.delivery_complete_count,
  share_lag.in_flight_count,
  share_lag.acknowledged_count,
  share_lag.archived_count,
  share_lag.max_delivery_count,
  share_lag.state_epoch,
  share_lag.leader_epoch,
  share_lag.state_recorded_at,
  share_lag.backlog_since,
  share_lag.is_start_offset_stuck,
  share_lag.is_redelivery_storm
FROM ${database}.share_lag AS share_lag
JOIN latest_snapshots USING (cluster, observed_at)
