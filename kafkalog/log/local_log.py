"""A partition folder loaded as a broker loads it, without recovering anything (Kafka's ``LocalLog``
as ``LogLoader`` builds it): its :class:`~kafkalog.log.segment.LogSegment` list and its offsets, with
the offset rules written once; and the segments opened for cleaning (the batches of a segment decoded
a window at a time, the aborted transactions of the ``.txnindex`` files).

Offset rules (spec §3.4, §6.2, §6.5; ``LogLoader.load``, ``ReplicaManager``'s high-watermark checkpoint):

* log start offset = max(``log-start-offset-checkpoint`` entry, first segment base offset); a missing
  entry means the first segment's base offset (no segment: the entry, else 0).
* high watermark = the ``replication-offset-checkpoint`` entry, 0 when absent (or the log end offset
  with ``missing="log-end"``: a backup without the checkpoint), clamped to [log start, log end].
* log end offset = the last valid batch's last offset + 1 in the last (active) segment, else its base
  offset. A torn tail is a problem; the log end offset is that of the valid prefix, which is where a
  broker's recovery would truncate.
* log-dir checkpoints are read once per log dir by :func:`read_log_dir_checkpoints`, whose one error
  policy is: never raise; a malformed or unreadable file reads as empty and is named in ``problems``
  (a broker would refuse to start on it). Readers that must not guess (the cleaner, lookups) call
  :meth:`LogDirCheckpoints.require`, which raises the first problem's error.

Only magic-2 data can be cleaned here: a segment holding a v0/v1 message makes the partition
refused (``LegacyFormatError``), never silently rewritten. Every batch is CRC-checked while the
segment is walked (Kafka's cleaner does not check CRCs; we refuse to launder a corrupt batch
into a freshly checksummed one) and a torn tail is an error, not a truncation: run the broker's
recovery (or restore) first.
"""
from __future__ import annotations

import os

import numpy as np
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, List, Mapping, Optional, Sequence

from kafkalog.checkpoint import (CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                                 read_offset_checkpoint)
from kafkalog.errors import KafkalogError
from kafkalog.format import control_record as cr
from kafkalog.format import record_batch as rb
from kafkalog.format.compression import OutputBuffer
from kafkalog.format.decoder import decode_decompressed, decode_window, decompress_batches
from kafkalog.format.file_records import HeaderArrays, MappedFile, ScanResult, resolve_engine, scan_batches
from kafkalog.format.records_reference import RecordRow
from kafkalog.index.offset_index import read_offset_index
from kafkalog.index.time_index import read_time_index
from kafkalog.index.transaction_index import AbortedTxn, TransactionIndex, read_transaction_index
from kafkalog.log.logdir import LIVE, PartitionDir, SegmentFiles, scan_partition_dir
from kafkalog.log.segment import (FROM_BATCHES, FROM_MTIME, FROM_TIMEINDEX, NO_TIMESTAMP, LogSegment,
                                  active_max_timestamp, largest_timestamp_of)
from kafkalog.topic_partition import UNKNOWN_PARTITION, TopicPartition

# What to assume when replication-offset-checkpoint has no entry for the partition.
HW_MISSING_ZERO = "zero"             # a broker: HW 0, clamped to the log start offset (deletes ~nothing)
HW_MISSING_LOG_END = "log-end"       # a backup without the checkpoint: treat everything as replicated
HW_MISSING_CHOICES = (HW_MISSING_ZERO, HW_MISSING_LOG_END)

# --- data structures -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LogDirCheckpoints:
    """The log-dir checkpoints a partition's offsets depend on (read once per log dir). ``errors``
    holds one error per file that could not be read (each also a line of ``problems``)."""

    log_start_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    high_watermarks: Mapping[TopicPartition, int] = field(default_factory=dict)
    cleaner_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    errors: tuple[KafkalogError, ...] = ()

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(str(e) for e in self.errors)

    def require(self) -> "LogDirCheckpoints":
        """Self, or the first file's error raised (for readers that must not guess)."""
        if self.errors:
            raise self.errors[0]
        return self


@dataclass
class LocalLog:
    """A partition folder loaded as a broker would load it (without recovering anything)."""

    log_dir: Optional[Path]
    path: Path
    topic: str
    partition: int
    kind: str
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    high_watermark_checkpoint: Optional[int]        # the raw checkpoint entry, None when absent
    leftovers: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    dir_listing: Optional[PartitionDir] = field(default=None, repr=False)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def high_watermark(self, missing: str = HW_MISSING_ZERO) -> int:
        """The high watermark a broker would load (:func:`high_watermark`)."""
        return high_watermark(self.high_watermark_checkpoint, log_start_offset=self.log_start_offset,
                              log_end_offset=self.log_end_offset, missing=missing)


