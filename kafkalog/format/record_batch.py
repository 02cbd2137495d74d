"""The magic-2 record batch (DefaultRecordBatch): header layout, attributes, CRC, and the v2 record
encoding used to write batches back.

Batch layout (big-endian), total size on disk = batchLength + LOG_OVERHEAD:

    0  baseOffset            int64     offset of the first record slot
    8  batchLength           int32     bytes that follow this field
   12  partitionLeaderEpoch  int32     not covered by the CRC
   16  magic                 int8      2
   17  crc                   uint32    CRC-32C of bytes [21, end)
   21  attributes            int16     codec(0-2) timestampType(3) transactional(4) control(5)
                                       deleteHorizon(6)
   23  lastOffsetDelta       int32
   27  baseTimestamp         int64     or the delete horizon when attribute bit 6 is set
   35  maxTimestamp          int64
   43  producerId            int64
   51  producerEpoch         int16
   53  baseSequence          int32
   57  recordsCount          int32
   61  records               uncompressed, or ONE compressed stream of them

Record (inside the records region): length varint, attributes int8, timestampDelta varlong,
offsetDelta varint, keyLength varint (-1 null), key, valueLength varint (-1 null), value,
headersCount varint, headers {keyLength varint, key utf-8, valueLength varint (-1 null), value}.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import crc32c as _crc32c

from kafkalog.format.varint import write_varint, write_varlong
from kafkalog.java_types import INT32_MAX

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

LOG_OVERHEAD = 12                 # baseOffset + batchLength
RECORD_BATCH_OVERHEAD = 61        # the whole v2 header
HEADER_SIZE_UP_TO_MAGIC = 17      # what a reader needs to dispatch on the magic byte
MAGIC_VALUE_V2 = 2
MIN_RECORD_SIZE = 7               # length, attributes, timestampDelta, offsetDelta, keyLength, valueLength,
                                  # headersCount: one byte each at least

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE = 0, 1, -1
TIMESTAMP_TYPE_NAMES = {NO_TIMESTAMP_TYPE: "NoTimestampType", CREATE_TIME: "CreateTime",
                        LOG_APPEND_TIME: "LogAppendTime"}

HEADER = struct.Struct(">qiibIhiqqqhii")
assert HEADER.size == RECORD_BATCH_OVERHEAD
CRC_FIELD = struct.Struct(">I")


def crc32c(data) -> int:
    return _crc32c.crc32c(data)


def crc32c_update(data, crc: int = 0) -> int:
    """CRC-32C of ``data`` continued from ``crc`` (the CRC of what came before)."""
    return _crc32c.crc32c(data, crc)


@dataclass(frozen=True)
class BatchHeader:
    """The 61 header bytes of a v2 batch, decoded."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> Optional[int]:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte header at ``pos`` (the caller checked that 61 bytes are there)."""
    f = HEADER.unpack_from(buf, pos)
    return BatchHeader(f[0], f[1], f[2], f[3], f[4], f[5] & 0xFF, f[6], f[7], f[8], f[9], f[10], f[11], f[12])


def compute_crc(batch) -> int:
    """CRC-32C over [attributes, end) — what DefaultRecordBatch.computeChecksum covers."""
    return crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence, wrapping at Integer.MAX_VALUE; −1 stays −1."""
    if sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def compute_attributes(*, codec: int = 0, timestamp_type: int = CREATE_TIME, transactional: bool = False,
                       control: bool = False, delete_horizon: bool = False) -> int:
    attrs = codec & COMPRESSION_CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if transactional:
        attrs |= TRANSACTIONAL_FLAG_MASK
    if control:
        attrs |= CONTROL_FLAG_MASK
    if delete_horizon:
        attrs |= DELETE_HORIZON_FLAG_MASK
    return attrs


# --- writing ---------------------------------------------------------------------------------

Header = tuple  # (key: str | bytes, value: bytes | None)


def encode_record(out: bytearray, *, offset_delta: int, timestamp_delta: int, key: Optional[bytes],
                  value: Optional[bytes], headers: Iterable[Header] = (), attributes: int = 0) -> None:
    """Append one v2 record (DefaultRecord.writeTo) to ``out``."""
    body = bytearray()
    body.append(attributes & 0xFF)
    write_varlong(timestamp_delta, body)
    write_varint(offset_delta, body)
    if key is None:
        write_varint(-1, body)
    else:
        write_varint(len(key), body)
        body += key
    if value is None:
        write_varint(-1, body)
    else:
        write_varint(len(value), body)
        body += value
    headers = list(headers)
    write_varint(len(headers), body)
    for hkey, hvalue in headers:
        hk = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        write_varint(len(hk), body)
        body += hk
        if hvalue is None:
            write_varint(-1, body)
        else:
            write_varint(len(hvalue), body)
            body += hvalue
    write_varint(len(body), out)
    out += body


@dataclass(frozen=True)
class V2Record:
    """One record to encode: absolute offset and timestamp; the batch computes the deltas."""

    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Sequence[Header] = ()


def encode_batch(records: Sequence[V2Record], *, base_offset: Optional[int] = None,
                 last_offset_delta: Optional[int] = None, base_timestamp: Optional[int] = None,
                 max_timestamp: Optional[int] = None, codec: int = 0, timestamp_type: int = CREATE_TIME,
                 transactional: bool = False, control: bool = False, delete_horizon_ms: Optional[int] = None,
                 producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 base_sequence: int = NO_SEQUENCE, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                 compression_level: Optional[int] = None) -> bytes:
    """Encode a v2 batch as DefaultRecordBatch/MemoryRecordsBuilder lay it out.

    Header fields not given are derived from the records the way Kafka's builder derives them:
    base offset = first record's offset, last offset delta = last record's, base timestamp = first
    record's timestamp (the delete horizon when one is given), max timestamp = max record timestamp
    (−1 for an empty batch). Passing them keeps an existing batch's header (compaction write-back).
    """
    from kafkalog.format.compression import compress  # local: compression imports nothing from here

    if base_offset is None:
        if not records:
            raise ValueError("an empty batch needs an explicit base_offset")
        base_offset = records[0].offset
    if last_offset_delta is None:
        last_offset_delta = (records[-1].offset - base_offset) if records else 0
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=NO_TIMESTAMP)
    body = bytearray()
    for r in records:
        encode_record(body, offset_delta=r.offset - base_offset, timestamp_delta=r.timestamp - base_timestamp,
                      key=r.key, value=r.value, headers=r.headers)
    payload = bytes(body) if codec == 0 else compress(codec, bytes(body), magic=MAGIC_VALUE_V2,
                                                      level=compression_level)
    attributes = compute_attributes(codec=codec, timestamp_type=timestamp_type, transactional=transactional,
                                    control=control, delete_horizon=delete_horizon_ms is not None)
    size = RECORD_BATCH_OVERHEAD + len(payload)
    out = bytearray(size)
    HEADER.pack_into(out, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch, MAGIC_VALUE_V2, 0,
                     attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                     base_sequence, len(records))
    out[RECORDS_OFFSET:] = payload
    CRC_FIELD.pack_into(out, CRC_OFFSET, compute_crc(out))
    return bytes(out)
