"""The cleaned segment a group of source segments is recopied into (Kafka's
``UnifiedLog.createNewCleanedSegment``: ``<base>.log.cleaned`` and its indexes), before the swap
(``swap``) puts it in their place: ``CleanedSink`` streams the .log bytes to disk as they are
produced, ``GroupOutput`` indexes them batch by batch as ``LogSegment.append`` does and carries what
the swap needs (sources, transaction index entries, counts). Below both ``cleaner`` (which fills it)
and ``swap`` (which installs it).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import numpy as np

from kafkalog.cleaner.record_filter import FilterCounts
from kafkalog.format import record_batch as rb
from kafkalog.format.record_batch import crc32c_update
from kafkalog.index.builder import IndexAppender
from kafkalog.fs import durable
from kafkalog.log.segment import LogSegment

_BATCH_PREFIX = struct.Struct(">qi")     # baseOffset, batchLength
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
WRITEBACK_BYTES = 8 << 20      # the sink starts the disk write of every this many bytes written


class CleanedSink:
    """A group's cleaned .log bytes, streamed to ``<base>.log.cleaned`` as they are produced (so a
    round never holds a group's output in memory), or only counted (dry run: ``path`` None). A
    digest of what was written lets the swap verify the file read back. Every WRITEBACK_BYTES the
    disk write of what was written is started (``durable.start_writeback``), so the fsync at the end
    waits for the last few MiB only (before: the whole group's bytes)."""

    def __init__(self, path: Optional[Path]):
        self.path = path
        self.size = 0
        self._crc = 0 if path is not None else None
        self._file = None
        self._written_back = 0
        if path is not None:
            self._file = durable.open_for_write(path, buffering=1 << 20)

    def write(self, data) -> None:
        """Append ``data`` (any contiguous bytes-like object: bytes, a memoryview, a uint8 array)."""
        if self._file is not None:
            self._file.write(data)
            self._crc = crc32c_update(data, self._crc)
        self.size += len(data)
        if self._file is not None and self.size - self._written_back >= WRITEBACK_BYTES:
            durable.start_writeback(self._file.fileno(), self._written_back, self.size - self._written_back)
            self._written_back = self.size

    def digest(self) -> Optional[int]:
        return self._crc

    def close(self) -> None:
        """Flush and fsync (idempotent)."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def discard(self) -> None:
        if self._file is not None:
            try:
                self._file.close()      # flushing what is buffered may fail again (a full disk)
            except OSError:
                pass
            self._file = None
        if self.path is not None and durable.fences_hold():
            durable.remove(self.path, missing_ok=True)


def _field(data: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    """The big-endian integer field of type ``dtype`` at each position ``at`` of ``data``, as int64."""
    width = np.dtype(dtype).itemsize
    return data[at[:, None] + np.arange(width)].view(dtype).ravel().astype(np.int64)


@dataclass
class Chunk:
    """One read chunk of a source segment: the cleaner appends what the chunk kept in one
    ``LogSegment.append``, whose index bookkeeping is per batch since Kafka 3.7 (see ``GroupOutput``)."""
    start: int


@dataclass
class GroupOutput:
    base_offset: int
    sources: List[LogSegment]
    sink: CleanedSink
    appender: IndexAppender
    txn_entries: list
    counts: FilterCounts

    def begin_chunk(self) -> Chunk:
        return Chunk(self.sink.size)

    def write(self, chunk: Chunk, output, max_offset: int, max_timestamp: int, offset_of_max_timestamp: int) -> None:
        """The bytes one or more filtered batches wrote (nothing when they kept no records), indexed
        batch by batch as Kafka 4.4's ``LogSegment.append`` does for the chunk that holds them: per
        batch, the running max timestamp takes (its maxTimestamp, its lastOffset) when larger; then,
        if more than index.interval.bytes were appended since the last entry, an offset entry
        (its lastOffset, its position) and a time entry (the running max) — checked by the real
        broker on the same bytes (tests/broker/test_compaction_parity.py). ``max_offset``,
        ``max_timestamp`` and ``offset_of_max_timestamp`` describe the whole write (kept for the
        callers; the headers in ``output`` are what is indexed)."""
        if not output:
            return
        position = self.sink.size
        self.sink.write(output)
        view = memoryview(output)
        at, n = 0, len(view)
        while at < n:
            base_offset, length = _BATCH_PREFIX.unpack_from(view, at)
            size = length + rb.LOG_OVERHEAD
            last_offset = base_offset + _I32.unpack_from(view, at + rb.LAST_OFFSET_DELTA_OFFSET)[0]
            batch_max_ts = _I64.unpack_from(view, at + rb.MAX_TIMESTAMP_OFFSET)[0]
            self.appender.append(position=position + at, size=size, largest_offset=last_offset,
                                 largest_timestamp=batch_max_ts, offset_of_max_timestamp=last_offset)
            at += size

    def write_batches(self, data: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """The bytes of consecutive filtered batches written back to back in ``data`` (batch i's at
        [start[i], end[i]), empty when it kept nothing), indexed batch by batch as ``write`` does, in
        one call: the headers are read from ``data`` as arrays, not one batch at a time.

        :param data: uint8, the batches' output one after the other.
        :param start: where each batch's output starts in ``data``.
        :param end: ... and ends.
        """
        wrote = np.flatnonzero(end > start)
        if not wrote.size:
            return
        s, e = start[wrote].astype(np.int64), end[wrote].astype(np.int64)
        lo, hi = int(s[0]), int(e[-1])
        if lo < 0 or hi > len(data) or (s[1:] != e[:-1]).any():
            raise ValueError("write_batches: the batches' bytes are not back to back in data")
        position = self.sink.size
        self.sink.write(data[lo:hi])
        base_offset = _field(data, s + rb.BASE_OFFSET_OFFSET, ">i8")
        length = _field(data, s + rb.LENGTH_OFFSET, ">i4")
        if (length + rb.LOG_OVERHEAD != e - s).any():
            raise ValueError("write_batches: a batch's length field does not match its bytes")
        last_offset = base_offset + _field(data, s + rb.LAST_OFFSET_DELTA_OFFSET, ">i4")
        max_ts = _field(data, s + rb.MAX_TIMESTAMP_OFFSET, ">i8")
        self.appender.append_batches(position + s - lo, e - s, last_offset, max_ts)

    def end_chunk(self, chunk: Chunk) -> None:
        """Nothing left to do: ``write`` indexed each batch as it came."""


__all__ = ["CleanedSink", "Chunk", "GroupOutput", "WRITEBACK_BYTES"]
