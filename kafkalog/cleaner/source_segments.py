"""The segments a cleaning round reads (Kafka's cleaner reading ``LogSegment``s): each opened with every
batch CRC-checked and its ``.txnindex`` read, and its batches decoded a window at a time, as columns
(``SourceWindow``: the compiled engine) or one ``SourceBatch`` of records at a time (the reference engine).

Only magic-2 data can be cleaned here: a segment holding a v0/v1 message makes the partition
refused (``LegacyFormatError``), never silently rewritten. Every batch is CRC-checked while the
segment is walked (Kafka's cleaner does not check CRCs; we refuse to launder a corrupt batch
into a freshly checksummed one) and a torn tail is an error, not a truncation: run the broker's
recovery (or restore) first.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generator, Iterable, Iterator, List, Optional

import numpy as np

from kafkalog.errors import KafkalogError
from kafkalog.format import control_record as cr
from kafkalog.format import record_batch as rb
from kafkalog.format.compression import OutputBuffer
from kafkalog.format.decoder import decode_decompressed, decode_window, decompress_batches
from kafkalog.engine import REFERENCE, resolve as resolve_engine
from kafkalog.format.file_records import HeaderArrays, scan_batches
from kafkalog.format.records_reference import RecordRow
from kafkalog.index.offset_index import read_offset_index
from kafkalog.index.transaction_index import TransactionIndex, read_transaction_index
from kafkalog.log.logdir import SegmentFiles, scan_partition_dir
from kafkalog.log.segment import FROM_BATCHES, FROM_TIMEINDEX, SegmentInfo, LogSegment, active_max_timestamp, index_file_bytes, largest_timestamp_of, rolled_max_timestamp
from kafkalog.format.record_batch import NO_TIMESTAMP
from kafkalog.topic_partition import UNKNOWN_PARTITION
from kafkalog.fs import filesystem

READ_WINDOW_BATCHES = 512          # batches decoded per call of the record decoder
READ_WINDOW_BYTES = 8 << 20        # ... and at most this many bytes of records per call


# --- data structures -----------------------------------------------------------------------------

class LegacyFormatError(KafkalogError):
    """A segment holds magic 0/1 messages, which this cleaner does not rewrite."""

    default_hint = "the legacy (v0/v1) compaction rules are not implemented; leave this partition to the broker"


@dataclass
class SourceBatch:
    """One v2 batch of a source segment: its header, original bytes and decoded records."""

    header: rb.BatchHeader
    position: int
    raw: bytes
    records: List[RecordRow]

    @property
    def control_type(self) -> Optional[int]:
        """The control record's type of a control batch (None when it holds no record)."""
        if not self.records:
            return None
        return cr.parse_control_type(self.records[0].key)

    @property
    def size(self) -> int:
        return len(self.raw)


@dataclass
class SourceWindow:
    """A run of consecutive v2 batches of a source segment decoded in one call, as columns: what
    ``read_batches`` yields batch by batch, without a Python object per record. Batch ``b`` holds
    records ``record_start[b]:record_start[b + 1]`` of the record columns."""

    buf: np.ndarray                  # the mapped segment (valid while the iteration is open)
    path: Path
    headers: List[rb.BatchHeader]
    positions: List[int]
    sizes: List[int]
    record_start: np.ndarray         # int64, len(headers) + 1
    table: Any                       # the decoder's pyarrow RecordBatch (RECORD_SCHEMA)
    offsets: np.ndarray              # int64 per record
    timestamps: np.ndarray           # int64 per record, -1 for none
    keys: Any                        # pyarrow binary array
    key_valid: np.ndarray            # bool per record
    value_valid: np.ndarray          # bool per record
    header_arrays: HeaderArrays = None   # the batches' headers as the segment's scan holds them
    located: Optional[tuple] = None      # (dbuf, b_src, b_start, b_end): where each batch's records lie,
                                         # decompressed (compiled engine; valid until the next window)

    def records_region(self, b: int):
        """(array, start, end) of batch ``b``'s (decompressed) records, None when not kept."""
        if self.located is None:
            return None
        dbuf, b_src, b_start, b_end = self.located
        return (dbuf if b_src[b] else self.buf), int(b_start[b]), int(b_end[b])

    def raw(self, b: int) -> bytes:
        pos = self.positions[b]
        return bytes(self.buf[pos:pos + self.sizes[b]])

    def control_type(self, b: int) -> Optional[int]:
        """``SourceBatch.control_type`` of batch ``b``."""
        first = int(self.record_start[b])
        if first == int(self.record_start[b + 1]):
            return None
        return cr.parse_control_type(self.keys[first].as_py())

    def rows(self, b: int) -> List[RecordRow]:
        """Batch ``b``'s records as ``read_batches`` gives them."""
        first, end = int(self.record_start[b]), int(self.record_start[b + 1])
        return _record_rows(self.table.slice(first, end - first))


