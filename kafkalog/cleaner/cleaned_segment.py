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
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import numpy as np
from numba import njit

from kafkalog.cleaner.record_filter import FilterCounts
from kafkalog.format import record_batch as rb
from kafkalog.format.record_batch import crc32c_update
from kafkalog.format.records_accel import be32, be64
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


# _window_headers' status
_HEADERS_OK, _NOTHING_WRITTEN, _NOT_BACK_TO_BACK, _LENGTH_MISMATCH = range(4)
_CACHE = os.path.isfile(__file__)      # numba caches beside the source file (none in a zip: compile then)


@njit(cache=_CACHE, nogil=True)
def _window_headers(data, start, end, position, out):
    """The v2 headers of the batches of a window that wrote something (end > start): into ``out``'s
    rows, per such batch, its position in the segment (``position`` + where it starts past the first
    one), its size, last offset (baseOffset + lastOffsetDelta) and maxTimestamp. Returns (status,
    batches, first byte, end byte): _NOTHING_WRITTEN, _NOT_BACK_TO_BACK (the bytes are not one run
    within ``data``: nothing to write), _LENGTH_MISMATCH (a batch's length field is not its size, or
    it is shorter than a v2 header: write, then fail) or _HEADERS_OK."""
    lo = -1
    hi = -1
    m = 0
    for i in range(start.shape[0]):
        s = start[i]
        e = end[i]
        if e <= s:
            continue
        if m == 0:
            lo = s
        elif s != hi:
            return _NOT_BACK_TO_BACK, m, lo, hi
        hi = e
        m += 1
    if m == 0:
        return _NOTHING_WRITTEN, 0, 0, 0
    if lo < 0 or hi > data.shape[0]:
        return _NOT_BACK_TO_BACK, m, lo, hi
    j = 0
    for i in range(start.shape[0]):
        s = start[i]
        e = end[i]
        if e <= s:
            continue
        if e - s < rb.RECORD_BATCH_OVERHEAD or be32(data, s + rb.LENGTH_OFFSET) + rb.LOG_OVERHEAD != e - s:
            return _LENGTH_MISMATCH, m, lo, hi
        out[0, j] = position + s - lo
        out[1, j] = e - s
        out[2, j] = be64(data, s + rb.BASE_OFFSET_OFFSET) + be32(data, s + rb.LAST_OFFSET_DELTA_OFFSET)
        out[3, j] = be64(data, s + rb.MAX_TIMESTAMP_OFFSET)
        j += 1
    return _HEADERS_OK, m, lo, hi


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
    # write_batches' headers (position, size, last offset, max timestamp per batch), reused window to window
    _headers: np.ndarray = field(default_factory=lambda: np.empty((4, 0), np.int64), init=False, repr=False)

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
        one call: the headers are read from ``data`` by one kernel (``_window_headers``), not one
        batch at a time.

        :param data: uint8, the batches' output one after the other.
        :param start: where each batch's output starts in ``data``.
        :param end: ... and ends.
        """
        n = len(start)
        if self._headers.shape[1] < n:
            self._headers = np.empty((4, max(n, 2 * self._headers.shape[1])), np.int64)
        out = self._headers
        status, m, lo, hi = _window_headers(data, start, end, self.sink.size, out)
        if status == _NOTHING_WRITTEN:
            return
        if status == _NOT_BACK_TO_BACK:
            raise ValueError("write_batches: the batches' bytes are not back to back in data")
        self.sink.write(data[lo:hi])
        if status == _LENGTH_MISMATCH:
            raise ValueError("write_batches: a batch's length field does not match its bytes")
        self.appender.append_batches(out[0, :m], out[1, :m], out[2, :m], out[3, :m])

    def end_chunk(self, chunk: Chunk) -> None:
        """Nothing left to do: ``write`` indexed each batch as it came."""


__all__ = ["CleanedSink", "Chunk", "GroupOutput", "WRITEBACK_BYTES"]
