"""Control records (ControlRecordType, EndTransactionMarker): the key and value of the single record
inside a control batch.

Key   = int16 version (0) + int16 type.  Value of ABORT/COMMIT = int16 version (0) + int32 coordinatorEpoch.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

from kafkalog.errors import InvalidRecordError

CONTROL_KEY = struct.Struct(">hh")
END_TXN_MARKER_VALUE = struct.Struct(">hi")

ABORT, COMMIT, LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = range(7)
UNKNOWN = -1
CONTROL_TYPE_NAMES = {
    ABORT: "ABORT", COMMIT: "COMMIT", LEADER_CHANGE: "LEADER_CHANGE",
    SNAPSHOT_HEADER: "SNAPSHOT_HEADER", SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
    KRAFT_VERSION: "KRAFT_VERSION", KRAFT_VOTERS: "KRAFT_VOTERS",
}


@dataclass(frozen=True)
class EndTxnMarker:
    control_type: int          # ABORT or COMMIT
    coordinator_epoch: int
    version: int = 0


def parse_control_type(key: Optional[bytes]) -> int:
    """ControlRecordType.parse: the type id, UNKNOWN for an id Kafka does not define."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise InvalidRecordError(f"control record key has {0 if key is None else len(key)} bytes, needs 4")
    version, ctype = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"control record key has negative version {version}")
    return ctype if ctype in CONTROL_TYPE_NAMES else UNKNOWN


def control_type_name(ctype: int, raw: Optional[int] = None) -> str:
    if ctype in CONTROL_TYPE_NAMES:
        return CONTROL_TYPE_NAMES[ctype]
    return f"UNKNOWN({raw if raw is not None else ctype})"


def parse_end_txn_marker(key: bytes, value: Optional[bytes]) -> EndTxnMarker:
    ctype = parse_control_type(key)
    if ctype not in (ABORT, COMMIT):
        raise InvalidRecordError(f"control type {ctype} is not a transaction marker")
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        raise InvalidRecordError("end transaction marker value is shorter than 6 bytes")
    version, epoch = END_TXN_MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"end transaction marker has negative version {version}")
    return EndTxnMarker(ctype, epoch, version)


def control_key(ctype: int, version: int = 0) -> bytes:
    return CONTROL_KEY.pack(version, ctype)


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    return END_TXN_MARKER_VALUE.pack(version, coordinator_epoch)