class LegacyFormatError(KafkalogError):
    """A segment holds magic 0/1 messages, which this cleaner does not rewrite."""

    default_hint = "the legacy (v0/v1) compaction rules are not implemented; leave this partition to the broker"


@dataclass
class SegmentHandle:
    """One segment opened for cleaning: its :class:`LogSegment` description plus what has been read of
    it (the CRC-checked batch walk, the ``.txnindex``)."""

    segment: LogSegment
    log_path: Path
    mtime_ns: int
    next_offset: int                 # readNextOffset: last batch's lastOffset + 1, else base offset
    has_legacy: bool
    txn_index: TransactionIndex = field(repr=False, default=None)
    _scan: Optional[ScanResult] = field(repr=False, default=None)

    @property
    def base_offset(self) -> int:
        return self.segment.base_offset

    @property
    def size(self) -> int:
        return self.segment.size

    @property
    def index_path(self) -> Optional[Path]:
        return self.segment.files.index

    def scan(self) -> ScanResult:
        """The batch walk of the .log (CRC-checked once, then cached)."""
        if self._scan is None:
            self._scan = scan_batches(self.log_path, verify_crc=True, on_corrupt="raise")
        return self._scan


def _file_size(path: Optional[Path]) -> int:
    try:
        return os.stat(path).st_size if path is not None else 0
    except FileNotFoundError:
        return 0


# --- offset rules and checkpoints ----------------------------------------------------------------

def log_start_offset(checkpointed: Optional[int], first_segment_base: Optional[int]) -> int:
    """LogLoader: max(the checkpointed log start offset, the first segment's base offset); an absent
    entry means the first segment's base offset (no segment either: 0)."""
    if checkpointed is None:
        return 0 if first_segment_base is None else int(first_segment_base)
    return int(checkpointed) if first_segment_base is None else max(int(checkpointed), int(first_segment_base))


def high_watermark(checkpointed: Optional[int], *, log_start_offset: int, log_end_offset: int,
                   missing: str = HW_MISSING_ZERO) -> int:
    """The high watermark a broker would load: the checkpoint value, 0 when absent (or the log end
    offset with ``missing="log-end"``), clamped to [log start offset, log end offset]."""
    if missing not in HW_MISSING_CHOICES:
        raise ValueError(f"missing must be one of {HW_MISSING_CHOICES}, not {missing!r}")
    if checkpointed is None:
        checkpointed = log_end_offset if missing == HW_MISSING_LOG_END else 0
    return min(max(int(checkpointed), log_start_offset), log_end_offset)


def read_log_dir_checkpoints(log_dir: Optional[os.PathLike | str], *, cleaner: bool = False) -> LogDirCheckpoints:
    """Read ``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` of a log dir (and
    ``cleaner-offset-checkpoint`` with ``cleaner``), by the one error policy of the module docstring."""
    if log_dir is None:
        return LogDirCheckpoints()
    names = [LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT] + ([CLEANER_OFFSET_CHECKPOINT] if cleaner else [])
    errors: list[KafkalogError] = []
    values: list[dict] = []
    for name in names:
        path = Path(log_dir) / name
        try:
            values.append({TopicPartition(*k): v for k, v in read_offset_checkpoint(path).items()})
        except KafkalogError as exc:
            errors.append(exc)
            values.append({})
        except OSError as exc:
            errors.append(KafkalogError(f"cannot read ({exc.strerror or exc})", path=path))
            values.append({})
    return LogDirCheckpoints(values[0], values[1], values[2] if cleaner else {}, tuple(errors))


# --- loading a partition -------------------------------------------------------------------------

def _rolled_largest_timestamp(seg: SegmentFiles, mtime_ms: int, problems: list[str]) -> tuple[int, str]:
    """largestTimestamp of a rolled segment: its last ``.timeindex`` entry, else the mtime."""
    so_far = NO_TIMESTAMP
    if seg.timeindex is not None:
        try:
            last = read_time_index(seg.timeindex, base_offset=seg.base_offset).last_entry()
        except KafkalogError as exc:
            problems.append(f"{exc}; its largest timestamp falls back to the .log mtime")
            last = None
        if last is not None:
            so_far = last[0]
    return largest_timestamp_of(so_far, mtime_ms, FROM_TIMEINDEX)


def _active_tail(seg: SegmentFiles, mtime_ms: int, problems: list[str]) -> tuple[int, str, int, int]:
    """(largest timestamp, its source, next offset, first batch's timestamp) of the active segment
    from its batch headers."""
    result = scan_batches(seg.log, verify_crc=False, on_corrupt="stop")
    if result.error is not None:
        problems.append(f"{result.error}; the log end offset is that of the "
                        f"{result.valid_bytes} valid bytes, where a broker's recovery would truncate")
    batches = result.batches
    if batches.num_rows == 0:
        return mtime_ms, FROM_MTIME, seg.base_offset, NO_TIMESTAMP
    largest, source = largest_timestamp_of(active_max_timestamp(result.headers.maxTimestamp), mtime_ms, FROM_BATCHES)
    next_offset = int(batches.column("lastOffset")[batches.num_rows - 1].as_py()) + 1
    return largest, source, next_offset, int(batches.column("maxTimestamp")[0].as_py())


