"""Control records as DumpLogSegments prints them: transaction markers and KRaft's own records.

KRaft's snapshot header/footer, kraft.version and voters records are flexible-version messages; they
are printed as Kafka's JSON converters write them.
"""
from __future__ import annotations

import base64
import json
import struct
from typing import Any, Dict, Optional, Tuple

from kafkalog.coordinator.message import MessageReader
from kafkalog.errors import InvalidRecordError
from kafkalog.format import control_record as cr


class ControlRecordReader(MessageReader):
    """Kafka's message primitives over a KRaft control record value, failing as InvalidRecordError."""
    def __init__(self, data: bytes, what: str):
        super().__init__(data, 0, what)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise InvalidRecordError(f"{self.what} control record value is truncated at byte {self.pos}")
        return super().take(n)

    def too_long_varint(self) -> Exception:
        return InvalidRecordError(f"{self.what} control record value has a varint longer than 5 bytes")

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def uint16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uuid(self) -> str:
        """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
        return base64.urlsafe_b64encode(self.take(16)).decode("ascii").rstrip("=")

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise InvalidRecordError(f"{self.what} control record value has a null non-nullable string")
        return self.take(n).decode("utf-8", errors="replace")

    def compact_array(self, read_item) -> list:
        n = self.uvarint() - 1
        if n < 0:
            raise InvalidRecordError(f"{self.what} control record value has a null non-nullable array")
        return [read_item() for _ in range(n)]

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def _snapshot_header(r: ControlRecordReader) -> dict:
    out = {"version": r.int16(), "lastContainedLogTimestamp": r.int64()}
    r.tagged_fields()
    return out


def _snapshot_footer(r: ControlRecordReader) -> dict:
    out = {"version": r.int16()}
    r.tagged_fields()
    return out


def _kraft_version(r: ControlRecordReader) -> dict:
    out = {"version": r.int16(), "kRaftVersion": r.int16()}
    r.tagged_fields()
    return out


def _voters(r: ControlRecordReader) -> dict:
    def endpoint():
        e = {"name": r.compact_string(), "host": r.compact_string(), "port": r.uint16()}
        r.tagged_fields()
        return e

    def voter():
        v: Dict[str, Any] = {"voterId": r.int32(), "voterDirectoryId": r.uuid(), "endpoints": r.compact_array(endpoint)}
        feature = {"minSupportedVersion": r.int16(), "maxSupportedVersion": r.int16()}
        r.tagged_fields()
        v["kRaftVersionFeature"] = feature
        r.tagged_fields()
        return v

    out: Dict[str, Any] = {"version": r.int16()}
    out["voters"] = r.compact_array(voter)
    r.tagged_fields()
    return out


def _leader_change(r: ControlRecordReader) -> dict:
    """LeaderChangeMessage (flexible): Version int16, LeaderId int32, Voters and GrantingVoters []{VoterId int32}."""
    def voter():
        v = {"voterId": r.int32()}
        r.tagged_fields()
        return v

    out: Dict[str, Any] = {"version": r.int16(), "leaderId": r.int32()}
    out["voters"] = r.compact_array(voter)
    out["grantingVoters"] = r.compact_array(voter)
    r.tagged_fields()
    return out


# control type id → (label DumpLogSegments prints, message reader)
_KRAFT_RECORDS = {
    cr.LEADER_CHANGE: ("LeaderChange:", _leader_change),
    cr.SNAPSHOT_HEADER: ("SnapshotHeader", _snapshot_header),
    cr.SNAPSHOT_FOOTER: ("SnapshotFooter", _snapshot_footer),
    cr.KRAFT_VERSION: ("KRaftVersion", _kraft_version),
    cr.KRAFT_VOTERS: ("KRaftVoters", _voters),
}


def control_record_info(key: Optional[bytes], value: Optional[bytes]) -> Tuple[str, dict]:
    """The text DumpLogSegments appends for a control record, and the same as JSON fields."""
    if key is None or len(key) < cr.CONTROL_KEY.size:
        raise InvalidRecordError(f"control record key has {0 if key is None else len(key)} bytes, needs at least 4")
    version, type_id = cr.CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"control record key has negative version {version}")
    name = cr.CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")
    fields = {"controlType": name, "controlTypeId": type_id}
    if type_id in (cr.ABORT, cr.COMMIT):
        marker = cr.parse_end_txn_marker(key, value)
        fields["coordinatorEpoch"] = marker.coordinator_epoch
        return f" endTxnMarker: {name} coordinatorEpoch: {marker.coordinator_epoch}", fields
    if type_id in _KRAFT_RECORDS:
        label, reader = _KRAFT_RECORDS[type_id]
        if value is None:
            raise InvalidRecordError(f"{label} control record has a null value")
        message = reader(ControlRecordReader(value, label))
        fields["controlRecord"] = message
        return f" {label} {json.dumps(message, separators=(',', ':'), ensure_ascii=False)}", fields
    return f" controlType: {name}({type_id})", fields
