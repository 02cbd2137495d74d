"""A coordinator record (key and value of ``__consumer_offsets`` / ``__transaction_state``) decoded
against a table of record types, never raising: what cannot be read is a row with a reason.

Layout (both topics)::

    key   = int16 record type (Kafka: the key "version", CoordinatorRecordType) + the key's fields
    value = int16 value version + the value's fields, or null: a tombstone (the key was deleted)

Kafka's ``kafka-dump-log.sh --offsets-decoder`` / ``--transaction-log-decoder`` print a record as
``key: {"type":"<type>","data":{...}} payload: {"version":"<v>","data":{...}}`` (``payload:
<DELETE>`` for a tombstone; ``key: Unknown record type N at offset O, skipping.`` and ``key: Error
at offset O, skipping. <why>`` with no payload when it cannot decode): :func:`kafka_dump_text`.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from kafkalog.coordinator.message import Message, MessageFormatError, read_message, to_kafka_json, write_message

VERSION_SIZE = 2
TOMBSTONE_PAYLOAD = "<DELETE>"


@dataclass(frozen=True)
class RecordType:
    """One record type: its number in the key, its name, key and value definitions, and an optional
    hook that rewrites the value's Kafka JSON (the offsets decoder expands consumer-protocol bytes)."""

    id: int
    name: str
    key: Message
    value: Message
    json_hook: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None
    earlier_layouts: Tuple[Message, ...] = ()   # same version number, written by earlier releases


@dataclass
class DecodedRecord:
    """What one record holds. ``error`` is set (and ``key``/``value`` may be None) when it could not
    be decoded; ``tombstone`` when the value is null."""

    record_type: Optional[int] = None
    type_name: Optional[str] = None
    key: Optional[Dict[str, Any]] = None
    value_version: Optional[int] = None
    value: Optional[Dict[str, Any]] = None
    tombstone: bool = False
    error: Optional[str] = None
    unknown_type: bool = False
    key_json: Optional[Dict[str, Any]] = field(default=None, repr=False)
    value_json: Optional[Dict[str, Any]] = field(default=None, repr=False)


def _version(data: bytes, what: str) -> int:
    if len(data) < VERSION_SIZE:
        raise MessageFormatError(f"{what} is truncated: {len(data)} bytes, the int16 version needs {VERSION_SIZE}")
    return struct.unpack(">h", data[:VERSION_SIZE])[0]


def decode_record(types: Mapping[int, RecordType], key: Optional[bytes], value: Optional[bytes]) -> DecodedRecord:
    """Decode one record; unknown record types, unknown value versions, truncated or malformed bytes
    give a DecodedRecord with ``error`` (and whatever could be read), never an exception."""
    out = DecodedRecord()
    if key is None:
        out.error = "the record has no key (a coordinator record always has one)"
        return out
    try:
        out.record_type = _version(key, "key")
        rt = types.get(out.record_type)
        if rt is None:
            out.unknown_type = True
            out.error = f"unknown record type {out.record_type}"
            return out
        out.type_name = rt.name
        out.key, _ = read_message(rt.key, key, 0, pos=VERSION_SIZE)
        out.key_json = to_kafka_json(rt.key, out.key, 0)
        if value is None:
            out.tombstone = True
            return out
        out.value_version = _version(value, f"{rt.value.name}")
        if not rt.value.is_valid(out.value_version):
            out.error = (f"unknown {rt.value.name} version {out.value_version} "
                         f"(versions {rt.value.valid_versions} are known)")
            return out
        layout = _layout_that_fits(rt, value, out.value_version)
        out.value, _ = read_message(layout, value, out.value_version, pos=VERSION_SIZE)
        out.value_json = to_kafka_json(layout, out.value, out.value_version)
        if rt.json_hook is not None:
            out.value_json = rt.json_hook(out.value_json)
    except (MessageFormatError, UnicodeDecodeError, struct.error, ValueError) as e:
        out.error = str(e)
    return out


def _layout_that_fits(rt: RecordType, value: bytes, version: int) -> Message:
    """The value's layout: the current one, unless it does not read the bytes exactly and an earlier
    release's layout of the same version does (KIP-848's early-access records changed in place)."""
    if not rt.earlier_layouts:
        return rt.value
    for layout in (rt.value,) + rt.earlier_layouts:
        try:
            _, end = read_message(layout, value, version, pos=VERSION_SIZE)
        except (MessageFormatError, ValueError):
            continue
        if end == len(value):
            return layout
    return rt.value


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def kafka_dump_text(record: DecodedRecord, offset: int) -> Tuple[str, Optional[str]]:
    """(key text, payload text or None) as kafka-dump-log.sh's coordinator record parsers print them."""
    if record.unknown_type:
        return f"Unknown record type {record.record_type} at offset {offset}, skipping.", None
    if record.error is not None:
        return f"Error at offset {offset}, skipping. {record.error}", None
    key = _compact({"type": str(record.record_type), "data": record.key_json})
    if record.tombstone:
        return key, TOMBSTONE_PAYLOAD
    return key, _compact({"version": str(record.value_version), "data": record.value_json})


def record_json(record: DecodedRecord) -> Dict[str, Any]:
    """The decoded record as one JSON object (``kafkalog dump --json`` with a decoder)."""
    out: Dict[str, Any] = {"recordType": record.record_type, "recordTypeName": record.type_name,
                           "decodedKey": record.key_json, "valueVersion": record.value_version,
                           "decodedValue": record.value_json, "tombstone": record.tombstone}
    if record.error is not None:
        out["decodeError"] = record.error
    return out


def encode_key(record_type: RecordType, fields: Dict[str, Any]) -> bytes:
    """A record key as a coordinator writes it: the int16 record type, then the key's fields."""
    return struct.pack(">h", record_type.id) + write_message(record_type.key, fields, 0, with_version=False)


def encode_value(record_type: RecordType, fields: Dict[str, Any], version: int) -> bytes:
    """A record value as a coordinator writes it: the int16 value version, then its fields."""
    return write_message(record_type.value, fields, version)
