"""Offset lookups on one partition folder, answered as a broker answers them: ListOffsets
(EARLIEST, LATEST, MAX_TIMESTAMP, offset-for-timestamp) and offset -> batch position (the first
step of a fetch), through the ``.index``/``.timeindex`` files, reading only a few index intervals
of a ``.log`` (spec §4.4, §5, §6.5, §8).

Use::

    with PartitionLog.open("/var/kafka/orders-3") as log:
        log.lookup(1_700_000_000_000)             # -> LookupResult(offset=..., found=True, ...)
        log.lookup_many([EARLIEST, LATEST, t1])   # indexes opened once, reused per query
        log.translate_offset(1234)                # -> BatchPosition(segment=..., position=...)
        for batch in log.read_records(1234, max_records=10): ...

Kafka's rules, one partition, segments oldest -> newest (``UnifiedLog.fetchOffsetByTimestamp``,
``LogSegment.findOffsetByTimestamp``/``translateOffset``, ``FileRecords.searchForTimestamp``):

* log start offset (LSO) = max(``log-start-offset-checkpoint`` entry, first segment base offset);
  an absent entry means the first segment's base offset. High watermark (HW) =
  ``replication-offset-checkpoint`` entry, absent -> 0, clamped to [LSO, LEO]. Both files are
  read from the partition folder's log dir (its parent unless given).
* EARLIEST (-2): (offset LSO, timestamp -1); leader epoch = the epoch in force at the LSO per
  ``leader-epoch-checkpoint`` (the last entry whose start offset <= LSO: what the broker's
  ``truncateFromStart(LSO)`` leaves as the earliest entry), else -1. EARLIEST_LOCAL (-4) is the
  same (no tiered storage offline). LATEST_TIERED (-5): not found (no tiered storage).
* LATEST (-1): see ISOLATION below; leader epoch = the last ``leader-epoch-checkpoint`` entry.
* MAX_TIMESTAMP (-3): the first segment (in offset order) with the largest ``maxTimestampSoFar``
  (rolled segment: the last ``.timeindex`` entry, -1 when empty; active segment: the running max of
  its batches, see below); from ``offsetIndex.lookup(offsetOfMaxTimestamp)`` the first batch whose
  maxTimestamp equals it; answer = (that timestamp, the first record in that batch carrying it).
  Magic-0 data has no timestamps -> not found (``NO_TIMESTAMPS``). Not filtered by the LSO (as in
  Kafka).
* timestamp T >= 0: the FIRST segment whose ``largestTimestamp`` >= T (last ``.timeindex`` entry
  if >= 0, else the ``.log`` mtime in ms — LogSegment.largestTimestamp); none -> not found
  (``PAST_END``). In it: (t, o) = timeIndex.lookup(T); position = offsetIndex.lookup(max(o, LSO));
  scan batches from there; in each batch with maxTimestamp >= T the first record with
  timestamp >= T and offset >= LSO is the answer (its own timestamp; epoch = the batch's
  partitionLeaderEpoch if >= 0). Nothing found -> not found (``NOT_IN_SEGMENT``): later segments
  are NOT tried, as in Kafka.
* offset -> position (``translate_offset``): offsets < LSO or > the LEO raise
  :class:`OffsetOutOfRangeError` (``LocalLog.read``); from the isolation's upper bound (the LEO, or the
  HW) up to the LEO there is nothing to read (None). Else the
  floor segment by base offset, offsetIndex.lookup(offset), then the first batch whose
  lastOffset >= offset; none in that segment -> the next segment. Reads start at a batch boundary
  (records below the offset in that batch are skipped by ``read_records``, as a consumer does).

The ACTIVE (last) segment's ``maxTimestampSoFar`` is what a running broker holds in memory: the
running max over its batches (strictly greater wins, so on ties the earliest batch). It is computed
from the last ``.timeindex`` entry plus a header scan of the batches from the last ``.index``
entry's position to the end (every offset-index entry was written together with a time-index
offer of the running max, so the entries cover everything before that position); without a usable
``.timeindex`` the whole segment's headers are scanned. The same short tail scan gives the log end
offset (LEO). The active segment's largestTimestamp is only computed when no rolled segment reaches
the target.

Documented choices (where "offline" needs an answer Kafka does not give):

* ISOLATION. ``isolation="log_end"`` (default): what the log layer answers (and replica/debug
  ListOffsets get): LATEST = log end offset (LEO), no upper bound on other answers, reads up to
  the LEO. ``isolation="high_watermark"``: what a read_uncommitted client gets: LATEST = HW,
  a timestamp or MAX_TIMESTAMP answer at offset >= HW -> not found (``BEYOND_HIGH_WATERMARK``),
  reads stop at the HW. The checkpointed HW lags the broker's in-memory HW by up to
  ``replica.high.watermark.checkpoint.interval.ms`` (5 s), which is why it is not the default.
  read_committed (the last stable offset) is not offered: it needs the producer state.
* PAST THE END: a timestamp greater than every record's -> not found, offset -1, timestamp -1,
  as Kafka answers (``PAST_END``; ``NOT_IN_SEGMENT`` when an mtime fallback or the LSO made the
  chosen segment empty-handed).
* NO TIMESTAMPS (magic 0 data, timestamps -1): MAX_TIMESTAMP -> not found (``NO_TIMESTAMPS``);
  a timestamp search uses the mtime fallback to choose a segment and then finds no record in it
  (``NOT_IN_SEGMENT``), or ``PAST_END`` when every such segment's mtime is older than T.
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
  would first complete or drop them, spec §3.3).
"""
from __future__ import annotations

