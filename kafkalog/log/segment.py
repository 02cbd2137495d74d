"""One segment of a partition's log: :class:`LogSegment` is Kafka's ``LogSegment`` (the segment
opened, whose files are read when first needed and kept: lookups and the cleaner share it);
:class:`SegmentInfo` is the frozen numbers every decision reads of one (Kafka has no such type: its
retention and cleaner read them off the ``LogSegment`` itself, which a driver deciding from a listing
cannot open); and the segment rules written once, ``maxTimestampAndOffsetSoFar`` and
``largestTimestamp``.

Kafka's rules (``LogSegment``, ``LogLoader``):

* ``maxTimestampSoFar`` of a segment is its running max over the appended batches' maxTimestamp
  (a batch replaces the running (timestamp, offset) only when strictly greater, so on ties the
  earliest batch). A segment loaded from disk starts from the last ``.timeindex`` entry; a
  broker's clean shutdown writes the running max as that entry (``LogSegment.close``), so for a
  ROLLED segment the last ``.timeindex`` entry is the value. For the ACTIVE segment a running
  broker holds the running max in memory (its time index, written every index interval, lags),
  which is the running max over its batch headers.
* ``largestTimestamp`` = ``maxTimestampSoFar`` when >= 0, else the ``.log`` file's mtime in ms
  (``File.lastModified``: truncated). ``largest_timestamp_source`` says which applied:
  ``timeindex`` (a rolled segment's last entry), ``batches`` (the active segment's headers) or
  ``mtime``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from kafkalog.format.file_records import ScanResult, scan_batches
from kafkalog.format.record_batch import MAGIC_VALUE_V2
from kafkalog.index.offset_index import OffsetIndex
from kafkalog.index.time_index import TimeIndex, read_time_index
from kafkalog.index.transaction_index import TransactionIndex
from kafkalog.log.logdir import SegmentFiles
from kafkalog.format.record_batch import NO_TIMESTAMP
from kafkalog.fs import filesystem

FROM_TIMEINDEX, FROM_BATCHES, FROM_MTIME = "timeindex", "batches", "mtime"


# --- data structures -----------------------------------------------------------------------------

@dataclass(frozen=True)
class SegmentInfo:
    """What retention, the cleaner's plan, the catalog and lookups read of one segment (the numbers
    Kafka reads off its ``LogSegment``): plain numbers, so a driver can decide from a listing without
    opening a ``.log``."""

    base_offset: int
    size: int                                        # .log bytes (LogSegment.size)
    largest_timestamp_ms: int = NO_TIMESTAMP         # largestTimestamp (see the module docstring)
    largest_timestamp_source: str = FROM_MTIME       # timeindex / batches / mtime
    mtime_ms: int = 0                                # the .log's mtime, ms (truncated)
    next_base_offset: Optional[int] = None           # the following segment's base; None: the active one
    first_batch_timestamp_ms: int = NO_TIMESTAMP     # maxTimestamp of the first batch (-1: none or unknown)
    offset_index_bytes: int = 0                      # .index length, as Kafka counts entries
    time_index_bytes: int = 0                        # .timeindex length
    files: Optional[SegmentFiles] = field(default=None, compare=False, repr=False)

    @property
    def is_active(self) -> bool:
        return self.next_base_offset is None

    def on_disk(self) -> SegmentFiles:
        """The files this segment was listed from. A segment built for a decision alone (a model, the
        empty segment a roll would create) has none: asking for them is a programming error."""
        if self.files is None:
            raise ValueError(f"segment {self.base_offset} was not listed from disk: it has no files")
        return self.files


@dataclass
class LogSegment:
    """One segment opened (Kafka's ``LogSegment``): its :class:`SegmentInfo` and what has been read of
    it, each part loaded when first needed and kept. How a part is filled is the reader's policy: lookups rebuild an index that
    fails its checks from the ``.log``, the cleaner refuses a corrupt segment (``scan`` checks CRCs)."""

    segment: SegmentInfo
    mtime_ns: int = 0
    fd: Optional[filesystem.RangeFile] = None          # the .log opened for positional reads (``open``): os.pread, or ranged GETs
    offset_index: Optional[OffsetIndex] = None
    time_index: Optional[TimeIndex] = None
    time_index_from_file: bool = False                   # False: missing (taken as empty) or rebuilt
    last_time_entry: Optional[Tuple[int, int]] = None    # the time index's last (ts, offset), or (-1, base)
    rebuilt: bool = False                                # indexes rebuilt from the .log (no second retry)
    notes: Tuple[str, ...] = ()                          # fallbacks taken while loading, for the answer
    txn_index: Optional[TransactionIndex] = field(default=None, repr=False)
    _scan: Optional[ScanResult] = field(default=None, repr=False)

    @property
    def base_offset(self) -> int:
        return self.segment.base_offset

    @property
    def size(self) -> int:
        return self.segment.size

    @property
    def mtime_ms(self) -> int:
        return self.segment.mtime_ms

    @property
    def files(self) -> SegmentFiles:
        return self.segment.on_disk()

    @property
    def log_path(self) -> Path:
        return Path(self.files.log)

    @property
    def index_path(self) -> Optional[Path]:
        return self.files.index

    def open(self) -> filesystem.RangeFile:
        """The .log opened for reads at positions (opened once)."""
        if self.fd is None:
            self.fd = filesystem.RangeFile(self.files.log)
        return self.fd

    def close(self) -> None:
        if self.fd is not None:
            self.fd.close()
            self.fd = None

    def scan(self) -> ScanResult:
        """The batch walk of the whole .log, every CRC checked (once, then cached)."""
        if self._scan is None:
            self._scan = scan_batches(self.log_path, verify_crc=True, on_corrupt="raise")
        return self._scan

    @property
    def next_offset(self) -> int:
        """LogSegment.readNextOffset: the last batch's lastOffset + 1, else the base offset."""
        h = self.scan().headers
        return int(h.lastOffset[-1]) + 1 if len(h) else self.base_offset

    @property
    def has_legacy(self) -> bool:
        """Whether a v0/v1 message set is among the batches."""
        h = self.scan().headers
        return bool(len(h)) and int(np.min(h.magic)) < MAGIC_VALUE_V2


# --- rules ---------------------------------------------------------------------------------------

def running_max(start: Tuple[int, int], max_timestamps: np.ndarray, last_offsets: np.ndarray) -> Tuple[int, int]:
    """LogSegment's maxTimestampAndOffsetSoFar after appending these batches: a batch replaces the
    running (timestamp, offset) only when its maxTimestamp is strictly greater."""
    ts, off = start
    if len(max_timestamps):
        i = int(np.argmax(max_timestamps))      # first occurrence of the max
        if int(max_timestamps[i]) > ts:
            ts, off = int(max_timestamps[i]), int(last_offsets[i])
    return ts, off


def rolled_max_timestamp(files: SegmentFiles) -> int:
    """maxTimestampSoFar of a rolled segment as a broker loads it: the last ``.timeindex`` entry's
    timestamp, -1 when the file is missing or empty. Raises KafkalogError when it cannot be read."""
    if files.timeindex is None:
        return NO_TIMESTAMP
    last = read_time_index(files.timeindex, base_offset=files.base_offset).last_entry()
    return NO_TIMESTAMP if last is None else last[0]


def index_file_bytes(path: Optional[os.PathLike]) -> int:
    """An index file's length, which is how Kafka counts its entries (0 when it is missing)."""
    try:
        return filesystem.stat(path).st_size if path is not None else 0
    except FileNotFoundError:
        return 0


def largest_timestamp(max_timestamp_so_far: int, mtime_ms: int) -> int:
    """LogSegment.largestTimestamp: the segment's max timestamp if >= 0, else the .log mtime."""
    return max_timestamp_so_far if max_timestamp_so_far >= 0 else mtime_ms


def largest_timestamp_of(max_timestamp_so_far: int, mtime_ms: int, source: str) -> Tuple[int, str]:
    """(largestTimestamp, the rule that gave it): ``source`` when the max timestamp is >= 0, else mtime."""
    if max_timestamp_so_far >= 0:
        return max_timestamp_so_far, source
    return mtime_ms, FROM_MTIME


def active_max_timestamp(max_timestamps: ArrayLike) -> int:
    """The active segment's maxTimestampSoFar from its batch headers' maxTimestamp (-1: none)."""
    values = np.asarray(max_timestamps, dtype=np.int64)
    return running_max((NO_TIMESTAMP, 0), values, np.zeros(len(values), dtype=np.int64))[0]


__all__ = ["FROM_BATCHES", "FROM_MTIME", "FROM_TIMEINDEX", "NO_TIMESTAMP", "LogSegment", "SegmentInfo", "active_max_timestamp", "index_file_bytes",
           "largest_timestamp", "largest_timestamp_of", "rolled_max_timestamp",
           "running_max"]
