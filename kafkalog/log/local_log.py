"""A partition folder loaded as a broker loads it, without recovering anything (Kafka's ``LocalLog``
as ``LogLoader`` builds it): its :class:`~kafkalog.log.segment.SegmentInfo` list and its offsets, with
the offset rules written once; and the partition-level reads over opened segments (the aborted
transactions of their ``.txnindex`` files, leftovers of an interrupted compaction).

Offset rules (``LogLoader.load``, ``UnifiedLog.deletableSegments``, ``LogSegment.largestTimestamp``,
``ReplicaManager``'s high-watermark checkpoint, ``OffsetCheckpointFile.java``):

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
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from kafkalog.checkpoint.offset import read_offset_checkpoint
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafkalog.errors import KafkalogError
from kafkalog.format.file_records import scan_batches
from kafkalog.index.transaction_index import AbortedTxn
from kafkalog.log.logdir import PartitionDir, SegmentFiles, scan_partition_dir
from kafkalog.fs.names import LIVE
from kafkalog.log.segment import FROM_BATCHES, FROM_MTIME, FROM_TIMEINDEX, SegmentInfo, LogSegment, active_max_timestamp, index_file_bytes, largest_timestamp_of, rolled_max_timestamp
from kafkalog.format.record_batch import NO_TIMESTAMP
from kafkalog.topic_partition import TopicPartition
from kafkalog.fs import filesystem

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
    """A partition folder loaded as a broker would load it (without recovering anything): its
    ``segments``, ``log_start_offset``, ``log_end_offset``, the checkpointed high watermark, and the
    ``problems`` a broker would report. Made by :func:`load_partition_path`.

    Example::

        import kafkalog
        log = kafkalog.load_partition_path("logs/orders-0")
        print(log.log_start_offset, log.log_end_offset, log.high_watermark(), log.size)
    """

    log_dir: Optional[Path]
    path: Path
    topic: str
    partition: int
    kind: str
    segments: list[SegmentInfo]
    log_start_offset: int
    log_end_offset: int
    high_watermark_checkpoint: Optional[int]        # the raw checkpoint entry, None when absent
    leftovers: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    dir_listing: Optional[PartitionDir] = field(default=None, repr=False)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def high_watermark(self, missing: str = HW_MISSING_ZERO) -> int:
        """The high watermark a broker would load (:func:`high_watermark`)."""
        return high_watermark(self.high_watermark_checkpoint, log_start_offset=self.log_start_offset,
                              log_end_offset=self.log_end_offset, missing=missing)


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
    """largestTimestamp of a rolled segment (an unreadable .timeindex is a problem and counts as none)."""
    try:
        so_far = rolled_max_timestamp(seg)
    except KafkalogError as exc:
        problems.append(f"{exc}; its largest timestamp falls back to the .log mtime")
        so_far = NO_TIMESTAMP
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
    infos: list[SegmentInfo] = []
    segments = partition_dir.segments
    log_end_offset = segments[-1].base_offset if segments else 0
    for i, seg in enumerate(segments):
        stat = filesystem.stat(seg.log)
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
        infos.append(SegmentInfo(
            base_offset=seg.base_offset, size=stat.st_size, largest_timestamp_ms=largest,
            largest_timestamp_source=source, mtime_ms=mtime_ms,
            next_base_offset=None if active else segments[i + 1].base_offset, first_batch_timestamp_ms=first_ts,
            offset_index_bytes=index_file_bytes(seg.index), time_index_bytes=index_file_bytes(seg.timeindex), files=seg))
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
    """List and load one partition folder as a broker loads it, reading nothing but names, sizes
    and checkpoints. ``path``: the partition folder; ``log_dir``: its log dir (default: the parent
    folder), whose checkpoint files hold the log start offset and high watermark; ``checkpoints``: those
    files already read (``read_log_dir_checkpoints``), when loading many partitions.

    Example::

        import kafkalog
        log = kafkalog.load_partition_path("logs/orders-0")
        print([s.base_offset for s in log.segments], log.problems)
    """
    path = Path(path)
    log_dir = path.parent if log_dir is None else Path(log_dir)
    if checkpoints is None:
        checkpoints = read_log_dir_checkpoints(log_dir)
    state = load_partition(scan_partition_dir(path, log_dir=log_dir), checkpoints)
    state.problems[:0] = list(checkpoints.problems)
    return state


# --- a round's transactions -----------------------------------------------------------------------

def pending_swap_files(partition_dir) -> List[str]:
    """``.cleaned``/``.swap`` files of an interrupted compaction, which a broker's startup finishes or
    drops (``LogLoader.load``) and which must be dealt with before another round."""
    return [p.name for p in scan_partition_dir(partition_dir).leftovers
            if p.name.endswith((".cleaned", ".swap"))]


def collect_aborted_transactions(segments: Sequence[LogSegment], start_offset: int, upper_bound: int,
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


__all__ = ["HW_MISSING_CHOICES", "HW_MISSING_LOG_END", "HW_MISSING_ZERO", "LocalLog", "LogDirCheckpoints",
           "collect_aborted_transactions", "high_watermark", "load_partition", "load_partition_path", "log_start_offset",
           "pending_swap_files", "read_log_dir_checkpoints"]
