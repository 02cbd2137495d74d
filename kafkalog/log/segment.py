"""One segment of a partition's log as every decision reads it (Kafka's ``LogSegment``, described
rather than opened), and the segment rules written once: ``maxTimestampAndOffsetSoFar`` and
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

from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple

import numpy as np

from kafkalog.log.logdir import SegmentFiles

NO_TIMESTAMP = -1                  # RecordBatch.NO_TIMESTAMP
FROM_TIMEINDEX, FROM_BATCHES, FROM_MTIME = "timeindex", "batches", "mtime"


# --- data structures -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LogSegment:
    """What retention, the cleaner's plan, the catalog and lookups read of one segment: plain
    numbers, so a driver can decide from a listing without opening a ``.log``."""

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


def largest_timestamp(max_timestamp_so_far: int, mtime_ms: int) -> int:
    """LogSegment.largestTimestamp: the segment's max timestamp if >= 0, else the .log mtime."""
    return max_timestamp_so_far if max_timestamp_so_far >= 0 else mtime_ms


def largest_timestamp_of(max_timestamp_so_far: int, mtime_ms: int, source: str) -> Tuple[int, str]:
    """(largestTimestamp, the rule that gave it): ``source`` when the max timestamp is >= 0, else mtime."""
    if max_timestamp_so_far >= 0:
        return max_timestamp_so_far, source
    return mtime_ms, FROM_MTIME


def active_max_timestamp(max_timestamps: Sequence[int]) -> int:
    """The active segment's maxTimestampSoFar from its batch headers' maxTimestamp (-1: none)."""
    values = np.asarray(max_timestamps, dtype=np.int64)
    return running_max((NO_TIMESTAMP, 0), values, np.zeros(len(values), dtype=np.int64))[0]


__all__ = ["FROM_BATCHES", "FROM_MTIME", "FROM_TIMEINDEX", "NO_TIMESTAMP", "LogSegment", "active_max_timestamp",
           "largest_timestamp", "largest_timestamp_of", "running_max"]