import datetime as _dt
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.checkpoint import (LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                                 EpochEntry, read_leader_epoch_checkpoint, read_offset_checkpoint)
from kafkalog.errors import CorruptIndexError, CorruptRecordError, KafkalogError, OffsetOutOfRangeError, OffsetOverflowError
from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES
from kafkalog.format.decoder import PartitionId, decode_window
from kafkalog.format.record_stamps import batch_stamps
from kafkalog.format.file_records import (ERR_TRUNCATED, OK_END, OK_WINDOW, HeaderArrays,
                                          _scan, check_crcs, crc_error, resolve_engine, scan_buffer, walk_error)
from kafkalog.index.builder import DEFAULT_INDEX_INTERVAL_BYTES, build_indexes
from kafkalog.index.offset_index import OffsetIndex, empty_offset_index, read_offset_index
from kafkalog.index.time_index import TIME_ENTRY_SIZE, TimeIndex, empty_time_index, read_time_index
from kafkalog.log import filesystem
from kafkalog.log.filesystem import RangeFile
from kafkalog.log.logdir import SegmentFiles, scan_partition_dir

PathLike = Union[str, os.PathLike]

# --- constants (ListOffsetsRequest / ListOffsetsResponse) -----------------------------------

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
SPECIAL_TIMESTAMPS = (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP,
                      LATEST_TIERED_TIMESTAMP)
#: kafka-get-offsets.sh's names for the special timestamps
TIME_NAMES = {"latest": LATEST_TIMESTAMP, "earliest": EARLIEST_TIMESTAMP, "max-timestamp": MAX_TIMESTAMP,
              "earliest-local": EARLIEST_LOCAL_TIMESTAMP, "latest-tiered": LATEST_TIERED_TIMESTAMP}

UNKNOWN_OFFSET = -1          # ListOffsetsResponse.UNKNOWN_OFFSET: "not found"
UNKNOWN_TIMESTAMP = -1       # ListOffsetsResponse.UNKNOWN_TIMESTAMP / RecordBatch.NO_TIMESTAMP
NO_LEADER_EPOCH = -1         # RecordBatch.NO_PARTITION_LEADER_EPOCH: "no epoch known"

ISOLATION_LOG_END = "log_end"              # the log layer / replica requests: LEO
ISOLATION_HIGH_WATERMARK = "high_watermark"  # read_uncommitted clients: HW
ISOLATIONS = (ISOLATION_LOG_END, ISOLATION_HIGH_WATERMARK)