def load_partition(partition_dir: PartitionDir, checkpoints: LogDirCheckpoints) -> LocalLog:
    """Load one listed partition folder. Per-file trouble becomes a problem line; only an unreadable
    folder raises (OSError)."""
    problems = list(partition_dir.problems)
    infos: list[LogSegment] = []
    segments = partition_dir.segments
    log_end_offset = segments[-1].base_offset if segments else 0
    for i, seg in enumerate(segments):
        stat = os.stat(seg.log)
        mtime_ms = stat.st_mtime_ns // 1_000_000
        active = i == len(segments) - 1
        first_ts = NO_TIMESTAMP
        if active:
            try:
                largest, source, log_end_offset, first_ts = _active_tail(seg, mtime_ms, problems)
            except KafkalogError as exc:
                problems.append(str(exc))
                largest, source = mtime_ms, FROM_MTIME
        else:
            largest, source = _rolled_largest_timestamp(seg, mtime_ms, problems)
        infos.append(LogSegment(
            base_offset=seg.base_offset, size=stat.st_size, largest_timestamp_ms=largest,
            largest_timestamp_source=source, mtime_ms=mtime_ms,
            next_base_offset=None if active else segments[i + 1].base_offset, first_batch_timestamp_ms=first_ts,
            offset_index_bytes=_file_size(seg.index), time_index_bytes=_file_size(seg.timeindex), files=seg))
    key = TopicPartition(partition_dir.topic, partition_dir.partition)
    live = partition_dir.kind == LIVE
    log_start = log_start_offset(checkpoints.log_start_offsets.get(key) if live else None,
                                 segments[0].base_offset if segments else None)
    if log_end_offset < log_start and segments:
        problems.append(f"{partition_dir.path}: log end offset {log_end_offset} is below the checkpointed log start "
                        f"offset {log_start}; a broker would delete every segment of this partition at startup")
    hw = checkpoints.high_watermarks.get(key) if live else None
    return LocalLog(
        log_dir=partition_dir.log_dir, path=partition_dir.path, topic=partition_dir.topic,
        partition=partition_dir.partition, kind=partition_dir.kind, segments=infos,
        log_start_offset=log_start, log_end_offset=log_end_offset, high_watermark_checkpoint=hw,
        leftovers=list(partition_dir.leftovers) + list(partition_dir.stray_snapshots), problems=problems,
        dir_listing=partition_dir)


def load_partition_path(path: os.PathLike | str, *, log_dir: Optional[os.PathLike | str] = None,
                        checkpoints: Optional[LogDirCheckpoints] = None) -> LocalLog:
    """List and load one partition folder (``log_dir`` defaults to its parent folder)."""
    path = Path(path)
    log_dir = path.parent if log_dir is None else Path(log_dir)
    if checkpoints is None:
        checkpoints = read_log_dir_checkpoints(log_dir)
    state = load_partition(scan_partition_dir(path, log_dir=log_dir), checkpoints)
    state.problems[:0] = list(checkpoints.problems)
    return state


# --- segments opened for cleaning ----------------------------------------------------------------

def load_segment(files: SegmentFiles, *, next_base_offset: Optional[int] = None) -> SegmentHandle:
    """Open one segment for cleaning (``next_base_offset`` None: the active segment). Its largest
    timestamp follows :mod:`kafkalog.log.segment`: the last ``.timeindex`` entry of a rolled segment
    (an unreadable one counts as none), the batches' running max for the active one, else the mtime."""
    log_path = Path(files.log)
    st = os.stat(log_path)
    mtime_ms = st.st_mtime_ns // 1_000_000
    scan = scan_batches(log_path, verify_crc=True, on_corrupt="raise")
    b = scan.batches
    n = b.num_rows
    next_offset = int(b.column("lastOffset")[n - 1].as_py()) + 1 if n else files.base_offset
    first_ts = int(b.column("maxTimestamp")[0].as_py()) if n else NO_TIMESTAMP
    has_legacy = n > 0 and min(b.column("magic").to_pylist()) < 2
    if next_base_offset is None:
        so_far, source = active_max_timestamp(scan.headers.maxTimestamp), FROM_BATCHES
    else:
        so_far, source = NO_TIMESTAMP, FROM_TIMEINDEX
        if files.timeindex is not None:
            try:
                last = read_time_index(files.timeindex, base_offset=files.base_offset).last_entry()
                so_far = last[0] if last is not None else NO_TIMESTAMP
            except KafkalogError:
                so_far = NO_TIMESTAMP
    largest, source = largest_timestamp_of(so_far, mtime_ms, source)
    txn = TransactionIndex(files.base_offset, ())
    if files.txnindex is not None:
        txn = read_transaction_index(files.txnindex, base_offset=files.base_offset)
        txn.sanity_check(files.txnindex)
    segment = LogSegment(files.base_offset, st.st_size, largest, source, mtime_ms, next_base_offset, first_ts,
                         _file_size(files.index), _file_size(files.timeindex), files)
    return SegmentHandle(segment, log_path, st.st_mtime_ns, next_offset, has_legacy, txn, scan)


