"""The compiled engine's ``IndexAppender.append_batches``: one numba loop over a window of batches
instead of one Python iteration per batch. Same rules, same state and same failures as the reference
loop in ``builder.py`` (tests/index/test_append_accel.py holds the two paths to each other):
Kafka's ``LogSegment.append``
(storage/src/main/java/org/apache/kafka/storage/internals/log/LogSegment.java) — per batch, the
running max timestamp takes (its maxTimestamp, its lastOffset) when larger; when more than
index.interval.bytes were appended since the last entry, an offset-index entry (lastOffset, position)
and the running max offered to the time index (``TimeIndex.maybeAppend``, storage/src/main/java/org/
apache/kafka/storage/internals/log/TimeIndex.java); ``OffsetIndex.append`` refuses an offset not above
the last entry's, ``TimeIndex.maybeAppend`` an offset below the last entry's.

The kernel does not raise: it stops at the failing batch and returns a status, so the caller commits
what was appended up to there and raises the reference path's own error (its message and position).
Kernels live at module level so numba's on-disk cache is hit in new processes.
"""
from __future__ import annotations

import os
from typing import Tuple

import numpy as np
from numba import njit

from kafkalog.format.record_batch import NO_TIMESTAMP

# numba caches beside the source file; a module imported from a zip has none: compile then.
_CACHE = os.path.isfile(__file__)

# status of append_batches_kernel
APPEND_OK = 0
APPEND_BAD_BATCH = 1       # size <= 0 or position < 0 (ValueError)
APPEND_OVERFLOW = 2        # last offset outside base .. base + 2**31 - 1 (OffsetOverflowError)
APPEND_OFFSET_ORDER = 3    # an offset-index entry not above the last one (CorruptIndexError)
APPEND_TIME_ORDER = 4      # a time-index entry's offset below the last one (CorruptIndexError)


@njit(cache=_CACHE, nogil=True)
def append_batches_kernel(positions: np.ndarray, sizes: np.ndarray, last_offsets: np.ndarray,
                          max_timestamps: np.ndarray, n: int, interval: int, low: int, high: int,
                          since: int, max_ts: int, offset_of_max_ts: int,
                          has_offset_entry: bool, last_entry_offset: int,
                          has_time_entry: bool, last_time_ts: int, last_time_offset: int, out: np.ndarray,
                          ) -> Tuple[int, int, int, int, int, int, int]:
    """Append batches 0..n-1 (int64 columns) to the state (``since`` bytes since the last entry, the
    running max timestamp and its offset, the last offset/time entries when there are some); new
    offset entries go to ``out`` rows 0 (offset) and 1 (position), new time entries to rows 2
    (timestamp) and 3 (offset); int64, 4 rows of at least n.

    Returns (status, batch it stopped at (n when OK), offset entries written, time entries written,
    since, max_ts, offset_of_max_ts) — the state as the reference loop leaves it when it raises at
    that batch: ``since`` of the batches before it, the max timestamp updated by it when the failure
    is an index entry's, and the offset entry of a time-entry failure already written."""
    k = 0
    t = 0
    for i in range(n):
        position = positions[i]
        size = sizes[i]
        last = last_offsets[i]
        ts = max_timestamps[i]
        if size <= 0 or position < 0:
            return APPEND_BAD_BATCH, i, k, t, since, max_ts, offset_of_max_ts
        if last < low or last > high:
            return APPEND_OVERFLOW, i, k, t, since, max_ts, offset_of_max_ts
        if ts > max_ts:
            max_ts = ts
            offset_of_max_ts = last
        if since > interval:
            if has_offset_entry and last <= last_entry_offset:
                return APPEND_OFFSET_ORDER, i, k, t, since, max_ts, offset_of_max_ts
            out[0, k] = last
            out[1, k] = position
            k += 1
            has_offset_entry = True
            last_entry_offset = last
            if has_time_entry:
                if offset_of_max_ts < last_time_offset:
                    return APPEND_TIME_ORDER, i, k, t, since, max_ts, offset_of_max_ts
                due = max_ts > last_time_ts
            else:
                due = max_ts > NO_TIMESTAMP
            if due:
                out[2, t] = max_ts
                out[3, t] = offset_of_max_ts
                t += 1
                has_time_entry = True
                last_time_ts = max_ts
                last_time_offset = offset_of_max_ts
            since = 0
        since += size
    return APPEND_OK, n, k, t, since, max_ts, offset_of_max_ts


__all__ = ["APPEND_BAD_BATCH", "APPEND_OFFSET_ORDER", "APPEND_OK", "APPEND_OVERFLOW", "APPEND_TIME_ORDER",
           "append_batches_kernel"]