# why a result is what it is (LookupResult.why)
FOUND = "found"
PAST_END = "past_end"                        # no segment's largestTimestamp reaches the target
NOT_IN_SEGMENT = "not_in_segment"            # the chosen segment had no record >= target at offset >= LSO
NO_TIMESTAMPS = "no_timestamps"              # MAX_TIMESTAMP on data without timestamps (magic 0)
BEYOND_HIGH_WATERMARK = "beyond_high_watermark"
NO_TIERED_STORAGE = "no_tiered_storage"      # LATEST_TIERED without tiered storage
WHY_TEXT = {
    FOUND: "found",
    PAST_END: "no segment has a record timestamp (or, without timestamps, a file time) at or after the target",
    NOT_IN_SEGMENT: "the first segment whose largest timestamp reaches the target has no record at or after it "
                    "at an offset >= the log start offset; Kafka does not try later segments",
    NO_TIMESTAMPS: "the log has no record timestamps (magic 0)",
    BEYOND_HIGH_WATERMARK: "the answer lies at or above the high watermark, which a client may not read",
    NO_TIERED_STORAGE: "offline logs have no tiered storage",
}

FIRST_WINDOW_BYTES = 16 << 10      # bytes of .log walked first from an index position (4 intervals)
MAX_WINDOW_BYTES = 8 << 20         # the walk doubles its window up to this
WINDOW_BYTES_PER_SLOT = 64         # header slots allocated per window byte (more batches: another round)
MAX_PREAD_SCAN_BYTES = 64 << 20    # a longer header scan (a rebuild) goes through a memory map
LOG_OVERHEAD = 12                  # baseOffset int64 + batchLength int32, before every batch
SIZE_FIELD_POS = 8                 # batchLength
_TIME_SLOT = struct.Struct(">qi")  # one .timeindex entry


# --- data structures ------------------------------------------------------------------------

@dataclass(frozen=True)
class LookupResult:
    """One ListOffsets answer. ``target`` is the query (a timestamp >= 0 or a special value).
    Not found: ``found`` False, ``offset`` -1, ``timestamp`` -1, ``why`` says which rule.
    ``segment`` is the base offset of the segment the answer came from (None when no segment was
    consulted). ``notes`` name index fallbacks used on the way."""

    target: int
    offset: int
    timestamp: int
    leader_epoch: int
    segment: Optional[int]
    found: bool
    why: str
    notes: Tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"target": self.target, "offset": self.offset, "timestamp": self.timestamp,
                "leaderEpoch": self.leader_epoch, "segment": self.segment, "found": self.found,
                "why": self.why, "notes": list(self.notes)}


@dataclass(frozen=True)
class BatchPosition:
    """Where a fetch from ``offset`` starts (Kafka's LogOffsetPosition): the first batch whose last
    offset >= ``offset``, in segment ``segment`` at byte ``position`` of its ``.log``."""

    offset: int
    segment: int
    position: int
    size: int
    base_offset: int
    last_offset: int
    notes: Tuple[str, ...] = ()


@dataclass
class _Segment:
    """One segment and what has been loaded of it (lazily; the handle owns it)."""

    files: SegmentFiles
    log_size: int
    mtime_ms: int
    offset_index: Optional[OffsetIndex] = None
    time_index: Optional[TimeIndex] = None
    time_index_from_file: bool = False     # False: missing (empty) or rebuilt
    notes: Tuple[str, ...] = ()
    fd: Optional[RangeFile] = None         # the .log, opened when first read (os.pread, or ranged GETs)
    rebuilt: bool = False                  # indexes rebuilt from the .log (no second retry)
    last_time_entry: Optional[Tuple[int, int]] = None   # cached (ts, offset) or (-1, base)

    @property
    def base_offset(self) -> int:
        return self.files.base_offset


