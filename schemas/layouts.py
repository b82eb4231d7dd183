"""The vocabulary for declaring Kafka binary layouts, in the spirit of Kafka's JSON message specs.

A layout is data: a list of fields with a type, the versions that carry them and, for flexible
versions, an optional tag. `transforms.decoder.layout_reader` is the one interpreter that reads bytes with them, so
adding a record version is a new declaration here, never new parsing code.

Field types: int8 int16 uint16 int32 int64 uuid string bytes struct, and arrays written "[]<type>";
"[]struct" and "struct" take `fields`. Version ranges use Kafka's notation: "0+", "3+", "1", "0-3",
"none".
"""

from __future__ import annotations

from dataclasses import dataclass, field

NO_DEFAULT = object()
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID as Uuid.toString() prints it


@dataclass(frozen=True)
class VersionRange:
    low: int
    high: int | None  # None: open-ended ("3+")

    @classmethod
    def parse(cls, spec: str) -> VersionRange:
        if spec == "none":
            return cls(1, 0)
        if spec.endswith("+"):
            return cls(int(spec[:-1]), None)
        low, _, high = spec.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: int) -> bool:
        return version >= self.low and (self.high is None or version <= self.high)


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    versions: str = "0+"
    nullable_versions: str = "none"
    tag: int | None = None
    tagged_versions: str = "none"
    default: object = NO_DEFAULT
    fields: tuple[Field, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))


@dataclass(frozen=True)
class JvmFastPath:
    """A Java class that decodes some versions of a layout inside Spark, mirroring the declaration.

    The class repeats the layout in code, so a version added to the declaration must be added there
    too: registering the class fails unless its own version list equals `versions` (jobs.session).
    """

    java_class: str
    versions: str


@dataclass(frozen=True)
class Message:
    """One versioned, int16-version-prefixed layout (a record value or an embedded payload)."""

    name: str
    valid_versions: str
    flexible_versions: str = "none"
    fields: tuple[Field, ...] = field(default_factory=tuple)
    # Versions above the highest valid one are read with the highest layout, as Kafka's
    # ConsumerProtocol does for forward compatibility; None means they are unknown and rejected.
    read_newer_as_latest: bool = False
    # Connect tolerates values that end before their optional trailing fields.
    missing_trailing_ok: bool = False
    # The silver decoder's JVM fast path for this layout, if it has one.
    fast_path: JvmFastPath | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))


@dataclass(frozen=True)
class RecordType:
    """One `__consumer_offsets` record type: its key layout and its value layout(s).

    `value_variants` lists incompatible layouts Kafka shipped under the same version number (share
    group records changed in 4.1 without a version bump); the first that reads the whole value wins.
    """

    type_id: int
    name: str
    key_fields: tuple[Field, ...]
    value: Message | None
    value_variants: tuple[Message, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "key_fields", tuple(self.key_fields))
        object.__setattr__(self, "value_variants", tuple(self.value_variants))


def default_value(field: Field, version: int, flexible: bool) -> object:
    """The value Kafka's generated code gives a field it did not read: the declared default, else the
    zero of its type (an empty array, "", 0, the all-zero uuid, a struct of its fields' defaults).

    Kafka's generator reads a JSON `"default": null` as no default at all (so an absent
    `"type": "[]int32", "nullableVersions": "0+", "default": null` field is an empty list, not null);
    only the string `"default": "null"` means null. Declarations follow Kafka's meaning: `default=None`
    only where Kafka's spec says `"null"`."""
    if field.default is not NO_DEFAULT:
        return field.default
    if field.type.startswith("[]"):
        return []
    if field.type == "struct":
        return {
            member.name: default_value(member, version, flexible)
            for member in field.fields
            if version in VersionRange.parse(member.versions)
            and not (flexible and member.tag is not None and version in VersionRange.parse(member.tagged_versions))
        }
    return {"string": "", "bytes": b"", "uuid": ZERO_UUID}.get(field.type, 0)
