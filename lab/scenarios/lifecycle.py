"""How groups and offsets end: a group going Empty, offsets deleted, a group deleted, offsets expiring
(and with them the group), offsets of a deleted topic.

- `life-empty` consumes `events` (2) and `audit` (1), its member stops: the group is Empty (a group
  record with the next generation and no members). Then `kafka-consumer-groups --delete-offsets` for
  `audit`: one offset tombstone.
- `life-deleted` consumes `events`, goes Empty, is deleted (AdminClient delete_consumer_groups): offset
  tombstones, then the group tombstone.
- `life-expired` consumes `expiring`, goes Empty; then a standalone OffsetCommit v4 with a 2 s retention
  re-commits its offset (OffsetCommitValue v1 with an expire timestamp). The broker's expiry sweep
  (every second here) writes the offset tombstone, then, the group being Empty with no offsets left,
  the group tombstone.
- `life-topic` consumes `scratch`, goes Empty; `scratch` is deleted: its offsets get tombstones and the
  group, now Empty without offsets, is removed by the next sweep.
"""

from __future__ import annotations

from lab.broker import Broker
from lab.driver import Lab, ScenarioLog, commit_with_retention

VERSIONS = ("4", "3.9", "4.3", "4.4")


def consume_then_leave(lab: Lab, group: str, topics: tuple[str, ...]) -> None:
    member = f"{group}-m"
    lab.start_member(member, group, topics, assignor="range", metadata=f"{group}:done")
    lab.wait_for_group(group, 1, topics)
    lab.wait_caught_up(group, topics)
    lab.stop_member(member)
    lab.wait_for_state(group, "Empty")


def run(broker: Broker, record: ScenarioLog) -> None:
    lab = Lab(broker, record)
    for topic, partitions in (("events", 2), ("audit", 1), ("expiring", 1), ("scratch", 1)):
        lab.create_topic(topic, partitions)
        lab.produce(topic, 6 * partitions)

    consume_then_leave(lab, "life-empty", ("events", "audit"))
    record.expect("life-empty", "its only member left: Empty", generation=2, members=0)
    broker.consumer_groups("--delete-offsets", "--group", "life-empty", "--topic", "audit")
    lab.wait_for("audit-0 offset deleted", lambda: "audit-0" not in lab.committed("life-empty"))
    record.event("offsets_deleted", group="life-empty", partitions=["audit-0"], via="kafka-consumer-groups")

    consume_then_leave(lab, "life-deleted", ("events",))
    lab.admin.delete_consumer_groups(["life-deleted"], request_timeout=30)["life-deleted"].result(30)
    lab.wait_for("life-deleted gone", lambda: lab.group_gone("life-deleted"))
    record.event("group_deleted", group="life-deleted", via="AdminClient.delete_consumer_groups")
    record.expect("life-deleted", "deleted: offset tombstones then the group tombstone", deleted=True)

    consume_then_leave(lab, "life-expired", ("expiring",))
    commit_with_retention(lab, "life-expired", {("expiring", 0): 6}, retention_ms=2000, metadata="expires in 2s")
    lab.wait_for("life-expired offsets to expire and the group with them", lambda: lab.group_gone("life-expired"))
    record.event("offsets_expired", group="life-expired", partitions=["expiring-0"])
    record.expect("life-expired", "Empty and all offsets expired: group tombstone", deleted=True)

    consume_then_leave(lab, "life-topic", ("scratch",))
    lab.delete_topic("scratch")
    lab.wait_for("life-topic offsets of the deleted topic to go", lambda: not lab.committed("life-topic"))
    record.event("offsets_removed_with_topic", group="life-topic", partitions=["scratch-0"])
    lab.wait_for("life-topic, Empty without offsets, to be removed", lambda: lab.group_gone("life-topic"))
    record.expect("life-topic", "its topic deleted, then Empty without offsets: removed", deleted=True)