@dataclass
class _Window:
    """Bytes of a .log read with one pread, and the batches that lie wholly inside them."""

    buf: np.ndarray        # the bytes (uint8)
    base: int              # where they start in the file
    h: HeaderArrays        # the batches; positions relative to ``buf``


# --- pure decisions -------------------------------------------------------------------------

def effective_log_start_offset(checkpointed: Optional[int], first_segment_base: Optional[int]) -> int:
    """Kafka's loader: max(checkpointed log start offset (absent: 0), first segment's base offset)."""
    lso = 0 if checkpointed is None else int(checkpointed)
    return lso if first_segment_base is None else max(lso, int(first_segment_base))


def clamp_high_watermark(checkpointed: Optional[int], log_start_offset: int, log_end_offset: int) -> int:
    """The checkpointed HW (absent: 0) clamped to [log start offset, log end offset]."""
    hw = 0 if checkpointed is None else int(checkpointed)
    return min(max(hw, log_start_offset), log_end_offset)


def largest_timestamp(max_timestamp_so_far: int, mtime_ms: int) -> int:
    """LogSegment.largestTimestamp: the segment's max timestamp if >= 0, else the .log mtime."""
    return max_timestamp_so_far if max_timestamp_so_far >= 0 else mtime_ms


def first_segment_reaching(largest_timestamps: Sequence[int], target: int) -> int:
    """Index of the first segment whose largest timestamp >= target, or -1."""
    lt = np.asarray(largest_timestamps, dtype=np.int64)
    hit = np.flatnonzero(lt >= target)
    return int(hit[0]) if hit.size else -1


def floor_segment(base_offsets: Sequence[int], offset: int) -> int:
    """Index of the segment with the largest base offset <= offset, or -1."""
    return int(np.searchsorted(np.asarray(base_offsets, dtype=np.int64), offset, side="right")) - 1


def first_record_at_or_after(offsets: np.ndarray, timestamps: np.ndarray, target: int, log_start_offset: int) -> int:
    """Index of the first record (in the given order) with timestamp >= target and offset >= the
    log start offset (FileRecords.searchForTimestamp's test), or -1."""
    hit = np.flatnonzero((timestamps >= target) & (offsets >= log_start_offset))
    return int(hit[0]) if hit.size else -1


def running_max(start: Tuple[int, int], max_timestamps: np.ndarray, last_offsets: np.ndarray) -> Tuple[int, int]:
    """LogSegment's maxTimestampAndOffsetSoFar after appending these batches: a batch replaces the
    running (timestamp, offset) only when its maxTimestamp is strictly greater."""
    ts, off = start
    if len(max_timestamps):
        i = int(np.argmax(max_timestamps))      # first occurrence of the max
        if int(max_timestamps[i]) > ts:
            ts, off = int(max_timestamps[i]), int(last_offsets[i])
    return ts, off


def earliest_epoch(entries: Sequence[EpochEntry], log_start_offset: int) -> int:
    """The leader epoch ListOffsets reports with EARLIEST: the epoch in force at the log start
    offset (the last entry starting at or before it), else -1."""
    epoch = NO_LEADER_EPOCH
    for entry in entries:
        if entry.start_offset <= log_start_offset:
            epoch = entry.epoch
    return epoch


def latest_epoch(entries: Sequence[EpochEntry]) -> int:
    return entries[-1].epoch if entries else NO_LEADER_EPOCH


def offset_index_problem(index: OffsetIndex, log_size: int) -> Optional[str]:
    """Why an offset index cannot be trusted for this .log (None: it can)."""
    try:
        index.sanity_check()
    except CorruptIndexError as e:
        return e.message
    if len(index):
        if np.any(np.diff(index.offsets) <= 0) or np.any(np.diff(index.positions) <= 0):
            return "entries are not strictly increasing"
        if int(index.positions[0]) < 0 or int(index.positions[-1]) >= log_size:
            return f"an entry points at byte {int(index.positions[-1])}, past the end of the .log ({log_size} bytes)"
    return None


