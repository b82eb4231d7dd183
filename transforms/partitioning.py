"""Which `__consumer_offsets` partition holds a group: Kafka's own function, bit for bit.

`Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` (GroupCoordinatorService.partitionFor),
where `String.hashCode` runs over UTF-16 code units with int32 wrap-around and `Utils.abs` maps
Integer.MIN_VALUE to 0. The default partition count is 50 and cannot change after creation.
"""

from __future__ import annotations

DEFAULT_OFFSETS_PARTITIONS = 50
_INT32_MIN = -(2**31)


def java_string_hashcode(text: str) -> int:
    data = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for index in range(0, len(data), 2):
        value = (31 * value + ((data[index] << 8) | data[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def offsets_partition(group_id: str, num_partitions: int = DEFAULT_OFFSETS_PARTITIONS) -> int:
    hashcode = java_string_hashcode(group_id)
    return (0 if hashcode == _INT32_MIN else abs(hashcode)) % num_partitions