# --- opening -------------------------------------------------------------------------------------

def load_segment(files: SegmentFiles, *, next_base_offset: Optional[int] = None) -> LogSegment:
    """Open one segment for cleaning (``next_base_offset`` None: the active segment): its batches
    walked with every CRC checked and its ``.txnindex`` read, now, so trouble refuses the round. Its largest
    timestamp follows :mod:`kafkalog.log.segment`: the last ``.timeindex`` entry of a rolled segment
    (an unreadable one counts as none), the batches' running max for the active one, else the mtime."""
    log_path = Path(files.log)
    st = filesystem.stat(log_path)
    mtime_ms = st.st_mtime_ns // 1_000_000
    scan = scan_batches(log_path, verify_crc=True, on_corrupt="raise")
    first_ts = int(scan.headers.maxTimestamp[0]) if len(scan.headers) else NO_TIMESTAMP
    if next_base_offset is None:
        so_far, source = active_max_timestamp(scan.headers.maxTimestamp), FROM_BATCHES
    else:
        try:
            so_far, source = rolled_max_timestamp(files), FROM_TIMEINDEX
        except KafkalogError:
            so_far, source = NO_TIMESTAMP, FROM_TIMEINDEX
    largest, source = largest_timestamp_of(so_far, mtime_ms, source)
    txn = TransactionIndex(files.base_offset, ())
    if files.txnindex is not None:
        txn = read_transaction_index(files.txnindex, base_offset=files.base_offset)
        txn.sanity_check(files.txnindex)
    segment = SegmentInfo(files.base_offset, st.st_size, largest, source, mtime_ms, next_base_offset, first_ts,
                         index_file_bytes(files.index), index_file_bytes(files.timeindex), files)
    return LogSegment(segment, st.st_mtime_ns, txn_index=txn, _scan=scan)


def load_segments(partition_dir) -> List[LogSegment]:
    """The segments of a partition folder in base-offset order (the last is the active one)."""
    found = scan_partition_dir(partition_dir).segments
    return [load_segment(f, next_base_offset=found[i + 1].base_offset if i + 1 < len(found) else None)
            for i, f in enumerate(found)]


# --- reading -------------------------------------------------------------------------------------

def start_position(segment: LogSegment, offset: int) -> int:
    """``offsetIndex.lookup(offset).position`` (0 when the index is missing or unreadable)."""
    if segment.index_path is None or offset <= segment.base_offset:
        return 0
    try:
        return read_offset_index(segment.index_path, base_offset=segment.base_offset).lookup(offset)[1]
    except (KafkalogError, OSError):
        return 0


def _record_rows(table) -> List[RecordRow]:
    """Arrow rows of the record decoder -> RecordRow objects (timestamps: -1 for none)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = table.column("offset").to_pylist()
    stamps = pc.fill_null(pc.cast(table.column("timestamp"), pa.int64()), -1).to_pylist()
    types = table.column("timestampType").to_pylist()
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    headers = table.column("headers")
    if pc.sum(pc.list_value_length(headers)).as_py():
        header_rows = [[(h["key"], h["value"]) for h in hs] if hs else [] for hs in headers.to_pylist()]
    else:
        header_rows = None
    return [RecordRow(offsets[i], stamps[i], types[i], keys[i], values[i],
                      header_rows[i] if header_rows is not None else [])
            for i in range(len(offsets))]


def read_batches(segment: LogSegment, *, max_batch_bytes: int, from_position: int = 0,
                 engine: Optional[str] = None) -> Iterator[SourceBatch]:
    """Decode the segment's batches in file order, starting at the first batch at or after
    ``from_position``, one ``SourceBatch`` (with a ``RecordRow`` per record) at a time: the reference
    engine's view of :func:`read_windows`. Raises ``LegacyFormatError`` at a v0/v1 message."""
    return batches_of(read_windows(segment, max_batch_bytes=max_batch_bytes, from_position=from_position,
                                   engine=engine))


