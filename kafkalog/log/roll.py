"""Where a broker rolls a partition's log into segments while appending batches (UnifiedLog.maybeRoll,
LogSegment.shouldRoll), as a pure function over the batches' headers: which batches go to which
segment when records are written back into a log dir (restore, ``kafkalog.testing``).

Kafka rolls before appending when the active segment is not empty and any of these holds:

* ``size > segment.bytes - append size`` — the append would take it past ``segment.bytes``;
* ``append max timestamp - rolling-based timestamp > segment.ms - jitter``, where the rolling-based
  timestamp is the max timestamp of the segment's first batch (a segment whose first batch has no
  timestamp waits by wall clock from its creation: never, for a log written at once);
* the offset index or the time index is full: ``entries >= segment.index.bytes / 8`` (``/ 12``);
* the append's last offset cannot be stored relative to the base offset (``> base + 2^31 - 1``).

The new segment's base offset is the append's first offset (a v2 batch's base offset). Each batch is
one append here (as a follower appends fetched batches); a produce request of several batches rolls
only between requests. Index entries are counted by the rule both appends and recovery use: an entry
(and a time entry if the running max timestamp rose) is due when more than ``index.interval.bytes``
were appended since the last one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

DEFAULT_SEGMENT_BYTES = 1 << 30                  # log.segment.bytes
DEFAULT_SEGMENT_MS = 7 * 24 * 3_600_000          # log.roll.ms / log.roll.hours = 168
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024   # log.index.size.max.bytes
DEFAULT_INDEX_INTERVAL_BYTES = 4096              # log.index.interval.bytes
OFFSET_INDEX_ENTRY_BYTES = 8
TIME_INDEX_ENTRY_BYTES = 12
MAX_RELATIVE_OFFSET = (1 << 31) - 1
NO_TIMESTAMP = -1


@dataclass(frozen=True)
class RollConfig:
    """The topic configs that decide rolling (Kafka's names in the comments)."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES               # segment.bytes
    segment_ms: int = DEFAULT_SEGMENT_MS                     # segment.ms
    segment_jitter_ms: int = 0                               # segment.jitter.ms (the broker draws it at random)
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES   # segment.index.bytes
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES  # index.interval.bytes

    @property
    def max_offset_entries(self) -> int:
        return self.segment_index_bytes // OFFSET_INDEX_ENTRY_BYTES

    @property
    def max_time_entries(self) -> int:
        return self.segment_index_bytes // TIME_INDEX_ENTRY_BYTES

    @classmethod
    def from_log_config(cls, config) -> "RollConfig":
        """From a ``kafkalog.config.LogConfig`` (a topic's effective configs)."""
        def get(name, default):
            value = getattr(config, name, None)
            return default if value is None else int(value)
        return cls(segment_bytes=get("segment_bytes", DEFAULT_SEGMENT_BYTES),
                   segment_ms=get("segment_ms", DEFAULT_SEGMENT_MS),
                   segment_jitter_ms=get("segment_jitter_ms", 0),
                   segment_index_bytes=get("segment_index_bytes", DEFAULT_SEGMENT_INDEX_BYTES),
                   index_interval_bytes=get("index_interval_bytes", DEFAULT_INDEX_INTERVAL_BYTES))


@dataclass
class _Active:
    """The active segment as shouldRoll sees it."""

    first_batch: int
    base_offset: int
    size: int = 0
    rolling_timestamp: int = NO_TIMESTAMP
    offset_entries: int = 0
    time_entries: int = 0
    last_time_entry: int = NO_TIMESTAMP
    bytes_since_entry: int = 0
    max_timestamp: int = NO_TIMESTAMP


def should_roll(seg: _Active, config: RollConfig, *, append_size: int, append_max_timestamp: int,
                append_last_offset: int) -> bool:
    """LogSegment.shouldRoll for one append to the active segment ``seg``."""
    if seg.size == 0:
        return False
    if seg.size > config.segment_bytes - append_size:
        return True
    if seg.rolling_timestamp >= 0 and \
            append_max_timestamp - seg.rolling_timestamp > config.segment_ms - config.segment_jitter_ms:
        return True
    if seg.offset_entries >= config.max_offset_entries or seg.time_entries >= config.max_time_entries:
        return True
    return append_last_offset - seg.base_offset > MAX_RELATIVE_OFFSET


def plan_segments(base_offsets: Sequence[int], last_offsets: Sequence[int], sizes: Sequence[int],
                  max_timestamps: Sequence[int], config: RollConfig = RollConfig()) -> List[Tuple[int, int, int]]:
    """Batches (in offset order) split into segments as a broker appending them one by one rolls:
    a list of (first batch, end batch exclusive, segment base offset)."""
    n = len(sizes)
    out: List[Tuple[int, int, int]] = []
    if n == 0:
        return out
    seg = _Active(0, int(base_offsets[0]))
    for i in range(n):
        size, ts, last = int(sizes[i]), int(max_timestamps[i]), int(last_offsets[i])
        if should_roll(seg, config, append_size=size, append_max_timestamp=ts, append_last_offset=last):
            out.append((seg.first_batch, i, seg.base_offset))
            seg = _Active(i, int(base_offsets[i]))
        if seg.size == 0:
            seg.rolling_timestamp = ts
        seg.max_timestamp = max(seg.max_timestamp, ts)
        if seg.bytes_since_entry > config.index_interval_bytes:
            seg.offset_entries += 1
            if seg.max_timestamp > seg.last_time_entry:
                seg.time_entries += 1
                seg.last_time_entry = seg.max_timestamp
            seg.bytes_since_entry = 0
        seg.bytes_since_entry += size
        seg.size += size
    out.append((seg.first_batch, n, seg.base_offset))
    return out
