"""The one interpreter of the layouts declared in `schemas/`: bytes -> plain Python values.

Each (layout, version) is compiled once into a chain of small reader functions of the form
`(buf, pos) -> (value, pos)` (the aiokafka style), so decoding a record is a walk over prebuilt
closures rather than a re-reading of the declaration. Pure Python, no Spark: `jobs.dump` and the
Spark decoder share it.

Encodings follow Kafka's `protocol/types/Type.java`: big-endian fixed-width integers; classic
(non-flexible) strings with an int16 length and bytes/arrays with an int32 length, -1 meaning null;
flexible ("compact") lengths as unsigned varint N+1, 0 meaning null; a tagged-field section at the end
of every flexible struct; UUIDs rendered as Kafka's `Uuid.toString()` (base64url, no padding).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable

from schemas.layouts import Field, Message, VersionRange, default_value
from transforms.decoder.errors import CorruptRecordError

Reader = Callable[[bytes, int], tuple[object, int]]

_INT8, _INT16, _UINT16 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">H")
_INT32, _INT64 = struct.Struct(">i"), struct.Struct(">q")
_FIXED = {"int8": _INT8, "int16": _INT16, "uint16": _UINT16, "int32": _INT32, "int64": _INT64}
_MAX_VARINT_BYTES = 5


def uuid_to_kafka_string(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    for index in range(pos, min(pos + _MAX_VARINT_BYTES, len(buf))):
        byte = buf[index]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, index + 1
        shift += 7
    if pos + _MAX_VARINT_BYTES <= len(buf):
        raise CorruptRecordError(f"byte {pos}", "an unsigned varint of at most 5 bytes", "a longer one")
    raise CorruptRecordError(f"byte {pos}", "an unsigned varint", "the end of the buffer")


def _need(buf: bytes, pos: int, size: int, what: str) -> None:
    if size < 0 or pos + size > len(buf):
        raise CorruptRecordError(f"byte {pos}", f"{what} of {size} bytes", f"{len(buf) - pos} bytes left")


def _fixed_reader(codec: struct.Struct) -> Reader:
    size, unpack = codec.size, codec.unpack_from

    def read(buf: bytes, pos: int) -> tuple[object, int]:
        if pos + size > len(buf):
            raise CorruptRecordError(f"byte {pos}", f"{size}-byte integer", f"{len(buf) - pos} bytes left")
        return unpack(buf, pos)[0], pos + size

    return read


def _read_uuid(buf: bytes, pos: int) -> tuple[object, int]:
    _need(buf, pos, 16, "a uuid")
    return uuid_to_kafka_string(buf[pos : pos + 16]), pos + 16


def _length_reader(flexible: bool, wide: bool) -> Reader:
    """Reads a length prefix; returns -1 for null."""
    if flexible:

        def read(buf: bytes, pos: int) -> tuple[object, int]:
            value, pos = read_uvarint(buf, pos)
            return value - 1, pos

        return read
    return _fixed_reader(_INT32 if wide else _INT16)


def _string_reader(flexible: bool, nullable: bool, name: str) -> Reader:
    read_length = _length_reader(flexible, wide=False)

    def read(buf: bytes, pos: int) -> tuple[object, int]:
        length, pos = read_length(buf, pos)
        if length < 0:
            if nullable and length == -1:
                return None, pos
            raise CorruptRecordError(name, "a string length >= 0" + (" or -1" if nullable else ""), str(length))
        _need(buf, pos, length, "a string")
        try:
            return buf[pos : pos + length].decode("utf-8"), pos + length
        except UnicodeDecodeError as error:
            raise CorruptRecordError(name, "UTF-8 text", f"invalid byte at {pos + error.start}") from None

    return read


def _bytes_reader(flexible: bool, nullable: bool, name: str) -> Reader:
    read_length = _length_reader(flexible, wide=True)

    def read(buf: bytes, pos: int) -> tuple[object, int]:
        length, pos = read_length(buf, pos)
        if length < 0:
            if nullable and length == -1:
                return None, pos
            raise CorruptRecordError(name, "a bytes length >= 0" + (" or -1" if nullable else ""), str(length))
        _need(buf, pos, length, "bytes")
        return bytes(buf[pos : pos + length]), pos + length

    return read


def _array_reader(element: Reader, min_element_size: int, flexible: bool, nullable: bool, name: str) -> Reader:
    read_length = _length_reader(flexible, wide=True)

    def read(buf: bytes, pos: int) -> tuple[object, int]:
        count, pos = read_length(buf, pos)
        if count < 0:
            if nullable and count == -1:
                return None, pos
            raise CorruptRecordError(name, "an array length >= 0" + (" or -1" if nullable else ""), str(count))
        # Reject absurd counts before allocating anything for them.
        if count * min_element_size > len(buf) - pos:
            raise CorruptRecordError(name, f"{count} elements", f"{len(buf) - pos} bytes left")
        items = []
        for _ in range(count):
            item, pos = element(buf, pos)
            items.append(item)
        return items, pos

    return read


def _element_size(type_name: str, flexible: bool) -> int:
    fixed = _FIXED.get(type_name)
    if fixed is not None:
        return fixed.size
    return 16 if type_name == "uuid" else (1 if flexible else 2)


def _field_reader(field: Field, version: int, flexible: bool, tagged: bool) -> Reader:
    nullable = version in VersionRange.parse(field.nullable_versions)
    type_name = field.type
    if type_name.startswith("[]"):
        element_type = type_name[2:]
        element = (
            _struct_reader(field.fields, version, flexible, field.name)
            if element_type == "struct"
            else _scalar_reader(element_type, flexible, False, field.name)
        )
        return _array_reader(element, _element_size(element_type, flexible), flexible, nullable, field.name)
    if type_name == "struct":
        body = _struct_reader(field.fields, version, flexible, field.name)
        return _nullable_struct_reader(body, tagged) if nullable else body
    return _scalar_reader(type_name, flexible, nullable, field.name)


def _scalar_reader(type_name: str, flexible: bool, nullable: bool, name: str) -> Reader:
    if type_name in _FIXED:
        return _fixed_reader(_FIXED[type_name])
    if type_name == "uuid":
        return _read_uuid
    if type_name == "string":
        return _string_reader(flexible, nullable, name)
    if type_name == "bytes":
        return _bytes_reader(flexible, nullable, name)
    raise ValueError(f"layout error: unknown field type {type_name!r} for {name}")


def _nullable_struct_reader(body: Reader, tagged: bool) -> Reader:
    # Untagged nullable structs carry an int8 marker (-1 null); tagged ones a uvarint (0 null).
    def read(buf: bytes, pos: int) -> tuple[object, int]:
        _need(buf, pos, 1, "a struct presence marker")
        marker = buf[pos]
        if marker in (0x00, 0xFF) and (tagged or marker == 0xFF):
            return None, pos + 1
        if marker != 1:
            raise CorruptRecordError("struct marker", "1 (present) or null marker", str(marker))
        return body(buf, pos + 1)

    return read


def _struct_reader(
    fields: tuple[Field, ...], version: int, flexible: bool, name: str, stop_at_end: bool = False
) -> Reader:
    steps: list[tuple[str, Reader]] = []
    tagged: dict[int, tuple[Field, Reader]] = {}
    for field in fields:
        if version not in VersionRange.parse(field.versions):
            continue
        if flexible and field.tag is not None and version in VersionRange.parse(field.tagged_versions):
            tagged[field.tag] = (field, _field_reader(field, version, flexible, tagged=True))
        else:
            steps.append((field.name, _field_reader(field, version, flexible, tagged=False)))

    # An absent tagged field takes its default, and Kafka prints a tagged field only when it differs
    # from that default (the generated JsonConverter's non-default check), so neither do we.
    tag_defaults = {tag: default_value(field, version, flexible) for tag, (field, _) in tagged.items()}

    def read(buf: bytes, pos: int) -> tuple[object, int]:
        values: dict[str, object] = {}
        field_name = "?"
        try:
            for field_name, reader in steps:
                if stop_at_end and pos == len(buf):
                    return values, pos
                values[field_name], pos = reader(buf, pos)
            if flexible:
                field_name = "tagged fields"
                pos = _read_tagged_section(buf, pos, tagged, tag_defaults, values)
        except CorruptRecordError as error:
            raise CorruptRecordError(f"{name}.{field_name}: {error.where}", error.expected, error.found) from None
        return values, pos

    return read


def _read_tagged_section(
    buf: bytes,
    pos: int,
    tagged: dict[int, tuple[Field, Reader]],
    defaults: dict[int, object],
    values: dict[str, object],
) -> int:
    count, pos = read_uvarint(buf, pos)
    previous_tag = -1
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if tag <= previous_tag:
            raise CorruptRecordError(f"tag {tag}", f"tags in ascending order after {previous_tag}", str(tag))
        previous_tag = tag
        _need(buf, pos, size, f"tagged field {tag}")
        end = pos + size
        known = tagged.get(tag)
        if known is not None:  # unknown tags are skipped by size, as Kafka's readers do
            field, reader = known
            value, consumed = reader(buf[:end], pos)
            if consumed != end:
                raise CorruptRecordError(field.name, f"{size} bytes", f"{consumed - pos} bytes read")
            if value != defaults[tag]:
                values[field.name] = value
        pos = end
    return pos


_compiled: dict[tuple[int, int | str], Reader] = {}


def compile_message(message: Message, version: int) -> Reader:
    key = (id(message), version)
    reader = _compiled.get(key)
    if reader is None:
        flexible = version in VersionRange.parse(message.flexible_versions)
        reader = _struct_reader(message.fields, version, flexible, message.name, message.missing_trailing_ok)
        _compiled[key] = reader
    return reader


def compile_fields(fields: tuple[Field, ...], name: str) -> Reader:
    """A reader for an unversioned, non-flexible layout (record keys, assignor user data).

    Keyed by name too: record types 0 and 1 share one key layout, and each names its own in errors."""
    key = (id(fields), name)
    reader = _compiled.get(key)
    if reader is None:
        reader = _compiled[key] = _struct_reader(fields, 0, False, name)
    return reader


def effective_version(message: Message, version: int) -> int:
    valid = VersionRange.parse(message.valid_versions)
    if version in valid:
        return version
    if message.read_newer_as_latest and valid.high is not None and version > valid.high:
        return valid.high
    raise CorruptRecordError(message.name, f"version {message.valid_versions}", f"version {version}")


def read_versioned(message: Message, buf: bytes, *, allow_trailing: bool = False) -> tuple[int, dict]:
    """Reads `int16 version ++ body`; returns (the version as written, the fields)."""
    if len(buf) < 2:
        raise CorruptRecordError(message.name, "an int16 version", f"{len(buf)} bytes")
    version = _INT16.unpack_from(buf, 0)[0]
    values, pos = compile_message(message, effective_version(message, version))(buf, 2)
    if pos != len(buf) and not allow_trailing:
        raise CorruptRecordError(message.name, f"{pos} bytes", f"{len(buf) - pos} trailing bytes")
    return version, values


def read_exact(fields: tuple[Field, ...], name: str, buf: bytes, pos: int = 0) -> dict:
    values, end = compile_fields(fields, name)(buf, pos)
    if end != len(buf):
        raise CorruptRecordError(name, f"{end - pos} bytes", f"{len(buf) - end} trailing bytes")
    return values
