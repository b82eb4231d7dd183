-- current_assignment: who consumes what now. One row per (cluster, group_id, topic, partition) assigned in
-- the group's current generation (classic) or target-assignment epoch (KIP-848); empty and deleted groups
-- have none. `owned_since` is when this owner (the static instance, else the member id) got the partition
-- and kept it without a gap, across rebalances that left it in place.
CREATE OR REPLACE VIEW ${database}.current_assignment AS
WITH ownership_changes AS (
  SELECT
    *,
    CASE
      WHEN lag(member_key) OVER owner_history = member_key AND lag(valid_until) OVER owner_history = assigned_at THEN 0
      ELSE 1
    END AS is_new_owner
  FROM ${database}.generation_assignments
  WINDOW owner_history AS (PARTITION BY cluster, group_id, incarnation, topic, partition ORDER BY generation)
),
ownerships AS (
  SELECT
    *,
    sum(is_new_owner) OVER (
      PARTITION BY cluster, group_id, incarnation, topic, partition
      ORDER BY generation ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS ownership
  FROM ownership_changes
),
owned_since AS (
  SELECT
    *,
    min(assigned_at) OVER (PARTITION BY cluster, group_id, incarnation, topic, partition, ownership) AS owned_since
  FROM ownerships
)
SELECT
  cluster,
  group_id,
  topic,
  partition,
  member_id,
  group_instance_id,
  client_id,
  client_host,
  group_protocol,
  generation,
  assigned_at,
  owned_since,
  topic_id,
  topic_name_source
FROM owned_since
WHERE valid_until IS NULL
