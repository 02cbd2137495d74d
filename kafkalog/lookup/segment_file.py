"""How lookups read a segment's files: the ``.log`` of a :class:`~kafkalog.log.segment.LogSegment`
at positions (os.pread locally, ranged GETs on an object store) in windows that start small and double,
so a lookup reads only the few index intervals it walks, and the last ``.timeindex`` entry from two
slots (:class:`~kafkalog.lookup.partition_log.PartitionLog` decides what to read)."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Tuple

import numpy as np

from kafkalog.errors import KafkalogError
from kafkalog.format.file_records import (ERR_TRUNCATED, OK_END, OK_WINDOW, HeaderArrays, scan_window,
                                          scan_buffer, walk_error)
from kafkalog.index.time_index import TIME_ENTRY_SIZE
from kafkalog.log.segment import LogSegment
from kafkalog.format.record_batch import LENGTH_OFFSET, LOG_OVERHEAD
from kafkalog.fs import filesystem

# --- constants ------------------------------------------------------------------------------

FIRST_WINDOW_BYTES = 16 << 10      # bytes of .log walked first from an index position (4 intervals)
MAX_WINDOW_BYTES = 8 << 20         # the walk doubles its window up to this
WINDOW_BYTES_PER_SLOT = 64         # header slots allocated per window byte (more batches: another round)
MAX_PREAD_SCAN_BYTES = 64 << 20    # a longer header scan (a rebuild) goes through a memory map
TIME_SLOT = struct.Struct(">qi")  # one .timeindex entry


# --- data structures ------------------------------------------------------------------------

@dataclass
class Window:
    """Bytes of a .log read with one pread, and the batches that lie wholly inside them."""

    buf: np.ndarray        # the bytes (uint8)
    base: int              # where they start in the file
    h: HeaderArrays        # the batches; positions relative to ``buf``


# --- reading the files ---------------------------------------------------------------------

def read_last_time_slot(path: Path, base_offset: int) -> Optional[Tuple[int, int]]:
    """The last entry of a trimmed .timeindex from its first and last 12 bytes (Kafka's lastEntry
    reads the last slot), or None when the file needs a full parse: zero padding, a size that is
    not a multiple of 12, or what Kafka's sanity check calls corrupt (last timestamp below the
    first, an offset below the base)."""
    with filesystem.RangeFile(path) as f:
        size = f.size
        if size == 0:
            return (-1, base_offset)
        if size % TIME_ENTRY_SIZE:
            return None
        first = TIME_SLOT.unpack(f.read_at(0, TIME_ENTRY_SIZE))
        ts, rel = TIME_SLOT.unpack(f.read_at(size - TIME_ENTRY_SIZE, TIME_ENTRY_SIZE))
    if rel < 0 or ts < 0 or (rel == 0 and (ts == 0 or size > TIME_ENTRY_SIZE)) or ts < first[0] or first[1] < 0:
        return None                                     # padding or damage: parse (and check) it all
    return ts, base_offset + rel


def at_file_position(error: KafkalogError, base: int) -> KafkalogError:
    """An error raised on a window's bytes, with its position made a file position."""
    if error.position is not None:
        error.position += base
        error.args = (str(error),)
    return error


def pread(seg: LogSegment, position: int, size: int) -> np.ndarray:
    return np.frombuffer(seg.fd.read_at(position, size), dtype=np.uint8)


def walk(seg: LogSegment, start: int, end: int, engine: str, *, tolerate: bool = False) -> Iterator[Window]:
    """The batches of ``seg``'s .log from byte ``start`` (a batch boundary) to ``end``, read with
    positional reads (``filesystem.RangeFile``) in windows that start at FIRST_WINDOW_BYTES and
    double: only the bytes walked are read. Invalid bytes raise the walk's CorruptRecordError, or end
    the walk quietly with ``tolerate``."""
    pos, window = start, FIRST_WINDOW_BYTES
    while pos < end:
        want = min(window, end - pos)
        buf = pread(seg, pos, want)
        if len(buf) >= LOG_OVERHEAD:
            need = int.from_bytes(buf[LENGTH_OFFSET:LOG_OVERHEAD].tobytes(), "big", signed=True) + LOG_OVERHEAD
            if want < need <= end - pos:                # one batch larger than the window
                buf = pread(seg, pos, need)
        out = HeaderArrays.empty(max(16, len(buf) // WINDOW_BYTES_PER_SLOT))
        n, status, stop = scan_window(buf, 0, len(buf), 1 << 62, out, engine)
        if n:
            yield Window(buf, pos, out.head(n))
        window_cut = status == ERR_TRUNCATED and n > 0 and pos + len(buf) < end
        if status in (OK_END, OK_WINDOW) or window_cut:
            pos, window = pos + stop, min(window * 2, MAX_WINDOW_BYTES)
            continue
        if tolerate:
            return
        raise at_file_position(walk_error(status, buf, stop, len(buf), seg.files.log), pos)


def scan_to_end(seg: LogSegment, start: int, engine: str) -> Tuple[HeaderArrays, int, Optional[KafkalogError]]:
    """All batch headers from ``start`` to the end of the .log (file positions), where the valid
    bytes end, and the first problem (the walk stops there, as Kafka's recovery does). A short
    tail is read with pread; a long one (a rebuild) through a memory map."""
    size = seg.fd.size
    if size - start <= MAX_PREAD_SCAN_BYTES:
        scan = scan_buffer(pread(seg, start, size - start), path=seg.files.log, verify_crc=False,
                           on_corrupt="stop", engine=engine)
        h = scan.headers
        h.position += start
        error = None if scan.error is None else at_file_position(scan.error, start)
        return h, start + scan.valid_bytes, error
    with filesystem.open_view(seg.files.log, start) as f:
        scan = scan_buffer(f.array, path=seg.files.log, start=start, verify_crc=False, on_corrupt="stop",
                           engine=engine)
        return scan.headers, scan.valid_bytes, scan.error


