"""Kafka's message-schema primitives (the ``*.json`` message definitions' wire format), read and
written from our own field tables.

A coordinator record key or value is ``int16 version`` followed by the fields of that version::

    non-flexible version                      flexible version (flexibleVersions)
    int8/16/32/64   big-endian                same
    uuid            16 bytes                  same
    string          int16 length (-1 null)    uvarint length+1 (0 null), UTF-8
    bytes           int32 length (-1 null)    uvarint length+1 (0 null)
    array           int32 count (-1 null)     uvarint count+1 (0 null)
    struct          its fields                its fields + tagged fields
    (end)           -                         tagged fields: uvarint count, then per field
                                              uvarint tag, uvarint size, the value

A nullable struct is preceded by an int8 (-1 null, 1 present). Tagged fields (``taggedVersions``)
appear only in flexible versions, only when their value is not the default; unknown tags are skipped.

:func:`read_message` returns the fields by Kafka's name (tagged fields absent take their default);
:func:`to_kafka_json` renders them as Kafka's generated JSON converters do (camelCase names, fields
of other versions left out, tagged fields only when not default, bytes as base64) — what
``kafka-dump-log.sh`` prints; :func:`write_message` encodes (for tests and the demo).
"""
from __future__ import annotations

import base64
import builtins
import struct
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

NO_VERSION_LIMIT = 0x7FFF
INT_TYPES = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q"}
# The other fixed-width types (KRaft metadata records use them): bool is one byte (non-zero true),
# uint16 two bytes unsigned, float64 an IEEE double, all big-endian.
FIXED_TYPES = {"bool": ">?", "uint16": ">H", "float64": ">d"}
UUID_SIZE = 16
NULL_STRUCT_MARKER = -1
PRESENT_STRUCT_MARKER = 1
MAX_VARINT_BYTES = 5


class MessageFormatError(ValueError):
    """The bytes do not hold the message they should (truncated, a null where none is allowed, ...)."""


def parse_versions(spec: Optional[str]) -> Optional[Tuple[int, int]]:
    """Kafka's version range syntax: ``"0+"``, ``"3+"``, ``"1"``, ``"0-4"``; ``None``/``"none"`` = no version."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), NO_VERSION_LIMIT
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def _in(rng: Optional[Tuple[int, int]], version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


@dataclass(frozen=True)
class Field:
    """One field of a message definition: ``type`` is ``int8..int64``, ``string``, ``bytes``,
    ``bool``, ``uint16``, ``float64``, ``uuid``, ``[]<type>`` or ``struct``/``[]struct`` with ``fields``."""

    name: str
    type: str
    versions: str = "0+"
    nullable: Optional[str] = None
    tag: Optional[int] = None          # tagged field (taggedVersions = versions)
    default: Any = None
    fields: Tuple["Field", ...] = ()

    @property
    def json_name(self) -> str:
        """Kafka's JSON converters use the camelCase name (first letter lower case)."""
        return self.name[:1].lower() + self.name[1:]

    def default_value(self) -> Any:
        if self.default is not None:
            return self.default
        if self.nullable is not None and self.tag is not None:
            return None
        if self.type in INT_TYPES or self.type == "uint16":
            return 0
        if self.type == "bool":
            return False
        if self.type == "float64":
            return 0.0
        if self.type.startswith("[]"):
            return []
        return "" if self.type == "string" else None


@dataclass(frozen=True)
class Message:
    """A message definition: its name, valid versions and flexible versions, fields in order."""

    name: str
    valid_versions: str
    flexible_versions: Optional[str]
    fields: Tuple[Field, ...]

    def is_valid(self, version: int) -> bool:
        return _in(parse_versions(self.valid_versions), version)

    def is_flexible(self, version: int) -> bool:
        return _in(parse_versions(self.flexible_versions), version)


# --- reading ---------------------------------------------------------------------------------