def pending_swap_files(partition_dir) -> List[str]:
    """``.cleaned``/``.swap`` files of an interrupted compaction, which a broker's startup finishes or
    drops (spec §3.3) and which must be dealt with before another round."""
    return [p.name for p in scan_partition_dir(partition_dir).leftovers
            if p.name.endswith((".cleaned", ".swap"))]


def load_segments(partition_dir) -> List[SegmentHandle]:
    """The segments of a partition folder in base-offset order (the last is the active one)."""
    found = scan_partition_dir(partition_dir).segments
    return [load_segment(f, next_base_offset=found[i + 1].base_offset if i + 1 < len(found) else None)
            for i, f in enumerate(found)]


def collect_aborted_transactions(segments: Sequence[SegmentHandle], start_offset: int, upper_bound: int,
                                 log_start_offset: int) -> List[AbortedTxn]:
    """``UnifiedLog.collectAbortedTransactions(start, upperBound)``: from the segment holding
    ``start_offset`` on, the entries with lastOffset >= logStartOffset and firstOffset < upperBound,
    stopping after the first segment holding an entry whose lastStableOffset >= upperBound."""
    first = 0
    for i, s in enumerate(segments):
        if s.base_offset <= start_offset:
            first = i
    out: List[AbortedTxn] = []
    for s in segments[first:]:
        found = s.txn_index.collect_aborted_txns(log_start_offset, upper_bound)
        out.extend(found.aborted)
        if found.is_complete:
            break
    return out


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


def start_position(segment: SegmentHandle, offset: int) -> int:
    """``offsetIndex.lookup(offset).position`` (0 when the index is missing or unreadable)."""
    if segment.index_path is None or offset <= segment.base_offset:
        return 0
    try:
        return read_offset_index(segment.index_path, base_offset=segment.base_offset).lookup(offset)[1]
    except (KafkalogError, OSError):
        return 0


READ_WINDOW_BATCHES = 512          # batches decoded per call of the record decoder
READ_WINDOW_BYTES = 8 << 20        # ... and at most this many bytes of records per call


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


def read_batches(segment: SegmentHandle, *, max_batch_bytes: int, from_position: int = 0,
                 engine: str = "auto") -> Iterator[SourceBatch]:
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
    table: object                    # the decoder's pyarrow RecordBatch (RECORD_SCHEMA)
    offsets: np.ndarray              # int64 per record
    timestamps: np.ndarray           # int64 per record, -1 for none
    keys: object                     # pyarrow binary array
    key_valid: np.ndarray            # bool per record
    value_valid: np.ndarray          # bool per record
    header_arrays: HeaderArrays = None   # the batches' headers as the segment's scan holds them
    located: Optional[tuple] = None      # (dbuf, b_src, b_start, b_end): where each batch's records lie,
                                         # decompressed (accel engine; valid until the next window)

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


def _valid(array) -> np.ndarray:
    if array.null_count == 0:
        return np.ones(len(array), dtype=np.bool_)
    return array.is_valid().to_numpy(zero_copy_only=False)


def read_windows(segment: SegmentHandle, *, max_batch_bytes: int, from_position: int = 0,
                 engine: str = "auto") -> Iterator[SourceWindow]:
    """Decode the segment's batches in file order from the first batch at or after ``from_position``,
    a window of batches at a time (the format layer's decoder: the numba engine unless
    ``engine="python"``; both give the same rows), as columns. CRCs were checked by the segment's
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
    with MappedFile(segment.log_path) as f:
        buf = f.array
        i = first
        while i < stop:
            j = min(stop, i + READ_WINDOW_BATCHES)
            located = None
            if engine == "python":
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


__all__ = ["HW_MISSING_CHOICES", "HW_MISSING_LOG_END", "HW_MISSING_ZERO", "LocalLog", "LogDirCheckpoints", "SegmentHandle",
           "high_watermark", "load_partition", "load_partition_path", "log_start_offset", "read_log_dir_checkpoints", "SourceBatch", "LegacyFormatError", "load_segments", "load_segment",
           "batches_of", "collect_aborted_transactions", "pending_swap_files", "read_batches", "read_windows", "SourceWindow", "start_position"]
