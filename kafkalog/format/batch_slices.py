"""One huge v2 batch decoded in slices of a bounded number of records, all checked before the first is delivered."""
from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa

from kafkalog.engine import REFERENCE, resolve as resolve_engine
from kafkalog.errors import InvalidRecordError, KafkalogError
from kafkalog.format import record_batch as rb
from kafkalog.format import records_reference as ref
from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES, OutputBuffer, decompress_into
from kafkalog.format.decoder import (MAX_DECODE_BYTES, MIN_RECORD_SIZE, REC_MESSAGES, WORKSPACES, decode_records,
                                     rows_batch)
from kafkalog.format.file_records import HeaderArrays
from kafkalog.format.record_columns import EMPTY, readonly
from kafkalog.topic_partition import TopicPartition

# A v2 batch declaring more records than this is decoded in slices of at most this many rows, so
# the output of one batch is bounded whatever its record count (a 250 MiB zstd payload can hold 37
# million minimal records: ~2 GB of Arrow columns as one RecordBatch).
SLICE_RECORDS = 1 << 20


def needs_slicing(h: HeaderArrays, rows: int = SLICE_RECORDS) -> np.ndarray:
    """Indexes of the batches of ``h`` decoded in slices (v2, more than ``rows`` records)."""
    return np.flatnonzero((h.magic == 2) & (h.recordsCount > rows))


class BatchSlices:
    """One v2 batch (``h1``, a single row) decoded as RecordBatches of at most ``rows`` rows each.

    Construction decompresses the payload once (bounded by max_batch_bytes) and walks the record
    lengths; :meth:`validate` decodes every slice and drops it, so an error anywhere in the batch is
    raised before any row of it is delivered (a batch is all or nothing, as in a window); iterating
    then yields the slices. Memory: the payload plus one slice. :meth:`close` frees the payload."""

    def __init__(self, buf, h1: HeaderArrays, pid: TopicPartition, *, engine: Optional[str] = None, path=None,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, rows: int = SLICE_RECORDS):
        self.h1, self.pid, self.engine, self.path, self.rows = h1, pid, resolve_engine(engine), path, rows
        self.buf = buf
        self.count = int(h1.recordsCount[0])
        self.position = int(h1.position[0])
        codec = int(h1.attributes[0]) & rb.COMPRESSION_CODEC_MASK
        start = self.position + rb.RECORDS_OFFSET
        end = self.position + int(h1.size[0])
        ref.check_codec(codec, 2, path=path, position=self.position)
        self._out = OutputBuffer(1 << 20)
        if codec == 0:
            self.src, self.start, self.end, self.compressed = buf, start, end, False
        else:
            try:
                used = decompress_into(codec, memoryview(buf)[start:end], self._out, 0, magic=2,
                                       max_bytes=min(max_batch_bytes, MAX_DECODE_BYTES))
            except KafkalogError as e:
                raise e.with_location(path=path, position=self.position)
            self.src, self.start, self.end, self.compressed = readonly(self._out.array[:used]), 0, used, True
        if self.count > (self.end - self.start) // MIN_RECORD_SIZE:
            raise InvalidRecordError(f"batch at offset {int(h1.baseOffset[0])} declares {self.count} records but its "
                                     f"{self.end - self.start} bytes of records can hold at most "
                                     f"{(self.end - self.start) // MIN_RECORD_SIZE}", path=path,
                                     position=self.position)
        self.bounds = self._bounds()

    def _bounds(self) -> np.ndarray:
        from kafkalog.format import records_accel as acc

        bounds = np.empty(self.count // self.rows + 2, np.int64)
        status, pos, k = acc.record_bounds_kernel(self.src, self.start, self.end, self.count, self.rows, bounds)
        if status != acc.REC_OK:
            msg = REC_MESSAGES.get(status, f"record walk status {status}")
            if self.compressed:
                raise InvalidRecordError(f"{msg} (byte {int(pos)} of the decompressed records of the batch)",
                                         path=self.path, position=self.position)
            raise InvalidRecordError(f"{msg} (batch at offset {int(self.h1.baseOffset[0])} starting at byte "
                                     f"{self.position})", path=self.path, position=int(pos))
        return bounds[:k]

    def _slice(self, j: int) -> pa.RecordBatch:
        lo, hi = int(self.bounds[j]), int(self.bounds[j + 1])
        m = min(self.rows, self.count - j * self.rows)
        if self.engine == REFERENCE:
            header = rb.parse_header(self.buf, self.position)
            try:
                rows = ref.v2_records(memoryview(self.src)[lo:hi], dataclasses.replace(header, records_count=m))
            except InvalidRecordError as e:
                if e.position is not None:
                    e.message += f" (byte {e.position + lo - self.start} of the records of the batch)"
                e.position = None
                raise e.with_location(path=self.path, position=self.position)
            return rows_batch(rows, self.h1, np.array([m], np.int64), self.h1.baseOffset, self.pid)
        ws = WORKSPACES.acquire()
        try:
            src = np.array([1 if self.compressed else 0], np.int8)
            return decode_records(self.buf, self.src if self.compressed else EMPTY, self.h1, self.pid, ws, src,
                                   np.array([lo], np.int64), np.array([hi], np.int64), np.array([m], np.int64),
                                   path=self.path, origin=np.array([self.start], np.int64))
        finally:
            WORKSPACES.release(ws)

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def validate(self) -> None:
        for j in range(len(self)):
            self._slice(j)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            for j in range(len(self)):
                yield self._slice(j)
        finally:
            self.close()

    def close(self) -> None:
        self._out.release()
        self.src = EMPTY
