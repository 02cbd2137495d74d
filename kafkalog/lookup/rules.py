"""ListOffsets decisions, pure: what a broker answers for EARLIEST, LATEST, MAX_TIMESTAMP and a
timestamp, and where a fetch from an offset starts, as functions of numbers the partition handle
(:mod:`kafkalog.lookup.partition_log`) reads from the files (``UnifiedLog.fetchOffsetByTimestamp``,
``LogSegment.findOffsetByTimestamp``/``translateOffset``, ``OffsetIndex.lookup``, ``TimeIndex.lookup``).

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
  its batches, as :mod:`kafkalog.log.segment` states it); from ``offsetIndex.lookup(offsetOfMaxTimestamp)`` the first batch whose
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

Documented choices (where "offline" needs an answer Kafka does not give):

* ISOLATION. ``isolation="log_end"`` (default): what the log layer answers (and replica/debug
  ListOffsets get): LATEST = log end offset (LEO), no upper bound on other answers, reads up to
  the LEO. ``isolation="high_watermark"``: what a read_uncommitted client gets: LATEST = HW,
  a timestamp or MAX_TIMESTAMP answer at offset >= HW -> not found (``BEYOND_HIGH_WATERMARK``),
  reads stop at the HW. The checkpointed HW lags the broker's in-memory HW by up to
  ``replica.high.watermark.checkpoint.interval.ms`` (5 s), which is why it is not the default.
  ``isolation="read_committed"``: what a read_committed client gets: the same with the last stable
  offset (the first offset of a transaction still open, else the HW) in place of the HW. The broker
  keeps open transactions in memory; offline they are replayed from every batch header below the HW
  (kafkalog.log.last_stable_offset), so this isolation reads the whole partition's batch headers once.
* PAST THE END: a timestamp greater than every record's -> not found, offset -1, timestamp -1,
  as Kafka answers (``PAST_END``; ``NOT_IN_SEGMENT`` when an mtime fallback or the LSO made the
  chosen segment empty-handed).
* NO TIMESTAMPS (magic 0 data, timestamps -1): MAX_TIMESTAMP -> not found (``NO_TIMESTAMPS``);
  a timestamp search uses the mtime fallback to choose a segment and then finds no record in it
  (``NOT_IN_SEGMENT``), or ``PAST_END`` when every such segment's mtime is older than T.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np
from numpy.typing import ArrayLike

from kafkalog.checkpoint.leader_epoch import EpochEntry
from kafkalog.errors import CorruptIndexError
from kafkalog.index.offset_index import OffsetIndex
from kafkalog.index.time_index import TimeIndex

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
ISOLATION_READ_COMMITTED = "read_committed"  # read_committed clients: the last stable offset
ISOLATIONS = (ISOLATION_LOG_END, ISOLATION_HIGH_WATERMARK, ISOLATION_READ_COMMITTED)

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


# --- pure decisions -------------------------------------------------------------------------

def first_segment_reaching(largest_timestamps: ArrayLike, target: int) -> int:
    """Index of the first segment whose largest timestamp >= target, or -1."""
    lt = np.asarray(largest_timestamps, dtype=np.int64)
    hit = np.flatnonzero(lt >= target)
    return int(hit[0]) if hit.size else -1


def floor_segment(base_offsets: ArrayLike, offset: int) -> int:
    """Index of the segment with the largest base offset <= offset, or -1."""
    return int(np.searchsorted(np.asarray(base_offsets, dtype=np.int64), offset, side="right")) - 1


def first_record_at_or_after(offsets: np.ndarray, timestamps: np.ndarray, target: int, log_start_offset: int) -> int:
    """Index of the first record (in the given order) with timestamp >= target and offset >= the
    log start offset (FileRecords.searchForTimestamp's test), or -1."""
    hit = np.flatnonzero((timestamps >= target) & (offsets >= log_start_offset))
    return int(hit[0]) if hit.size else -1


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


def check_isolation(isolation: str) -> None:
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")

