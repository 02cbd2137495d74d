"""Legacy message sets, magic 0 and 1 (LegacyRecord, AbstractLegacyRecordBatch): layout, CRC-32,
compressed wrappers and their inner offsets, and a writer for both.

Log entry = offset int64 + size int32 + message (big-endian):

    0  crc          uint32   CRC-32 (IEEE) of message bytes [4, size)
    4  magic        int8     0 or 1
    5  attributes   int8     codec(0-2), timestampType(3, v1 only)
    6  timestamp    int64    v1 only
 6/14  keyLength    int32    -1 = null, then the key
       valueLength  int32    -1 = null, then the value

A compressed wrapper's value is the compressed bytes of an inner message set; the wrapper's offset is
the absolute offset of the LAST inner message. v0 inner offsets are absolute, v1 relative (except
when the wrapper offset is 0, as old librdkafka wrote).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from kafkalog.errors import CrcMismatchError, InvalidRecordError
from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES, NONE, compress, decompress
from kafkalog.format.record_batch import LOG_OVERHEAD
from kafkalog.format.varint import wrap_int64

OFFSET_OFFSET = 0
SIZE_OFFSET = 8
# positions inside the message (after the 12-byte log overhead)
CRC_OFFSET = 0
MAGIC_OFFSET = 4
ATTRIBUTES_OFFSET = 5
TIMESTAMP_OFFSET = 6
KEY_SIZE_OFFSET_V0 = 6
KEY_SIZE_OFFSET_V1 = 14
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

_ENTRY = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_CRC = struct.Struct(">I")


@dataclass(frozen=True)
class LegacyMessage:
    """One legacy message (a shallow entry or an inner message of a wrapper)."""

    offset: int            # as stored: absolute, or relative inside a v1 wrapper
    magic: int
    attributes: int
    timestamp: int         # -1 for v0
    key: Optional[bytes]
    value: Optional[bytes]
    crc: int
    crc_valid: bool
    size: int              # message size (without the 12-byte log overhead)

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return -1
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0


def overhead(magic: int) -> int:
    return RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1


def parse_message(buf, pos: int, size: int, offset: int) -> LegacyMessage:
    """Parse the message of ``size`` bytes at ``pos`` (just after the log overhead)."""
    end = pos + size
    magic = buf[pos + MAGIC_OFFSET]
    if magic > 1:
        raise InvalidRecordError(f"legacy message has magic {magic}", position=pos)
    if size < overhead(magic):
        raise InvalidRecordError(f"legacy v{magic} message of {size} bytes is below the {overhead(magic)}-byte minimum",
                                 position=pos)
    (crc,) = _CRC.unpack_from(buf, pos + CRC_OFFSET)
    crc_valid = (zlib.crc32(memoryview(buf)[pos + MAGIC_OFFSET:end]) & 0xFFFFFFFF) == crc
    attributes = buf[pos + ATTRIBUTES_OFFSET]
    if magic == 1:
        (timestamp,) = _I64.unpack_from(buf, pos + TIMESTAMP_OFFSET)
        p = pos + KEY_SIZE_OFFSET_V1
    else:
        timestamp = -1
        p = pos + KEY_SIZE_OFFSET_V0
    key, p = _read_bytes(buf, p, end)
    value, p = _read_bytes(buf, p, end)   # bytes after the value are ignored, as LegacyRecord does
    return LegacyMessage(offset, magic, attributes, timestamp, key, value, crc, crc_valid, size)


def _read_bytes(buf, p: int, end: int) -> Tuple[Optional[bytes], int]:
    if p + 4 > end:
        raise InvalidRecordError("legacy message length field runs past the message", position=p)
    (n,) = _I32.unpack_from(buf, p)
    p += 4
    if n < 0:                       # LegacyRecord.sizeDelimited: any negative size is null
        return None, p
    if p + n > end:
        raise InvalidRecordError(f"legacy message field of {n} bytes does not fit the message", position=p - 4)
    return bytes(buf[p:p + n]), p + n


def inner_messages(wrapper: LegacyMessage, wrapper_offset: int, *, verify_crc: bool = True,
                   max_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> List[Tuple[int, LegacyMessage]]:
    """Deep iteration of a compressed wrapper: [(absolute offset, inner message)] (DeepRecordsIterator)."""
    data = decompress(wrapper.codec, wrapper.value or b"", magic=wrapper.magic, max_bytes=max_bytes)
    inner: List[LegacyMessage] = []
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            raise InvalidRecordError("truncated entry inside a compressed wrapper", position=pos)
        offset, size = _ENTRY.unpack_from(data, pos)
        if size < RECORD_OVERHEAD_V0 or pos + LOG_OVERHEAD + size > end:
            raise InvalidRecordError(f"inner message size {size} does not fit the wrapper", position=pos)
        msg = parse_message(data, pos + LOG_OVERHEAD, size, offset)
        # Inner magic may differ from the wrapper's (KAFKA-4298 wrote v0 messages into v1 wrappers):
        # Kafka's iterator does not insist on a match, and offsets follow the wrapper's magic.
        if msg.codec != NONE:
            raise InvalidRecordError("inner message of a compressed wrapper is itself compressed", position=pos)
        if verify_crc and not msg.crc_valid:
            raise CrcMismatchError(f"inner message at offset {offset}: stored CRC {msg.crc} does not match",
                                   position=pos)
        inner.append(msg)
        pos += LOG_OVERHEAD + size
    if not inner:
        raise InvalidRecordError("compressed wrapper holds no messages")
    if wrapper.magic == 0:
        return [(m.offset, m) for m in inner]
    last_inner = inner[-1].offset
    if wrapper_offset == 0:                      # old librdkafka: inner offsets used as they are
        return [(m.offset, m) for m in inner]
    if wrapper_offset < last_inner:
        raise InvalidRecordError(f"wrapper offset {wrapper_offset} is below its last inner offset {last_inner}")
    base = wrap_int64(wrapper_offset - last_inner)
    return [(wrap_int64(base + m.offset), m) for m in inner]


# --- writing ---------------------------------------------------------------------------------

def encode_message(*, magic: int, offset: int, timestamp: int, key: Optional[bytes], value: Optional[bytes],
                   attributes: int = 0) -> bytes:
    """One log entry (offset, size, message) with its CRC-32."""
    body = bytearray()
    body.append(magic)
    body.append(attributes & 0xFF)
    if magic == 1:
        body += _I64.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(field))
            body += field
    crc = zlib.crc32(body) & 0xFFFFFFFF
    message = _CRC.pack(crc) + bytes(body)
    return _ENTRY.pack(offset, len(message)) + message


def encode_message_set(records: Sequence[Tuple[int, int, Optional[bytes], Optional[bytes]]], *, magic: int,
                       codec: int = NONE, log_append_time: Optional[int] = None) -> bytes:
    """Encode (offset, timestamp, key, value) records as legacy entries; compressed: ONE wrapper.

    The wrapper carries the last inner offset, v1 inner offsets relative to the first, and (v1) the
    max inner timestamp, or ``log_append_time`` with the LogAppendTime attribute.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    ts_attr = TIMESTAMP_TYPE_MASK if (magic == 1 and log_append_time is not None) else 0
    if codec == NONE:
        return b"".join(encode_message(magic=magic, offset=o, timestamp=t if log_append_time is None else log_append_time,
                                       key=k, value=v, attributes=ts_attr) for o, t, k, v in records)
    if not records:
        raise ValueError("a compressed wrapper needs at least one record")
    first = records[0][0]
    inner = b"".join(encode_message(magic=magic, offset=(o - first) if magic == 1 else o, timestamp=t, key=k,
                                    value=v) for o, t, k, v in records)
    wrapper_ts = max(t for _, t, _, _ in records) if log_append_time is None else log_append_time
    return encode_message(magic=magic, offset=records[-1][0], timestamp=wrapper_ts, key=None,
                          value=compress(codec, inner, magic=magic), attributes=codec | ts_attr)