def time_index_problem(index: TimeIndex) -> Optional[str]:
    """Why a time index cannot be trusted (None: it can)."""
    try:
        index.sanity_check()
    except CorruptIndexError as e:
        return e.message
    if len(index) and (np.any(np.diff(index.timestamps) <= 0) or np.any(np.diff(index.offsets) < 0)):
        return "entries are not increasing"
    return None


def not_found(target: int, why: str, segment: Optional[int] = None, notes: Tuple[str, ...] = ()) -> LookupResult:
    return LookupResult(target, UNKNOWN_OFFSET, UNKNOWN_TIMESTAMP, NO_LEADER_EPOCH, segment, False, why, notes)


def apply_isolation(result: LookupResult, upper_bound: Optional[int]) -> LookupResult:
    """A client's view (Partition.fetchOffsetForTimestamp): an answer at or past the last
    fetchable offset is not found."""
    if upper_bound is not None and result.found and result.offset >= upper_bound:
        return not_found(result.target, BEYOND_HIGH_WATERMARK, result.segment, result.notes)
    return result


_ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_time_spec(text: str) -> int:
    """A ``--time`` value: -1/-2/-3/-4/-5, a kafka-get-offsets.sh name (latest, earliest,
    max-timestamp, earliest-local, latest-tiered), epoch milliseconds, or an ISO-8601 date/time
    (no zone -> UTC). Raises ValueError with a message saying what is accepted."""
    s = text.strip()
    if s.lower() in TIME_NAMES:
        return TIME_NAMES[s.lower()]
    if re.fullmatch(r"[+-]?\d+", s):
        value = int(s)
        if value < 0 and value not in SPECIAL_TIMESTAMPS:
            raise ValueError(f"{text!r}: negative times other than -1..-5 mean nothing to ListOffsets")
        if value > 2**63 - 1:
            raise ValueError(f"{text!r} does not fit a 64-bit timestamp")
        return value
    if _ISO_RE.match(s):
        iso = s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s
        try:
            moment = _dt.datetime.fromisoformat(iso)
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=_dt.timezone.utc)
            delta = moment - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
            return delta // _dt.timedelta(milliseconds=1)
    raise ValueError(f"{text!r} is not a time: use -1 or latest, -2 or earliest, -3 or max-timestamp, "
                     "epoch milliseconds, or an ISO-8601 time such as 2024-05-01T12:00:00Z")


# --- side effects: reading files ------------------------------------------------------------

def _read_last_time_slot(path: Path, base_offset: int) -> Optional[Tuple[int, int]]:
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
        first = _TIME_SLOT.unpack(f.read_at(0, TIME_ENTRY_SIZE))
        ts, rel = _TIME_SLOT.unpack(f.read_at(size - TIME_ENTRY_SIZE, TIME_ENTRY_SIZE))
    if rel < 0 or ts < 0 or (rel == 0 and (ts == 0 or size > TIME_ENTRY_SIZE)) or ts < first[0] or first[1] < 0:
        return None                                     # padding or damage: parse (and check) it all
    return ts, base_offset + rel


def _at(error: KafkalogError, base: int) -> KafkalogError:
    """An error raised on a window's bytes, with its position made a file position."""
    if error.position is not None:
        error.position += base
        error.args = (str(error),)
    return error


def _pread(seg: _Segment, position: int, size: int) -> np.ndarray:
    return np.frombuffer(seg.fd.read_at(position, size), dtype=np.uint8)


