"""Offset lookups on one partition folder, answered as a broker answers them: ListOffsets
(EARLIEST, LATEST, MAX_TIMESTAMP, offset-for-timestamp) and offset -> batch position (the first
step of a fetch), through the ``.index``/``.timeindex`` files, reading only a few index intervals
of a ``.log`` (``UnifiedLog.fetchOffsetByTimestamp``, ``LogSegment.translateOffset``/
``findOffsetByTimestamp``, ``OffsetIndex.lookup``, ``TimeIndex.lookup``).

Use::

    with PartitionLog.open("/var/kafka/orders-3") as log:
        log.lookup(1_700_000_000_000)             # -> LookupResult(offset=..., found=True, ...)
        log.lookup_many([EARLIEST, LATEST, t1])   # indexes opened once, reused per query
        log.translate_offset(1234)                # -> BatchPosition(segment=..., position=...)
        for batch in log.read_records(1234, max_records=10): ...

The rules of every answer are :mod:`kafkalog.lookup.rules`' (pure); this module reads the files.

The ACTIVE (last) segment's ``maxTimestampSoFar`` is what a running broker holds in memory: the
running max over its batches (strictly greater wins, so on ties the earliest batch). It is computed
from the last ``.timeindex`` entry plus a header scan of the batches from the last ``.index``
entry's position to the end (every offset-index entry was written together with a time-index
offer of the running max, so the entries cover everything before that position); without a usable
``.timeindex`` the whole segment's headers are scanned. The same short tail scan gives the log end
offset (LEO). The active segment's largestTimestamp is only computed when no rolled segment reaches
the target.

File handling (where "offline" needs an answer Kafka does not give):

* INDEX FALLBACKS (never an exception; said in ``notes``): a missing ``.index`` -> both indexes
  rebuilt in memory from a header scan of the ``.log`` (Kafka's recovery does the same); a
  missing ``.timeindex`` -> empty, as the broker's loader creates it (largestTimestamp then falls
  back to the mtime); an index that is malformed or inconsistent with its ``.log`` (size not a
  multiple of the entry size, fails Kafka's sanity check, entries not increasing, a position
  past the end of the ``.log``) -> both rebuilt from the ``.log``. A zero-padded (preallocated)
  index ends at its first zero slot. To choose a segment, a rolled segment's largest timestamp
  is read from the first and last 12 bytes of its ``.timeindex`` (Kafka's lastEntry reads the last
  slot) when they pass Kafka's sanity check; otherwise the whole file is parsed and checked.
* Lookups do not verify CRCs (neither does the broker's search); ``read_records`` does by
  default (consumers do: check.crcs=true). Damaged ``.log`` bytes met by a lookup raise a
  :class:`~kafkalog.errors.CorruptRecordError` naming the file and byte position; a torn tail of
  the LAST segment is treated as the end of the log (what recovery would truncate) and noted in
  ``PartitionLog.notes``.
* Files are read as they are: ``.cleaned``/``.swap``/``.deleted`` leftovers are ignored (a broker
  would first complete or drop them, ``LogLoader.load``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.checkpoint.leader_epoch import EpochEntry, read_leader_epoch_checkpoint
from kafkalog.fs.names import LEADER_EPOCH_CHECKPOINT
from kafkalog.errors import CorruptIndexError, CorruptRecordError, KafkalogError, OffsetOutOfRangeError, OffsetOverflowError
from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES
from kafkalog.format.decoder import decode_window
from kafkalog.format.record_stamps import batch_stamps
from kafkalog.engine import REFERENCE, resolve as resolve_engine
from kafkalog.format.file_records import HeaderArrays, check_crcs, crc_error
from kafkalog.index.builder import DEFAULT_INDEX_INTERVAL_BYTES, build_indexes
from kafkalog.index.offset_index import OffsetIndex, empty_offset_index, read_offset_index
from kafkalog.index.time_index import TimeIndex, empty_time_index, read_time_index
from kafkalog.fs import filesystem
from kafkalog.log.local_log import high_watermark, log_start_offset, read_log_dir_checkpoints
from kafkalog.log.logdir import scan_partition_dir
from kafkalog.log.segment import SegmentInfo, LogSegment, largest_timestamp, running_max
from kafkalog.lookup.rules import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, FOUND, ISOLATION_HIGH_WATERMARK,
                                   ISOLATION_LOG_END, ISOLATION_READ_COMMITTED, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP,
                                   NO_LEADER_EPOCH, NO_TIERED_STORAGE, NO_TIMESTAMPS, NOT_IN_SEGMENT, PAST_END,
                                   SPECIAL_TIMESTAMPS, UNKNOWN_TIMESTAMP, BatchPosition, LookupResult, apply_isolation,
                                   check_isolation, earliest_epoch, first_record_at_or_after, first_segment_reaching,
                                   floor_segment, latest_epoch, not_found, offset_index_problem, time_index_problem)
from kafkalog.lookup.segment_file import (Window, at_file_position, read_last_time_slot,
                                          scan_to_end, walk)
from kafkalog.topic_partition import TopicPartition

PathLike = Union[str, os.PathLike]

# --- the partition handle -------------------------------------------------------------------

class PartitionLog:
    """One partition folder opened for lookups. Index files are read once, when a segment is
    first needed, and kept; ``.log`` files are read at positions (os.pread, or ranged GETs for a
    URI), only the byte ranges walked. Not thread-safe; cheap to open (lists the folder, reads the
    checkpoints). ``path``: the partition folder; ``log_dir``: its log dir (default: the parent);
    ``topic_partition``: when the folder's name is not ``topic-N``; ``engine``: ``auto``/``python``/``accel``;
    ``index_interval_bytes``: the topic's ``index.interval.bytes``. Example::

        with kafkalog.PartitionLog.open("logs/orders-0") as log:
            r = log.lookup(kafkalog.parse_time_spec("2026-01-08T03:00:00Z"))
            print(r.offset, r.timestamp, log.high_watermark)
    """

    def __init__(self, path: PathLike, *, log_dir: Optional[PathLike] = None,
                 topic_partition: Optional[TopicPartition] = None, engine: Optional[str] = None,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES):
        self.path = Path(path)
        listing = scan_partition_dir(self.path, log_dir=log_dir, topic_partition=topic_partition)
        self.topic, self.partition = listing.topic, listing.partition
        self.log_dir = Path(log_dir) if log_dir is not None else self.path.parent
        self.engine = resolve_engine(engine)
        self.index_interval_bytes = index_interval_bytes
        self._pid = TopicPartition(self.topic, self.partition)
        self._segments: List[LogSegment] = []
        found = listing.segments
        for i, files in enumerate(found):
            st = filesystem.stat(files.log)
            # mtime in ms, truncated, as Java's File.lastModified(); the largest timestamp is not read
            # here but when a query needs it (_max_so_far: two .timeindex slots, or the active tail)
            segment = SegmentInfo(files.base_offset, st.st_size, mtime_ms=st.st_mtime_ns // 1_000_000, files=files,
                                 next_base_offset=found[i + 1].base_offset if i + 1 < len(found) else None)
            self._segments.append(LogSegment(segment, st.st_mtime_ns))
        self.base_offsets = np.array([s.base_offset for s in self._segments], dtype=np.int64)
        checkpoints = read_log_dir_checkpoints(self.log_dir).require()
        self._hw_entry = checkpoints.high_watermarks.get(self._pid)
        self.leader_epochs: List[EpochEntry] = read_leader_epoch_checkpoint(self.path / LEADER_EPOCH_CHECKPOINT)
        self.log_start_offset = log_start_offset(checkpoints.log_start_offsets.get(self._pid),
                                                 int(self.base_offsets[0]) if len(self.base_offsets) else None)
        self.notes: List[str] = []
        self._leo: Optional[int] = None
        self._lso: Optional[int] = None
        self._last_valid_end: Optional[int] = None
        self._active_max: Optional[Tuple[int, int]] = None
        self._largest: Optional[np.ndarray] = None

    @classmethod
    def open(cls, path: PathLike, **kwargs) -> "PartitionLog":
        return cls(path, **kwargs)

    def close(self) -> None:
        for seg in self._segments:
            seg.close()

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition}, segments={len(self._segments)})"

    # --- what the folder says ----------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """LEO: the last batch's last offset + 1 (the last segment's base offset when it is empty,
        the log start offset when there is no segment)."""
        if self._leo is None:
            self._load_tail()
        return self._leo

    @property
    def checkpointed_high_watermark(self) -> Optional[int]:
        """The log dir's replication-offset-checkpoint entry for this partition, None when absent."""
        return self._hw_entry

    @property
    def high_watermark(self) -> int:
        return high_watermark(self._hw_entry, log_start_offset=self.log_start_offset, log_end_offset=self.log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """The LSO a read_committed client is bounded by: the first offset of the earliest transaction
        still open below the high watermark, else the high watermark (replayed once, then kept)."""
        if self._lso is None:
            from kafkalog.log.last_stable_offset import replay_below
            logs = [(s.base_offset, os.fspath(s.files.log)) for s in self._segments]
            self._lso = replay_below(logs, self.high_watermark)[0]
        return self._lso

    def upper_bound(self, isolation: str) -> int:
        """The last fetchable offset (exclusive) for this isolation: LEO, HW or LSO."""
        check_isolation(isolation)
        if isolation == ISOLATION_READ_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark if isolation == ISOLATION_HIGH_WATERMARK else self.log_end_offset

    # --- ListOffsets --------------------------------------------------------------------------

    def lookup(self, target: int, *, isolation: str = ISOLATION_LOG_END) -> LookupResult:
        """Kafka's answer to ListOffsets for one timestamp (>= 0) or special value (-1..-5)."""
        check_isolation(isolation)
        target = int(target)
        if target == EARLIEST_TIMESTAMP or target == EARLIEST_LOCAL_TIMESTAMP:
            lso = self.log_start_offset
            i = floor_segment(self.base_offsets, lso)
            return LookupResult(target, lso, UNKNOWN_TIMESTAMP, earliest_epoch(self.leader_epochs, lso),
                                self._base(i), True, FOUND)
        if target == LATEST_TIMESTAMP:
            offset = self.upper_bound(isolation)
            return LookupResult(target, offset, UNKNOWN_TIMESTAMP, latest_epoch(self.leader_epochs),
                                self._base(len(self._segments) - 1), True, FOUND)
        if target == LATEST_TIERED_TIMESTAMP:
            return not_found(target, NO_TIERED_STORAGE)
        bound = None if isolation == ISOLATION_LOG_END else self.upper_bound(isolation)
        if target == MAX_TIMESTAMP:
            return apply_isolation(self._max_timestamp(), bound)
        if target < 0:
            raise ValueError(f"target {target} is neither a timestamp >= 0 nor one of {SPECIAL_TIMESTAMPS}")
        return apply_isolation(self._offset_for_timestamp(target), bound)

    def lookup_many(self, targets: Sequence[int], *, isolation: str = ISOLATION_LOG_END) -> List[LookupResult]:
        """One :class:`LookupResult` per target, in the order given; indexes, open files and the
        segments' largest timestamps are loaded once and shared by all queries."""
        check_isolation(isolation)
        return [self.lookup(int(t), isolation=isolation) for t in targets]

    def _base(self, i: int) -> Optional[int]:
        return int(self.base_offsets[i]) if 0 <= i < len(self._segments) else None

    def _offset_for_timestamp(self, target: int) -> LookupResult:
        n = len(self._segments)
        if not n:
            return not_found(target, PAST_END)
        i = first_segment_reaching(self._rolled_largest_timestamps(), target)
        if i < 0:
            active = largest_timestamp(self._max_so_far(n - 1)[0], self._segments[-1].mtime_ms)
            if active < target:
                return not_found(target, PAST_END)
            i = n - 1
        return self._with_index_retry(i, lambda: self._search_segment(i, target))

    def _search_segment(self, i: int, target: int) -> LookupResult:
        """LogSegment.findOffsetByTimestamp in segment i."""
        seg = self._segments[i]
        lso = self.log_start_offset
        _t, o = seg.time_index.lookup(target)
        _o, position = seg.offset_index.lookup(max(o, lso))
        for w in walk(seg, position, self._end_of(i), self.engine):
            h = w.h
            for j in np.flatnonzero((h.maxTimestamp >= target) & (h.lastOffset >= lso)):
                offsets, ts = self._stamps(seg, w, int(j))
                k = first_record_at_or_after(offsets, ts, target, lso)
                if k >= 0:
                    return LookupResult(target, int(offsets[k]), int(ts[k]), _epoch(h, int(j)), seg.base_offset,
                                        True, FOUND, seg.notes)
        return not_found(target, NOT_IN_SEGMENT, seg.base_offset, seg.notes)

    def _max_timestamp(self) -> LookupResult:
        target = MAX_TIMESTAMP
        if not self._segments:
            return not_found(target, NO_TIMESTAMPS)
        so_far = [self._max_so_far(i)[0] for i in range(len(self._segments))]
        i = int(np.argmax(so_far))                      # the first segment on ties, as Scala's maxBy
        return self._with_index_retry(i, lambda: self._search_max(i))

    def _search_max(self, i: int) -> LookupResult:
        target = MAX_TIMESTAMP
        seg = self._segments[i]
        ts, off = self._max_so_far(i)
        why = NO_TIMESTAMPS if ts < 0 else NOT_IN_SEGMENT
        _o, position = seg.offset_index.lookup(off)
        for w in walk(seg, position, self._end_of(i), self.engine):
            h = w.h
            hit = np.flatnonzero(h.maxTimestamp == ts)
            if not hit.size:
                continue
            j = int(hit[0])
            if int(h.magic[j]) == 0:
                break                                   # offsetOfMaxTimestamp is empty for magic 0
            offsets, stamps = self._stamps(seg, w, j)
            k = np.flatnonzero(stamps == ts)
            if not k.size:
                break
            return LookupResult(target, int(offsets[int(k[0])]), ts, _epoch(h, j),
                                seg.base_offset, True, FOUND, seg.notes)
        return not_found(target, why, seg.base_offset, seg.notes)

    def _with_index_retry(self, i: int, search):
        """Run a search in segment i; when its walk fails from a position taken from on-disk
        indexes, the indexes are taken as corrupt, rebuilt from the .log, and the search rerun."""
        seg = self._segments[i]
        self._load_indexes(seg)
        try:
            return search()
        except CorruptRecordError as e:
            if seg.rebuilt:
                raise
            self._install(seg, *self._rebuild(seg, f"an index entry leads to invalid batch bytes ({e.message})"),
                          from_file=False)
            return search()

    # --- offset -> position, and reading records ---------------------------------------------

    def translate_offset(self, offset: int, *, isolation: str = ISOLATION_LOG_END) -> Optional[BatchPosition]:
        """Where a fetch from ``offset`` starts; None when ``offset`` is the readable end
        (nothing to read yet). Raises :class:`OffsetOutOfRangeError` below the log start offset
        or past the end."""
        offset = int(offset)
        end = self.upper_bound(isolation)
        # LocalLog.read: out of range only below the log start or past the log END; from the high
        # watermark up to the log end a client's fetch is just empty.
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.topic}-{self.partition}: the log holds "
                f"[{self.log_start_offset}, {self.log_end_offset})", path=self.path)
        if offset >= end:
            return None
        first = max(floor_segment(self.base_offsets, offset), 0)
        for k in range(first, len(self._segments)):
            found = self._with_index_retry(k, lambda: self._find_batch(k, offset, from_index=k == first))
            if found is not None:
                return found
        return None

    def _find_batch(self, k: int, offset: int, *, from_index: bool) -> Optional[BatchPosition]:
        """FileRecords.searchForOffsetFromPosition: the first batch with lastOffset >= offset."""
        seg = self._segments[k]
        start = seg.offset_index.lookup(offset)[1] if from_index else 0
        for w in walk(seg, start, self._end_of(k), self.engine):
            h = w.h
            hit = np.flatnonzero(h.lastOffset >= offset)
            if hit.size:
                j = int(hit[0])
                return BatchPosition(offset, seg.base_offset, w.base + int(h.position[j]), int(h.size[j]),
                                     int(h.baseOffset[j]), int(h.lastOffset[j]), seg.notes)
        return None

    def read_records(self, offset: int, *, max_records: Optional[int] = None, isolation: str = ISOLATION_LOG_END,
                     verify_crc: bool = True) -> Iterator[pa.RecordBatch]:
        """Records with offset >= ``offset`` (and below the isolation's upper bound), in offset
        order, as RecordBatches of kafkalog's RECORD_SCHEMA, at most ``max_records`` rows in all.
        Control records are included (``isControl``); a consumer would skip them."""
        start = self.translate_offset(offset, isolation=isolation)
        if start is None or max_records == 0:
            return
        end_offset = self.upper_bound(isolation)
        left = max_records
        i = int(np.searchsorted(self.base_offsets, start.segment))
        position = start.position
        for k in range(i, len(self._segments)):
            seg = self._segments[k]
            seg.open()
            for w in walk(seg, position, self._end_of(k), self.engine):
                h, bad = w.h, None
                if verify_crc:
                    valid = check_crcs(w.buf, h, len(h))
                    if not valid.all():
                        bad = int(np.argmin(valid))
                n, stop = 0, len(h) if bad is None else bad
                while n < stop:
                    try:
                        batch, used = decode_window(w.buf, h.slice(n, stop), self._pid, engine=self.engine,
                                                    path=seg.files.log, verify_crc=verify_crc)
                    except KafkalogError as e:
                        raise at_file_position(e, w.base)
                    n += used
                    offsets = batch.column("offset")
                    keep = pc.and_(pc.greater_equal(offsets, offset), pc.less(offsets, end_offset))
                    batch = batch.filter(keep)
                    if left is not None:
                        batch = batch.slice(0, left)
                        left -= batch.num_rows
                    if batch.num_rows:
                        yield batch
                    if left == 0 or int(h.lastOffset[n - 1]) + 1 >= end_offset:
                        return
                if bad is not None:
                    raise at_file_position(crc_error(w.buf, h, bad, seg.files.log), w.base)
            position = 0

    # --- loading (the only code that reads files) --------------------------------------------

    def _end_of(self, i: int) -> int:
        """Where walking segment i stops: its size, or the valid end of a torn last segment."""
        if i == len(self._segments) - 1:
            if self._last_valid_end is None:
                self._load_tail()
            return self._last_valid_end
        return self._segments[i].size

    def _load_indexes(self, seg: LogSegment) -> None:
        """Read the segment's .index and .timeindex (once), falling back as the module says."""
        if seg.offset_index is not None:
            return
        seg.open()
        files, base = seg.files, seg.base_offset
        problem = None
        oi = ti = None
        if files.index is None:
            problem = "no .index file"
        else:
            try:
                oi = read_offset_index(files.index, base_offset=base)
                problem = offset_index_problem(oi, seg.size)
            except (CorruptIndexError, OSError) as e:
                problem = f".index: {getattr(e, 'message', None) or e}"
        if problem is None and files.timeindex is not None:
            try:
                ti = read_time_index(files.timeindex, base_offset=base)
                problem = time_index_problem(ti)
            except (CorruptIndexError, OSError) as e:
                problem = f".timeindex: {getattr(e, 'message', None) or e}"
        if problem is not None:
            self._install(seg, *self._rebuild(seg, problem), from_file=False)
        elif ti is None:
            seg.notes += (f"{Path(files.log).stem}.timeindex is missing: taken as empty, as the broker's loader "
                          "creates it (the largest timestamp falls back to the .log mtime)",)
            self._install(seg, oi, empty_time_index(base), from_file=False)
        else:
            self._install(seg, oi, ti, from_file=True)

    def _install(self, seg: LogSegment, oi: OffsetIndex, ti: TimeIndex, *, from_file: bool) -> None:
        changed = seg.last_time_entry is not None
        seg.offset_index, seg.time_index, seg.time_index_from_file = oi, ti, from_file
        last = ti.last_entry()
        entry = last if last is not None else (-1, seg.base_offset)
        if changed and entry != seg.last_time_entry:
            self._largest = None                      # a rebuilt index changed a largest timestamp
            self._active_max = None if seg is self._segments[-1] else self._active_max
        seg.last_time_entry = entry

    def _rebuild(self, seg: LogSegment, problem: str) -> Tuple[OffsetIndex, TimeIndex]:
        """Both indexes rebuilt in memory from a header walk of the whole .log (LogSegment.recover:
        the walk ends at the first invalid batch)."""
        seg.open()
        seg.rebuilt = True
        h, _valid, _error = scan_to_end(seg, 0, self.engine)
        name = Path(seg.files.log).name
        seg.notes += (f"{name}: {problem}; indexes rebuilt from the .log as Kafka's recovery would "
                      "(the whole segment was scanned)",)
        try:
            return build_indexes(base_offset=seg.base_offset, positions=h.position, sizes=h.size,
                                 last_offsets=h.lastOffset, max_timestamps=h.maxTimestamp,
                                 index_interval_bytes=self.index_interval_bytes)
        except (CorruptIndexError, OffsetOverflowError) as e:
            seg.notes += (f"{name}: its batches cannot be indexed ({e.message}); searched from its start",)
            return empty_offset_index(seg.base_offset), empty_time_index(seg.base_offset)

    def _load_tail(self) -> None:
        """LEO, the valid end of the last segment, and the active segment's running max timestamp,
        from one header walk from the last offset-index entry to the end of the .log."""
        if not self._segments:
            self._leo, self._last_valid_end, self._active_max = self.log_start_offset, 0, (-1, self.log_start_offset)
            return
        seg = self._segments[-1]
        self._load_indexes(seg)
        if seg.time_index_from_file:
            start = int(seg.offset_index.positions[-1]) if len(seg.offset_index) else 0
            running = seg.last_time_entry
        else:
            start, running = 0, (-1, seg.base_offset)
        h, valid_end, error = scan_to_end(seg, start, self.engine)
        if error is not None and not len(h) and start > 0:
            start, running = 0, (-1, seg.base_offset)   # the indexed batch itself is damaged: walk it all
            h, valid_end, error = scan_to_end(seg, 0, self.engine)
        if error is not None:
            self.notes.append(f"{error}; the log is taken to end at byte {valid_end}, where Kafka's recovery "
                              "would truncate it")
        self._last_valid_end = valid_end
        self._leo = max(seg.base_offset, int(h.lastOffset[-1]) + 1) if len(h) else seg.base_offset
        if self._leo < self.log_start_offset:
            self.notes.append(f"the log start offset {self.log_start_offset} is past the log end {self._leo}: the "
                              "broker would delete every segment and start an empty log there")
            self._leo = self.log_start_offset
        self._active_max = running_max(running, h.maxTimestamp, h.lastOffset)

    def _max_so_far(self, i: int) -> Tuple[int, int]:
        """LogSegment.maxTimestampAndOffsetSoFar: the last time-index entry of a rolled segment,
        the running max of the active one; (-1, base offset) when none."""
        if i == len(self._segments) - 1:
            if self._active_max is None:
                self._load_tail()
            return self._active_max
        seg = self._segments[i]
        if seg.last_time_entry is None:
            fast = None
            if seg.files.timeindex is not None and seg.files.index is not None:
                try:
                    fast = read_last_time_slot(Path(seg.files.timeindex), seg.base_offset)
                except OSError:
                    fast = None
            if fast is not None:
                seg.last_time_entry = fast
            else:
                self._load_indexes(seg)
        return seg.last_time_entry

    def _rolled_largest_timestamps(self) -> np.ndarray:
        """largestTimestamp of every segment but the active one (whose value is only needed when
        none of these reaches the target)."""
        if self._largest is None:
            n = len(self._segments) - 1
            self._largest = np.array([largest_timestamp(self._max_so_far(i)[0], self._segments[i].mtime_ms)
                                      for i in range(max(n, 0))], dtype=np.int64)
        return self._largest

    def _stamps(self, seg: LogSegment, w: Window, j: int) -> Tuple[np.ndarray, np.ndarray]:
        """(offsets, timestamps) of batch j's records: the light record walk for v2 batches with
        the compiled engine, else (legacy data, the reference engine, or anything malformed, to get the
        decoder's precise error) the full record decoder."""
        if self.engine != REFERENCE and int(w.h.magic[j]) == 2:
            found = batch_stamps(w.buf, int(w.h.position[j]), max_batch_bytes=DEFAULT_MAX_BATCH_BYTES)
            if found is not None:
                return found
        batch = self._decode(seg, w, j)
        return batch.column("offset").to_numpy(), _timestamps(batch)

    def _decode(self, seg: LogSegment, w: Window, j: int) -> pa.RecordBatch:
        try:
            batch, _ = decode_window(w.buf, w.h.slice(j, j + 1), self._pid, engine=self.engine, path=seg.files.log,
                                     verify_crc=False)
        except KafkalogError as e:
            raise at_file_position(e, w.base)
        return batch


