"""Which part of a compacted log is clean, dirty and cleanable, and whether the log is due for
cleaning (``LogCleanerManager.cleanableOffsets``, ``calculateCleanableBytes``, ``LogToClean``,
``maxCompactionDelay`` and the eligibility test of ``grabFilthiestCompactedLog``, Kafka's ``LogCleanerManager.java``).

Everything here is a pure function of plain numbers, so a Spark driver can evaluate it from a
listing of segment files without opening a ``.log``::

    segments        one SegmentInfo per segment, ascending base offset; the LAST is the active one
    firstDirty      = cleaner checkpoint, or logStartOffset when absent / below logStartOffset /
                      above logEndOffset (the last two force the checkpoint to be rewritten)
    uncleanable     = min(lastStableOffset = min(firstUnstableOffset, highWatermark),
                          active segment base,
                          base of the first non-active segment from firstDirty on whose
                          largestTimestamp > now - min.compaction.lag.ms   [only if lag > 0])
                      then max(firstDirty, that)
    upperBound      = base offset of the segment holding ``uncleanable`` if it is non-active,
                      else the active segment's base (the cleaning round's segment-aligned end)
    cleanableBytes  = .log bytes of the segments overlapping [min(firstDirty, upperBound), upperBound)
    cleanBytes      = .log bytes of the segments whose base < firstDirty
    ratio           = cleanableBytes / (cleanBytes + cleanableBytes)
    due (max lag)   = earliest positive first-batch timestamp of the non-active segments from
                      firstDirty on is < now - max.compaction.lag.ms
    cleanable       iff total > 0 and ((due and cleanableBytes > 0) or ratio > min.cleanable.dirty.ratio)

Unlike a broker, which cleans only the "filthiest" log per round, a job cleans every eligible
partition; the strict ``>`` of the ratio rule is kept.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Sequence

from kafkalog.config import LogConfig
from kafkalog.log.segment import SegmentInfo


class NotCleanableReason(str, enum.Enum):
    """Why a partition is not cleaned this round (for the report)."""

    NOT_COMPACTED = "cleanup.policy does not contain compact"
    EMPTY_LOG = "the log holds no bytes (totalBytes = 0)"
    NOTHING_CLEANABLE = "no cleanable bytes below the first uncleanable offset"
    RATIO_TOO_LOW = "dirty ratio is not above min.cleanable.dirty.ratio and max.compaction.lag.ms has not passed"


@dataclass(frozen=True)
class CleanableOffsets:
    """The outcome of ``LogCleanerManager.cleanableOffsets`` and the dirty ratio for one partition."""

    first_dirty_offset: int
    first_uncleanable_dirty_offset: int     # before rounding to a segment boundary
    upper_bound_offset: int                 # segment-aligned first uncleanable offset: the round's end
    force_update_checkpoint: bool           # the checkpoint was below logStart or above logEnd
    clean_bytes: int
    cleanable_bytes: int
    total_bytes: int
    cleanable_ratio: float
    max_compaction_delay_ms: int
    need_compaction_now: bool
    cleanable: bool
    reason: Optional[NotCleanableReason]    # None when cleanable

    def describe(self) -> str:
        state = "cleanable" if self.cleanable else f"not cleanable: {self.reason.value}"
        return (f"dirty [{self.first_dirty_offset}, {self.upper_bound_offset}), {self.cleanable_bytes}/"
                f"{self.total_bytes} bytes dirty (ratio {self.cleanable_ratio:.4f}), "
                f"max-lag delay {self.max_compaction_delay_ms} ms: {state}")


def _floor_index(segments: Sequence[SegmentInfo], offset: int) -> int:
    """Index of the segment holding ``offset`` (the last with base <= offset), or -1."""
    found = -1
    for i, s in enumerate(segments):
        if s.base_offset <= offset:
            found = i
        else:
            break
    return found


def _overlapping(segments: Sequence[SegmentInfo], start: int, end: int) -> list:
    """``LogSegments.values(from, to)``: segments overlapping [start, end) (floor(start) onward)."""
    if start >= end:
        return []
    first = max(_floor_index(segments, start), 0)
    return [s for s in segments[first:] if s.base_offset < end]


def _non_active_from(segments: Sequence[SegmentInfo], start: int) -> list:
    active = segments[-1]
    if start > active.base_offset:
        return []
    return _overlapping(list(segments[:-1]) + [active], start, active.base_offset)


def last_stable_offset(high_watermark: int, first_unstable_offset: Optional[int]) -> int:
    """``UnifiedLog.lastStableOffset``: the first open transaction's offset if below the HW."""
    if first_unstable_offset is not None and first_unstable_offset < high_watermark:
        return first_unstable_offset
    return high_watermark


def cleanable_offsets(*, segments: Sequence[SegmentInfo], log_start_offset: int, log_end_offset: int,
                      checkpoint_offset: Optional[int], high_watermark: int, first_unstable_offset: Optional[int],
                      now_ms: int, config: LogConfig) -> CleanableOffsets:
    """Evaluate ``LogCleanerManager.cleanableOffsets`` and the dirty ratio for one partition.
    ``segments`` must be non-empty (a broker always has an active segment); the last one is the active
    segment."""
    if not segments:
        raise ValueError("a log has at least one (active) segment")
    segments = list(segments)
    checkpoint = log_start_offset if checkpoint_offset is None else checkpoint_offset
    if checkpoint < log_start_offset or checkpoint > log_end_offset:
        first_dirty, force = log_start_offset, True
    else:
        first_dirty, force = checkpoint, False

    active = segments[-1]
    candidates = [last_stable_offset(high_watermark, first_unstable_offset), active.base_offset]
    min_lag = max(config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for s in _non_active_from(segments, first_dirty):
            if s.largest_timestamp_ms > now_ms - min_lag:
                candidates.append(s.base_offset)
                break
    uncleanable = max(first_dirty, min(candidates))

    # calculateCleanableBytes: round down to a segment boundary.
    non_active = _non_active_from(segments, uncleanable)
    upper_bound = non_active[0].base_offset if non_active else active.base_offset
    cleanable_bytes = sum(s.size for s in _overlapping(segments, min(first_dirty, upper_bound), upper_bound))
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    total = clean_bytes + cleanable_bytes
    ratio = cleanable_bytes / total if total else 0.0

    # maxCompactionDelay
    firsts = [s.first_batch_timestamp_ms for s in _non_active_from(segments, first_dirty)
              if s.first_batch_timestamp_ms > 0]
    earliest = min(firsts) if firsts else None
    clean_until = now_ms - max(config.max_compaction_lag_ms, 0)
    delay = clean_until - earliest if earliest is not None and earliest < clean_until else 0
    need_now = delay > 0

    reason: Optional[NotCleanableReason] = None
    if not config.compact:
        reason = NotCleanableReason.NOT_COMPACTED
    elif total == 0:
        reason = NotCleanableReason.EMPTY_LOG
    elif cleanable_bytes == 0 or upper_bound <= first_dirty:
        reason = NotCleanableReason.NOTHING_CLEANABLE
    elif not ((need_now and cleanable_bytes > 0) or ratio > config.min_cleanable_dirty_ratio):
        reason = NotCleanableReason.RATIO_TOO_LOW
    return CleanableOffsets(first_dirty, uncleanable, upper_bound, force, clean_bytes, cleanable_bytes, total, ratio,
                            delay, need_now, reason is None, reason)