def _walk(seg: _Segment, start: int, end: int, engine: str, *, tolerate: bool = False) -> Iterator[_Window]:
    """The batches of ``seg``'s .log from byte ``start`` (a batch boundary) to ``end``, read with
    os.pread in windows that start at FIRST_WINDOW_BYTES and double: only the bytes walked are
    read. Invalid bytes raise the walk's CorruptRecordError, or end the walk quietly with
    ``tolerate``."""
    pos, window = start, FIRST_WINDOW_BYTES
    while pos < end:
        want = min(window, end - pos)
        buf = _pread(seg, pos, want)
        if len(buf) >= LOG_OVERHEAD:
            need = int.from_bytes(buf[SIZE_FIELD_POS:LOG_OVERHEAD].tobytes(), "big", signed=True) + LOG_OVERHEAD
            if want < need <= end - pos:                # one batch larger than the window
                buf = _pread(seg, pos, need)
        out = HeaderArrays.empty(max(16, len(buf) // WINDOW_BYTES_PER_SLOT))
        n, status, stop = _scan(buf, 0, len(buf), 1 << 62, out, engine)
        if n:
            yield _Window(buf, pos, out.head(n))
        window_cut = status == ERR_TRUNCATED and n > 0 and pos + len(buf) < end
        if status in (OK_END, OK_WINDOW) or window_cut:
            pos, window = pos + stop, min(window * 2, MAX_WINDOW_BYTES)
            continue
        if tolerate:
            return
        raise _at(walk_error(status, buf, stop, len(buf), seg.files.log), pos)


def _scan_to_end(seg: _Segment, start: int, engine: str) -> Tuple[HeaderArrays, int, Optional[KafkalogError]]:
    """All batch headers from ``start`` to the end of the .log (file positions), where the valid
    bytes end, and the first problem (the walk stops there, as Kafka's recovery does). A short
    tail is read with pread; a long one (a rebuild) through a memory map."""
    size = seg.fd.size
    if size - start <= MAX_PREAD_SCAN_BYTES:
        scan = scan_buffer(_pread(seg, start, size - start), path=seg.files.log, verify_crc=False,
                           on_corrupt="stop", engine=engine)
        h = scan.headers
        h.position += start
        error = None if scan.error is None else _at(scan.error, start)
        return h, start + scan.valid_bytes, error
    with filesystem.open_view(seg.files.log, start) as f:
        scan = scan_buffer(f.array, path=seg.files.log, start=start, verify_crc=False, on_corrupt="stop",
                           engine=engine)
        return scan.headers, scan.valid_bytes, scan.error


# --- the partition handle -------------------------------------------------------------------

class PartitionLog:
    """One partition folder opened for lookups. Index files are read once, when a segment is
    first needed, and kept; ``.log`` files are read with os.pread, only the byte ranges walked.
    Not thread-safe; cheap to open (lists the folder, reads the checkpoints)."""

    def __init__(self, path: PathLike, *, log_dir: Optional[PathLike] = None,
                 topic_partition: Optional[Tuple[str, int]] = None, engine: str = "auto",
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES):
        self.path = Path(path)
        listing = scan_partition_dir(self.path, log_dir=log_dir, topic_partition=topic_partition)
        self.topic, self.partition = listing.topic, listing.partition
        self.log_dir = Path(log_dir) if log_dir is not None else self.path.parent
        self.engine = resolve_engine(engine)
        self.index_interval_bytes = index_interval_bytes
        self._pid = PartitionId(self.topic, self.partition)
        self._segments: List[_Segment] = []
        for files in listing.segments:
            st = filesystem.stat(files.log)
            # mtime in ms, truncated, as Java's File.lastModified()
            self._segments.append(_Segment(files, st.st_size, st.st_mtime_ns // 1_000_000))
        self.base_offsets = np.array([s.base_offset for s in self._segments], dtype=np.int64)
        key = (self.topic, self.partition)
        lso_entry = read_offset_checkpoint(self.log_dir / LOG_START_OFFSET_CHECKPOINT).get(key)
        self._hw_entry = read_offset_checkpoint(self.log_dir / REPLICATION_OFFSET_CHECKPOINT).get(key)
        self.leader_epochs: List[EpochEntry] = read_leader_epoch_checkpoint(self.path / LEADER_EPOCH_CHECKPOINT)
        self.log_start_offset = effective_log_start_offset(
            lso_entry, int(self.base_offsets[0]) if len(self.base_offsets) else None)
        self.notes: List[str] = []
        self._leo: Optional[int] = None
        self._last_valid_end: Optional[int] = None
        self._active_max: Optional[Tuple[int, int]] = None
        self._largest: Optional[np.ndarray] = None

    @classmethod
    def open(cls, path: PathLike, **kwargs) -> "PartitionLog":
        return cls(path, **kwargs)

    def close(self) -> None:
        for seg in self._segments:
            if seg.fd is not None:
                seg.fd.close()
                seg.fd = None

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition}, segments={len(self._segments)})"

    # --- what the folder says ----------------------------------------------------------------

    @property
    def segment_base_offsets(self) -> Tuple[int, ...]:
        return tuple(int(b) for b in self.base_offsets)

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
        return clamp_high_watermark(self._hw_entry, self.log_start_offset, self.log_end_offset)

    def upper_bound(self, isolation: str) -> int:
        """The last fetchable offset (exclusive) for this isolation: LEO or HW."""
        _check_isolation(isolation)
        return self.high_watermark if isolation == ISOLATION_HIGH_WATERMARK else self.log_end_offset

    # --- ListOffsets --------------------------------------------------------------------------

    def lookup(self, target: int, *, isolation: str = ISOLATION_LOG_END) -> LookupResult:
        """Kafka's answer to ListOffsets for one timestamp (>= 0) or special value (-1..-5)."""
        _check_isolation(isolation)
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
        bound = self.high_watermark if isolation == ISOLATION_HIGH_WATERMARK else None
        if target == MAX_TIMESTAMP:
            return apply_isolation(self._max_timestamp(), bound)
        if target < 0:
            raise ValueError(f"target {target} is neither a timestamp >= 0 nor one of {SPECIAL_TIMESTAMPS}")
        return apply_isolation(self._offset_for_timestamp(target), bound)

    def lookup_many(self, targets: Sequence[int], *, isolation: str = ISOLATION_LOG_END) -> List[LookupResult]:
        """One :class:`LookupResult` per target, in the order given; indexes, open files and the
        segments' largest timestamps are loaded once and shared by all queries."""
        _check_isolation(isolation)
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
        for w in _walk(seg, position, self._end_of(i), self.engine):
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
        for w in _walk(seg, position, self._end_of(i), self.engine):
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
        for w in _walk(seg, start, self._end_of(k), self.engine):
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
            self._ensure_open(seg)
            for w in _walk(seg, position, self._end_of(k), self.engine):
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
                        raise _at(e, w.base)
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
                    raise _at(crc_error(w.buf, h, bad, seg.files.log), w.base)
            position = 0

    # --- loading (the only code that reads files) --------------------------------------------

    def _ensure_open(self, seg: _Segment) -> None:
        if seg.fd is None:
            seg.fd = filesystem.RangeFile(seg.files.log)

    def _end_of(self, i: int) -> int:
        """Where walking segment i stops: its size, or the valid end of a torn last segment."""
        if i == len(self._segments) - 1:
            if self._last_valid_end is None:
                self._load_tail()
            return self._last_valid_end
        return self._segments[i].log_size

    def _load_indexes(self, seg: _Segment) -> None:
        """Read the segment's .index and .timeindex (once), falling back as the module says."""
        if seg.offset_index is not None:
            return
        self._ensure_open(seg)
        files, base = seg.files, seg.base_offset
        problem = None
        oi = ti = None
        if files.index is None:
            problem = "no .index file"
        else:
            try:
                oi = read_offset_index(files.index, base_offset=base)
                problem = offset_index_problem(oi, seg.log_size)
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

    def _install(self, seg: _Segment, oi: OffsetIndex, ti: TimeIndex, *, from_file: bool) -> None:
        changed = seg.last_time_entry is not None
        seg.offset_index, seg.time_index, seg.time_index_from_file = oi, ti, from_file
        last = ti.last_entry()
        entry = last if last is not None else (-1, seg.base_offset)
        if changed and entry != seg.last_time_entry:
            self._largest = None                      # a rebuilt index changed a largest timestamp
            self._active_max = None if seg is self._segments[-1] else self._active_max
        seg.last_time_entry = entry

    def _rebuild(self, seg: _Segment, problem: str) -> Tuple[OffsetIndex, TimeIndex]:
        """Both indexes rebuilt in memory from a header walk of the whole .log (LogSegment.recover:
        the walk ends at the first invalid batch)."""
        self._ensure_open(seg)
        seg.rebuilt = True
        h, _valid, _error = _scan_to_end(seg, 0, self.engine)
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
        h, valid_end, error = _scan_to_end(seg, start, self.engine)
        if error is not None and not len(h) and start > 0:
            start, running = 0, (-1, seg.base_offset)   # the indexed batch itself is damaged: walk it all
            h, valid_end, error = _scan_to_end(seg, 0, self.engine)
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
                    fast = _read_last_time_slot(Path(seg.files.timeindex), seg.base_offset)
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

    def _stamps(self, seg: _Segment, w: _Window, j: int) -> Tuple[np.ndarray, np.ndarray]:
        """(offsets, timestamps) of batch j's records: the light record walk for v2 batches with
        the accel engine, else (legacy data, the python engine, or anything malformed, to get the
        decoder's precise error) the full record decoder."""
        if self.engine != "python" and int(w.h.magic[j]) == 2:
            found = batch_stamps(w.buf, int(w.h.position[j]), max_batch_bytes=DEFAULT_MAX_BATCH_BYTES)
            if found is not None:
                return found
        batch = self._decode(seg, w, j)
        return batch.column("offset").to_numpy(), _timestamps(batch)

    def _decode(self, seg: _Segment, w: _Window, j: int) -> pa.RecordBatch:
        try:
            batch, _ = decode_window(w.buf, w.h.slice(j, j + 1), self._pid, engine=self.engine, path=seg.files.log,
                                     verify_crc=False)
        except KafkalogError as e:
            raise _at(e, w.base)
        return batch


def _timestamps(batch: pa.RecordBatch) -> np.ndarray:
    """Record timestamps in ms, -1 where the record has none (the decoder gives null)."""
    col = batch.column("timestamp").cast(pa.int64())
    return col.fill_null(UNKNOWN_TIMESTAMP).to_numpy(zero_copy_only=False)


def _epoch(h: HeaderArrays, j: int) -> int:
    epoch = int(h.partitionLeaderEpoch[j])
    return epoch if epoch >= 0 else NO_LEADER_EPOCH


def _check_isolation(isolation: str) -> None:
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")


# --- convenience --------------------------------------------------------------------------

def lookup_offsets(partition_dir: PathLike, targets: Sequence[int], *, isolation: str = ISOLATION_LOG_END,
                   **open_kwargs) -> List[LookupResult]:
    """Open a partition folder, answer ``targets``, close it."""
    with PartitionLog.open(partition_dir, **open_kwargs) as log:
        return log.lookup_many(targets, isolation=isolation)


__all__ = [
    "BEYOND_HIGH_WATERMARK", "EARLIEST_LOCAL_TIMESTAMP", "EARLIEST_TIMESTAMP", "FOUND", "ISOLATIONS",
    "ISOLATION_HIGH_WATERMARK", "ISOLATION_LOG_END", "LATEST_TIERED_TIMESTAMP", "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP", "NOT_IN_SEGMENT", "NO_LEADER_EPOCH", "NO_TIERED_STORAGE", "NO_TIMESTAMPS", "PAST_END",
    "UNKNOWN_OFFSET", "UNKNOWN_TIMESTAMP", "WHY_TEXT", "BatchPosition", "LookupResult", "OffsetOutOfRangeError",
    "PartitionLog", "apply_isolation", "clamp_high_watermark", "earliest_epoch", "effective_log_start_offset",
    "first_record_at_or_after", "first_segment_reaching", "floor_segment", "largest_timestamp", "latest_epoch",
    "lookup_offsets", "offset_index_problem", "parse_time_spec", "running_max", "time_index_problem",
]