def _timestamps(batch: pa.RecordBatch) -> np.ndarray:
    """Record timestamps in ms, -1 where the record has none (the decoder gives null)."""
    col = batch.column("timestamp").cast(pa.int64())
    return col.fill_null(UNKNOWN_TIMESTAMP).to_numpy(zero_copy_only=False)


def _epoch(h: HeaderArrays, j: int) -> int:
    epoch = int(h.partitionLeaderEpoch[j])
    return epoch if epoch >= 0 else NO_LEADER_EPOCH


# --- convenience --------------------------------------------------------------------------

def lookup_offsets(partition_dir: PathLike, targets: Sequence[int], *, isolation: str = ISOLATION_LOG_END,
                   **open_kwargs) -> List[LookupResult]:
    """Open a partition folder (``partition_dir``), answer ``targets`` (timestamps >= 0 or -1 latest,
    -2 earliest, -3 max-timestamp, -4 earliest-local, -5 latest-tiered) as ListOffsets does under
    ``isolation`` (``log_end``, ``high_watermark`` or ``read_committed``), close it. Example::

        for r in kafkalog.lookup_offsets("logs/orders-0", [-2, -1, 1767841200000]):
            print(r.target, r.offset, r.timestamp)
    """
    with PartitionLog.open(partition_dir, **open_kwargs) as log:
        return log.lookup_many(targets, isolation=isolation)


__all__ = ["PartitionLog", "lookup_offsets"]
