"""A KRaft metadata record's value (Kafka's ``MetadataRecordSerde`` / ``AbstractApiMessageSerde``) and how
``kafka-dump-log.sh --cluster-metadata-decoder`` prints it.

Layout of the value (the key is always null)::

    frame version   unsigned varint (1; 0 was KRaft's 2.8 preview, refused)
    api key         unsigned varint (the record type, METADATA_RECORD_TYPES)
    version         unsigned varint (the record's version)
    message         the record type's fields at that version (flexible: tagged fields at the end)

DumpLogSegments prints ``payload: {"type":"<TYPE>","version":<v>,"data":{...}}`` with ``data`` as the
generated JSON converter writes it, or ``payload: Error at <offset>, skipping. <why>`` when it cannot.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Optional

from kafkalog.coordinator.message import MessageFormatError, MessageReader, read_message, to_kafka_json
from kafkalog.metadata.metadata_record_type import METADATA_RECORD_TYPES

FRAME_VERSION = 1


@dataclass
class MetadataRecord:
    """One decoded metadata record value; ``error`` set (and the rest possibly None) when it could not be read."""
    api_key: Optional[int] = None
    type_name: Optional[str] = None
    version: Optional[int] = None
    data: Optional[Dict[str, Any]] = None
    error: Optional[str] = None
    detail: Optional[str] = None         # what exactly could not be read, where Kafka's wording does not say


def decode_metadata_record(value: Optional[bytes]) -> MetadataRecord:
    """Decode a metadata record value; never raises (a problem is ``error``, worded as Kafka's serde words it)."""
    out = MetadataRecord()
    if value is None:
        out.error = "the metadata record has no value"
        return out
    r = MessageReader(value, 0, "metadata record")
    try:
        frame = r.uvarint()
        if frame == 0:
            raise MessageFormatError("Could not deserialize metadata record with frame version 0. Note that upgrades "
                                     "from the preview release of KRaft in 2.8 to newer versions are not supported.")
        if frame != FRAME_VERSION:
            raise MessageFormatError(f"Could not deserialize metadata record due to unknown frame version {frame}"
                                     f"(only frame version {FRAME_VERSION} is supported)")
        out.api_key = r.uvarint()
        out.version = r.uvarint()
        rt = METADATA_RECORD_TYPES.get(out.api_key)
        if rt is None:
            raise MessageFormatError(f"Unknown metadata id {out.api_key}")
        out.type_name = rt.type_name
        try:
            if not rt.message.is_valid(out.version):
                raise MessageFormatError(f"{rt.message.name} has no version {out.version} "
                                         f"(versions {rt.message.valid_versions})")
            fields, end = read_message(rt.message, value, out.version, pos=r.pos)
        except (MessageFormatError, UnicodeDecodeError, ValueError) as e:
            out.detail = str(e)          # Kafka's serde says only which type failed
            raise MessageFormatError(f"Failed to deserialize record with type {out.api_key}") from None
        if end != len(value):
            raise MessageFormatError(f"Found {len(value) - end} byte(s) of garbage after {out.api_key}")
        out.data = to_kafka_json(rt.message, fields, out.version)
    except (MessageFormatError, UnicodeDecodeError, ValueError) as e:
        out.error = str(e)
    return out


def kafka_dump_payload(record: MetadataRecord, offset: int) -> str:
    """The text DumpLogSegments' ClusterMetadataLogMessageParser prints after ``payload: ``."""
    if record.error is not None:
        return f"Error at {offset}, skipping. {record.error}"
    return json.dumps({"type": record.type_name, "version": record.version, "data": record.data},
                      separators=(",", ":"), ensure_ascii=False)


def metadata_record_json(record: MetadataRecord) -> Dict[str, Any]:
    """The decoded record as fields of one ``kafkalog dump --json`` object."""
    out: Dict[str, Any] = {"metadataType": record.type_name, "metadataVersion": record.version,
                           "decodedValue": record.data}
    if record.error is not None:
        out["decodeError"] = record.error if record.detail is None else f"{record.error}: {record.detail}"
    return out