def batches_of(windows: Iterable["SourceWindow"]) -> Iterator[SourceBatch]:
    """The windows' batches one at a time, each with its ``RecordRow``s (built once per window)."""
    for win in windows:
        rows = _record_rows(win.table)
        for b in range(len(win.headers)):
            first, end = int(win.record_start[b]), int(win.record_start[b + 1])
            yield SourceBatch(win.headers[b], win.positions[b], win.raw(b), rows[first:end])


def _valid(array) -> np.ndarray:
    if array.null_count == 0:
        return np.ones(len(array), dtype=np.bool_)
    return array.is_valid().to_numpy(zero_copy_only=False)


def read_windows(segment: LogSegment, *, max_batch_bytes: int, from_position: int = 0,
                 engine: Optional[str] = None) -> Generator[SourceWindow, None, None]:
    """Decode the segment's batches in file order from the first batch at or after ``from_position``,
    a window of batches at a time (the format layer's decoder: the numba engine unless
    ``engine="reference"``; both give the same rows), as columns. CRCs were checked by the segment's
    scan. Raises ``LegacyFormatError`` at a v0/v1 message, after the windows before it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    scan = segment.scan()
    h = scan.headers
    n = len(h)
    first = int(np.searchsorted(h.position, from_position, side="left")) if n else 0
    legacy = np.flatnonzero(h.magic[first:] != rb.MAGIC_VALUE_V2)
    stop = first + int(legacy[0]) if legacy.size else n
    engine = resolve_engine(engine)
    pid = UNKNOWN_PARTITION
    out = OutputBuffer(1 << 20)       # the window's decompressed records, kept for the rewrite
    with filesystem.open_view(segment.log_path) as f:
        buf = f.array
        i = first
        while i < stop:
            j = min(stop, i + READ_WINDOW_BATCHES)
            located = None
            if engine == REFERENCE:
                table, consumed = decode_window(buf, h.slice(i, j), pid, engine=engine, path=segment.log_path,
                                                verify_crc=False, max_batch_bytes=max_batch_bytes,
                                                budget=READ_WINDOW_BYTES)
            else:          # decompressed once: decoded from, and rewritten from, the same bytes
                consumed, b_src, b_start, b_end, dbuf = decompress_batches(
                    buf, h.slice(i, j), out, path=segment.log_path, max_batch_bytes=max_batch_bytes,
                    budget=READ_WINDOW_BYTES)
                table = decode_decompressed(buf, dbuf, h.slice(i, i + consumed), b_src, b_start, b_end,
                                            path=segment.log_path, max_batch_bytes=max_batch_bytes)
                located = (dbuf, b_src, b_start, b_end)
            consumed = max(int(consumed), 1)
            positions = h.position[i:i + consumed].tolist()
            sizes = h.size[i:i + consumed].tolist()
            counts = np.maximum(h.recordsCount[i:i + consumed].astype(np.int64), 0)
            record_start = np.zeros(consumed + 1, dtype=np.int64)
            np.cumsum(counts, out=record_start[1:])
            if int(record_start[-1]) != table.num_rows:
                raise KafkalogError(f"decoded {table.num_rows} records where the batches declare "
                                    f"{int(record_start[-1])}", path=segment.log_path, position=int(h.position[i]))
            keys = table.column("key")
            stamps = pc.fill_null(pc.cast(table.column("timestamp"), pa.int64()), -1)
            yield SourceWindow(buf, segment.log_path, [rb.parse_header(buf, pos) for pos in positions], positions,
                               sizes, record_start, table,
                               table.column("offset").to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
                               stamps.to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
                               keys, _valid(keys), _valid(table.column("value")), h.slice(i, i + consumed), located)
            i += consumed
        if stop < n:
            raise LegacyFormatError(f"magic {int(h.magic[stop])} message at offset {int(h.baseOffset[stop])}",
                                    path=segment.log_path, position=int(h.position[stop]))


__all__ = ["LegacyFormatError", "SourceBatch", "SourceWindow", "batches_of", "load_segment", "load_segments",
           "read_batches", "read_windows", "start_position"]