class MessageReader:
    """Reads Kafka's primitives from ``data`` starting at ``pos``; every read past the end raises
    :class:`MessageFormatError` naming the byte position."""

    def __init__(self, data: bytes, pos: int = 0, what: str = "message"):
        self.data = bytes(data)
        self.pos = pos
        self.what = what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MessageFormatError(f"{self.what} is truncated: {n} bytes needed at byte {self.pos} "
                                     f"of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self, kind: str) -> int:
        fmt = INT_TYPES[kind]
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def uvarint(self) -> builtins.int:     # builtins: the method `int` above shadows the type here
        value = shift = 0
        for _ in range(MAX_VARINT_BYTES):
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise self.too_long_varint()

    def too_long_varint(self) -> Exception:
        return MessageFormatError(f"{self.what} has a varint longer than {MAX_VARINT_BYTES} bytes at byte {self.pos}")

    def length(self, flexible: bool, kind: str) -> builtins.int:
        """A string/bytes/array length; -1 for null."""
        if flexible:
            return self.uvarint() - 1
        return self.int("int16" if kind == "string" else "int32")

    @property
    def remaining(self) -> builtins.int:
        return len(self.data) - self.pos


def _null_check(field: Field, version: int, n: int, at: int, what: str) -> None:
    if n < -1 or (n == -1 and not _in(parse_versions(field.nullable), version)):
        raise MessageFormatError(f"{what}: field {field.name} has length {n} at byte {at}, "
                                 "which it cannot have")


def _read_value(r: MessageReader, field: Field, type_: str, version: int, flexible: bool, item: bool = False) -> Any:
    if type_ in INT_TYPES:
        return r.int(type_)
    if type_ in FIXED_TYPES:
        fmt = FIXED_TYPES[type_]
        return struct.unpack(fmt, r.take(struct.calcsize(fmt)))[0]
    if type_ == "uuid":
        return base64.urlsafe_b64encode(r.take(UUID_SIZE)).decode("ascii").rstrip("=")
    if type_ in ("string", "bytes"):
        at = r.pos
        n = r.length(flexible, type_)
        _null_check(field, version, n, at, r.what)
        if n == -1:
            return None
        raw = r.take(n)
        return raw.decode("utf-8", errors="replace") if type_ == "string" else raw
    if type_ == "struct":
        if not item and _in(parse_versions(field.nullable), version):   # array items carry no marker
            if r.int("int8") == NULL_STRUCT_MARKER:
                return None
        return _read_fields(r, field.fields, version, flexible)
    if type_.startswith("[]"):
        at = r.pos
        n = r.length(flexible, "array")
        _null_check(field, version, n, at, r.what)
        if n == -1:
            return None
        item_type = type_[2:]
        return [_read_value(r, field, item_type, version, flexible, True) for _ in range(n)]
    raise MessageFormatError(f"unknown field type {type_}")


def _read_tagged(r: MessageReader, fields: Sequence[Field], version: int, out: Dict[str, Any]) -> None:
    by_tag = {f.tag: f for f in fields if f.tag is not None and _in(parse_versions(f.versions), version)}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        size = r.uvarint()
        body = r.take(size)
        field = by_tag.get(tag)
        if field is not None:     # unknown tags are skipped, as Kafka keeps them as unknown fields
            out[field.name] = _read_tagged_value(body, field, version, r.what)


def _read_tagged_value(body: bytes, field: Field, version: int, what: str) -> Any:
    """A tagged field's value from its body. A tagged struct is read without the nullable-struct
    marker byte first, then with it: whichever reads the body exactly."""
    attempts = (True, False) if field.type == "struct" else (False,)
    for item in attempts:
        sub = MessageReader(body, 0, what)
        try:
            value = _read_value(sub, field, field.type, version, True, item)
        except MessageFormatError:
            if item:
                continue
            raise
        if sub.remaining == 0 or item is False:
            return value
    raise MessageFormatError(f"{what}: tagged field {field.name} does not fill its {len(body)} bytes")


def _read_fields(r: MessageReader, fields: Sequence[Field], version: int, flexible: bool) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for f in fields:
        if not _in(parse_versions(f.versions), version):
            continue
        if f.tag is not None:
            out[f.name] = f.default_value()
            continue
        out[f.name] = _read_value(r, f, f.type, version, flexible)
    if flexible:
        _read_tagged(r, fields, version, out)
    return out


def read_message(message: Message, data: bytes, version: int, *, pos: int = 0) -> Tuple[Dict[str, Any], int]:
    """The fields of ``message`` at ``version`` read from ``data[pos:]``; returns (fields, end position)."""
    r = MessageReader(data, pos, message.name)
    out = _read_fields(r, message.fields, version, message.is_flexible(version))
    return out, r.pos


# --- Kafka's JSON ----------------------------------------------------------------------------

def _json_value(field: Field, type_: str, value: Any, version: int) -> Any:
    if value is None:
        return None
    if type_ == "bytes":
        return base64.b64encode(value).decode("ascii")
    if type_ == "struct":
        return _json_fields(field.fields, value, version)
    if type_.startswith("[]"):
        return [_json_value(field, type_[2:], v, version) for v in value]
    return value


def _json_fields(fields: Sequence[Field], values: Dict[str, Any], version: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for f in fields:
        if f.name not in values:
            continue
        v = values[f.name]
        if f.tag is not None and v == f.default_value():
            continue
        out[f.json_name] = _json_value(f, f.type, v, version)
    return out


def to_kafka_json(message: Message, values: Dict[str, Any], version: int) -> Dict[str, Any]:
    """``values`` as Kafka's generated ``<Message>JsonConverter.write`` renders them."""
    return _json_fields(message.fields, values, version)


# --- writing (tests, demo) -------------------------------------------------------------------

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _write_length(n: int, flexible: bool, kind: str) -> bytes:
    if flexible:
        return _uvarint(n + 1)
    return struct.pack(">h" if kind == "string" else ">i", n)


def _write_value(field: Field, type_: str, value: Any, version: int, flexible: bool, item: bool = False) -> bytes:
    if type_ in INT_TYPES:
        return struct.pack(INT_TYPES[type_], value)
    if type_ in FIXED_TYPES:
        return struct.pack(FIXED_TYPES[type_], value)
    if type_ == "uuid":
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    if type_ in ("string", "bytes"):
        if value is None:
            return _write_length(-1, flexible, type_)
        raw = value.encode("utf-8") if type_ == "string" else bytes(value)
        return _write_length(len(raw), flexible, type_) + raw
    if type_ == "struct":
        marker = b""
        if not item and _in(parse_versions(field.nullable), version):
            if value is None:
                return struct.pack(">b", NULL_STRUCT_MARKER)
            marker = struct.pack(">b", PRESENT_STRUCT_MARKER)
        return marker + _write_fields(field.fields, value, version, flexible)
    if type_.startswith("[]"):
        if value is None:
            return _write_length(-1, flexible, "array")
        return _write_length(len(value), flexible, "array") + b"".join(
            _write_value(field, type_[2:], v, version, flexible, True) for v in value)
    raise MessageFormatError(f"unknown field type {type_}")


def _write_fields(fields: Sequence[Field], values: Dict[str, Any], version: int, flexible: bool) -> bytes:
    out = bytearray()
    tagged = []
    for f in fields:
        if not _in(parse_versions(f.versions), version):
            continue
        v = values.get(f.name, f.default_value())
        if f.tag is not None:
            if flexible and v != f.default_value():
                tagged.append((f.tag, _write_value(f, f.type, v, version, True)))
            continue
        out += _write_value(f, f.type, v, version, flexible)
    if flexible:
        out += _uvarint(len(tagged))
        for tag, body in sorted(tagged):
            out += _uvarint(tag) + _uvarint(len(body)) + body
    return bytes(out)


def write_message(message: Message, values: Dict[str, Any], version: int, *, with_version: bool = True) -> bytes:
    """``values`` encoded as ``message`` at ``version`` (prefixed by the int16 version unless told not)."""
    body = _write_fields(message.fields, values, version, message.is_flexible(version))
    return (struct.pack(">h", version) if with_version else b"") + body
