"""Record files as DumpLogSegments walks them: batch framing, batch headers and the records inside.

Why not ``kafkalog.format.file_records``' walk: the dump must list what kafka-dump-log.sh lists on
corrupt input, and Kafka's file walker (``FileLogInputStream.nextBatch``) is more lenient than our
reader's. It treats every magic >= 2 as v2 (``scan_buffer`` stops at magic 3 with
UnknownMagicError), lists a batch with a negative records count (``scan_buffer`` stops), ends quietly
when 17 or fewer bytes are left, and prints every CRC-invalid batch as ``isvalid: false`` and goes on.
It also yields batches one by one, so the first lines of a huge file come out at once.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

from kafkalog.errors import (BatchSizeError, InvalidRecordError, KafkalogError, TruncatedBatchError,
                             UnknownMagicError)
from kafkalog.format import legacy_record as legacy
from kafkalog.format import record_batch as rb
from kafkalog.format.record_batch import LOG_OVERHEAD
from kafkalog.format.compression import CODEC_NAMES, DEFAULT_MAX_BATCH_BYTES
from kafkalog.format.records_reference import decode_legacy_entry, iter_v2_batch, legacy_rows

HEADER_SIZE_UP_TO_MAGIC = 17                     # FileLogInputStream: 17 bytes or fewer left ends the walk
MIN_RECORD_SIZE = legacy.RECORD_OVERHEAD_V0      # 14: "smaller than minimum record overhead"
RECORD_CHUNK = 1 << 20       # records of one v2 batch parsed at a time by a deep iteration

_ENTRY = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_TS_NAMES = rb.TIMESTAMP_TYPE_NAMES


@dataclass
class BatchView:
    """The batch-level fields DumpLogSegments prints, for v2 and legacy batches alike."""
    position: int
    size: int
    magic: int
    base_offset: Optional[int]      # None: a compressed legacy wrapper (needs decompression)
    last_offset: int
    count: Optional[int]            # None for legacy (Kafka's countOrNull)
    base_sequence: int
    last_sequence: int
    producer_id: int
    producer_epoch: int
    partition_leader_epoch: int
    attributes: int
    codec: int
    timestamp_type: int
    base_timestamp: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool
    delete_horizon_ms: Optional[int]
    crc: int
    crc_valid: bool

    @property
    def codec_name(self) -> str:
        if self.codec in CODEC_NAMES:
            return CODEC_NAMES[self.codec]
        return f"unknown({self.codec})"

    @property
    def timestamp_type_name(self) -> str:
        return _TS_NAMES[self.timestamp_type]

    def computed_crc(self, mv) -> int:
        end = self.position + self.size
        if self.magic >= 2:
            return rb.crc32c(mv[self.position + rb.ATTRIBUTES_OFFSET:end])
        return zlib.crc32(mv[self.position + LOG_OVERHEAD + legacy.MAGIC_OFFSET:end]) & 0xFFFFFFFF


@dataclass
class RecordView:
    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: List[Tuple[str, Optional[bytes]]]
    sequence: Optional[int]         # v2 only
    crc: Optional[int] = None       # legacy only: the (inner) message's stored CRC and its check
    crc_valid: Optional[bool] = None


def walk_batches(mv, start: int, end: int, path) -> Iterator[Tuple[int, int, int]]:
    """Yield (position, size incl. the 12-byte overhead, signed magic) per batch, as Kafka's file
    walker does: 17 or fewer bytes left, or a batch running past ``end``, end the walk quietly; a
    size field below 14 raises BatchSizeError (Kafka's CorruptRecordException)."""
    pos = start
    while pos < end - HEADER_SIZE_UP_TO_MAGIC:
        size = _ENTRY.unpack_from(mv, pos)[1]
        if size < MIN_RECORD_SIZE:
            raise BatchSizeError(
                f"record size {size} is smaller than the minimum record overhead ({MIN_RECORD_SIZE})", path=path,
                position=pos,
                hint="kafka-dump-log.sh stops here with CorruptRecordException; Kafka's recovery truncates the "
                     "segment at this position")
        if pos > end - LOG_OVERHEAD - size:
            return
        magic = mv[pos + rb.MAGIC_OFFSET]
        yield pos, size + LOG_OVERHEAD, magic - 256 if magic > 127 else magic
        pos += size + LOG_OVERHEAD


def tail_error(mv, pos: int, end: int, path) -> TruncatedBatchError:
    left = end - pos
    hint = "an incomplete batch, as after a crash or a partial copy; Kafka's recovery drops it"
    if left <= HEADER_SIZE_UP_TO_MAGIC:
        return TruncatedBatchError(f"{left} trailing bytes are too few for a batch header", path=path, position=pos,
                                   hint=hint)
    size = _ENTRY.unpack_from(mv, pos)[1]
    return TruncatedBatchError(f"batch of {size + LOG_OVERHEAD} bytes runs past the end of the file, which has "
                               f"{left} bytes left", path=path, position=pos, hint=hint)


def read_batch(mv, pos: int, size: int, magic: int, path) -> BatchView:
    """Decode the header of the batch at ``pos`` (size includes the log overhead)."""
    if magic >= rb.MAGIC_VALUE_V2:      # the file walker treats every magic >= 2 as v2
        if size < rb.RECORD_BATCH_OVERHEAD:
            raise BatchSizeError(f"v2 batch of {size} bytes is smaller than its {rb.RECORD_BATCH_OVERHEAD}-byte header",
                                 path=path, position=pos,
                                 hint="Kafka's recovery truncates the segment at this position")
        h = rb.parse_header(mv, pos)
        crc_valid = rb.crc32c(mv[pos + rb.ATTRIBUTES_OFFSET:pos + size]) == h.crc
        return BatchView(pos, size, magic, h.base_offset, h.last_offset, h.records_count, h.base_sequence,
                         h.last_sequence, h.producer_id, h.producer_epoch, h.partition_leader_epoch, h.attributes,
                         h.codec, h.timestamp_type, h.base_timestamp, h.max_timestamp, h.is_transactional,
                         h.is_control, h.delete_horizon_ms, h.crc, crc_valid)
    if magic < 0:
        raise UnknownMagicError(f"unknown magic {magic} (expected 0, 1 or 2)", path=path, position=pos,
                                hint="Kafka's recovery truncates the segment at this position")
    message_size = size - LOG_OVERHEAD
    if message_size < legacy.overhead(magic):
        raise BatchSizeError(f"legacy v{magic} message of {message_size} bytes is smaller than its "
                             f"{legacy.overhead(magic)}-byte header", path=path, position=pos,
                             hint="Kafka's recovery truncates the segment at this position")
    offset = _I64.unpack_from(mv, pos)[0]
    m = pos + LOG_OVERHEAD
    crc = _U32.unpack_from(mv, m)[0]
    attributes = mv[m + legacy.ATTRIBUTES_OFFSET]
    if magic == 1:
        timestamp = _I64.unpack_from(mv, m + legacy.TIMESTAMP_OFFSET)[0]
        ts_type = rb.LOG_APPEND_TIME if attributes & legacy.TIMESTAMP_TYPE_MASK else rb.CREATE_TIME
    else:
        timestamp = rb.NO_TIMESTAMP
        ts_type = rb.NO_TIMESTAMP_TYPE
    crc_valid = (zlib.crc32(mv[m + legacy.MAGIC_OFFSET:pos + size]) & 0xFFFFFFFF) == crc
    codec = attributes & legacy.CODEC_MASK
    return BatchView(pos, size, magic, offset if codec == 0 else None, offset, None, rb.NO_SEQUENCE, rb.NO_SEQUENCE,
                     rb.NO_PRODUCER_ID, rb.NO_PRODUCER_EPOCH, rb.NO_PARTITION_LEADER_EPOCH, attributes, codec, ts_type,
                     timestamp, timestamp, False, False, None, crc, crc_valid)


def record_sequence(base_sequence: int, offset_delta: int) -> int:
    """DefaultRecord.sequence: baseSequence >= 0 ? incrementSequence(base, offsetDelta) : -1."""
    if base_sequence < 0:
        return rb.NO_SEQUENCE
    return rb.increment_sequence(base_sequence, offset_delta)


def decode_records(mv, b: BatchView, path, *, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Iterator[RecordView]:
    """Deep iteration of one batch (no CRC verification, as in Kafka), streamed: a v2 batch's records
    are parsed RECORD_CHUNK at a time, so a batch of millions of records is never held whole (its
    decompressed payload is, within max_batch_bytes). A batch of up to RECORD_CHUNK records is parsed
    whole before its first record is yielded; in a larger one, as in Kafka's dump, an error stops the
    listing at the bad record."""
    if b.magic >= rb.MAGIC_VALUE_V2:
        if b.count is not None and b.count < 0:
            raise InvalidRecordError(f"batch declares a negative record count {b.count}", path=path,
                                     position=b.position)
        header, chunks = iter_v2_batch(mv, b.position, path=path, max_batch_bytes=max_batch_bytes,
                                       chunk_rows=RECORD_CHUNK)
        return (RecordView(r.offset, r.timestamp, r.key, r.value, r.headers,
                           record_sequence(header.base_sequence, r.offset - header.base_offset))
                for chunk in chunks for r in chunk)
    wrapper, inner = decode_legacy_entry(mv, b.position, path=path, verify_crc=False, max_batch_bytes=max_batch_bytes)
    rows = legacy_rows(wrapper, inner)
    return iter([RecordView(r.offset, r.timestamp, r.key, r.value, [], None, m.crc, m.crc_valid)
                 for r, (_, m) in zip(rows, inner)])


def legacy_first_offset(mv, b: BatchView, path, max_batch_bytes: int) -> Optional[int]:
    """A legacy batch's baseOffset: the first inner offset (decompresses a wrapper); None if it cannot."""
    if b.base_offset is not None:
        return b.base_offset
    try:
        _, inner = decode_legacy_entry(mv, b.position, path=path, verify_crc=False, max_batch_bytes=max_batch_bytes)
    except KafkalogError:
        return None
    return inner[0][0] if inner else None
