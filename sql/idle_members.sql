-- idle_members: members that own nothing. One row per (cluster, group_id, generation, member) for every
-- member without partitions in a generation of a consumer group (table generation_capacity), with why
-- (`reason`: more_members_than_partitions | assignor_gave_none | subscription_matches_nothing | unknown), the generation's
-- capacity (members, partitions per member, `capacity_used` = members owning something / members), and
-- how long the group has been carrying idle members: `idle_for_ms`, from `idle_since` to the end of the
-- generation, or for the current one to the latest data the warehouse holds for the cluster (its latest
-- generation record or end-offset snapshot). `is_long_idle`: idle members for 24 hours or more.
CREATE OR REPLACE VIEW ${database}.idle_members AS
WITH held_until AS (
  SELECT cluster, max(at) AS held_until
  FROM (
    SELECT cluster, recorded_at AS at FROM ${database}.generation_capacity
    UNION ALL
    SELECT cluster, observed_at AS at FROM ${database}.lag
  )
  GROUP BY cluster
),
idle AS (
  SELECT
    capacity.*,
    member,
    valid_until IS NULL AS is_current,
    (unix_millis(coalesce(valid_until, greatest(held_until.held_until, recorded_at))) - unix_millis(idle_since))
      AS idle_for_ms
  FROM ${database}.generation_capacity AS capacity
  LEFT JOIN held_until ON held_until.cluster = capacity.cluster
  LATERAL VIEW explode(idle_members) AS member
)
SELECT
  cluster,
  group_id,
  incarnation,
  generation,
  group_protocol,
  recorded_at,
  valid_until,
  is_current,
  member.member_id,
  member.group_instance_id,
  member.client_id,
  member.client_host,
  member.subscribed_topics,
  member.reason,
  member_count,
  idle_member_count,
  assigned_partition_count,
  min_partitions_per_member,
  max_partitions_per_member,
  avg_partitions_per_member,
  capacity_used,
  idle_since,
  idle_for_ms,
  idle_for_ms >= 24 * 3600 * 1000 AS is_long_idle
FROM idle
