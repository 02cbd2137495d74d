"""Test-only oracles written by no one here: kafka-python's record builders and readers."""
from __future__ import annotations

import struct
from typing import List, Optional, Sequence, Tuple

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

Rec = Tuple[int, Optional[bytes], Optional[bytes], Sequence[Tuple[str, bytes]]]   # timestamp, key, value, headers

# codecs each magic may carry in kafka-python (zstd only for v2; kafka-python writes v0/v1 lz4 too)
CODECS_BY_MAGIC = {0: (0, 1, 2, 3), 1: (0, 1, 2, 3), 2: (0, 1, 2, 3, 4)}


def build_batch(magic: int, codec: int, base_offset: int, records: Sequence[Rec], *, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False) -> bytes:
    """One batch (v2) or message set (v0/v1) by kafka-python, base offset patched in bytes 0-7 as
    the broker's offset assignment does (the v2 CRC does not cover them)."""
    if magic == 2:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                      producer_id=producer_id, producer_epoch=producer_epoch,
                                      base_sequence=base_sequence, batch_size=1 << 30)
        for i, (ts, k, v, h) in enumerate(records):
            assert b.append(i, timestamp=ts, key=k, value=v, headers=list(h)) is not None
        data = bytearray(b.build())
        struct.pack_into(">q", data, 0, base_offset)
        return bytes(data)
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, (ts, k, v, _h) in enumerate(records):
        # v0 inner offsets are absolute (the broker rewrites them); v1 inner offsets are relative
        inner = base_offset + i if magic == 0 else i
        assert b.append(inner, timestamp=ts if magic == 1 else None, key=k, value=v) is not None
    data = bytearray(b.build())
    if codec == 0:   # one entry per message: patch each offset
        pos, i = 0, 0
        while pos < len(data):
            struct.pack_into(">q", data, pos, base_offset + i)
            pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
            i += 1
    else:            # the wrapper carries the last inner offset
        struct.pack_into(">q", data, 0, base_offset + len(records) - 1)
    return bytes(data)


def read_all(data: bytes) -> List[dict]:
    """kafka-python's reading of a record set: one dict per record (CRC checked)."""
    out = []
    mr = MemoryRecords(data)
    while mr.has_next():
        batch = mr.next_batch()
        if batch is None:
            break
        assert batch.validate_crc()
        for r in batch:
            out.append({"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
                        "headers": [(k, v) for k, v in (r.headers or [])]})
    return out
