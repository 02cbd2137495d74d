"""The segment catalog: one row per segment of a partition folder, with what retention, compaction and
lookups decide on — sizes, offsets, the segment's largest timestamp by Kafka's rule — plus the
partition's log start offset, high watermark and log end offset, as a broker would load them.

Kafka counterparts: ``LogLoader.load`` (log start offset, segments), ``LogSegment.largestTimestamp``,
``LogSegment.readNextOffset`` (log end offset), ``ReplicaManager`` high-watermark checkpoint.

Rules (spec §3.3, §3.4, §6.2, §6.5):

* log start offset = max(``log-start-offset-checkpoint`` entry, first segment base offset); a missing
  entry means the first segment's base offset.
* high watermark = ``replication-offset-checkpoint`` entry (``high_watermark_checkpoint`` keeps the raw
  value, None when absent); deciding what to do without one is retention's choice, not the catalog's.
* log end offset = the last valid batch's last offset + 1 in the last (active) segment, else its base
  offset. A torn tail is reported; the log end offset is that of the valid prefix, which is where a
  broker's recovery would truncate.
* largest timestamp of a rolled segment = its last ``.timeindex`` entry when that is >= 0, else the
  ``.log`` file's mtime (``LogSegment.largestTimestamp``). For the ACTIVE segment a running broker holds
  the max batch timestamp in memory (and its time index, written every 4 KiB, lags); the catalog reads
  the batch headers of the active segment and takes their max, falling back to mtime when no batch has
  a timestamp. ``largest_timestamp_source`` says which rule applied: ``timeindex``, ``batches`` or
  ``mtime``. (A copied log dir keeps Kafka's answer only if the copy kept the mtimes.)

Rows of ``kind`` ``leftover`` list files a broker removes or completes at startup (``.deleted``,
``.cleaned``, ``.swap``, orphan index files); ``problems`` collects what was odd about the partition
(each naming the file and byte position), never raising for one partition.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional

import pyarrow as pa

from kafkalog.checkpoint import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, read_offset_checkpoint
from kafkalog.errors import KafkalogError
from kafkalog.format.file_records import scan_batches
from kafkalog.index.time_index import read_time_index
from kafkalog.log import filesystem
from kafkalog.log.logdir import (LIVE, PartitionDir, SegmentFiles, parse_segment_file_name, scan_partition_dir)

SEGMENT, LEFTOVER, ERROR = "segment", "leftover", "error"
FROM_TIMEINDEX, FROM_BATCHES, FROM_MTIME = "timeindex", "batches", "mtime"

CATALOG_SCHEMA = pa.schema([
    pa.field("log_dir", pa.string()),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("partition_dir", pa.string(), nullable=False),
    pa.field("partition_kind", pa.string(), nullable=False),      # live / delete / future / stray
    pa.field("kind", pa.string(), nullable=False),                # segment / leftover / error
    pa.field("base_offset", pa.int64()),
    pa.field("next_base_offset", pa.int64()),                     # null for the active segment
    pa.field("size", pa.int64()),                                 # .log bytes (leftover: all its files)
    pa.field("largest_timestamp", pa.timestamp("ms", tz="UTC")),
    pa.field("largest_timestamp_ms", pa.int64()),
    pa.field("largest_timestamp_source", pa.string()),
    pa.field("log_mtime_ms", pa.int64()),
    pa.field("has_index", pa.bool_()),
    pa.field("has_timeindex", pa.bool_()),
    pa.field("has_txnindex", pa.bool_()),
    pa.field("has_snapshot", pa.bool_()),
    pa.field("is_active", pa.bool_()),
    pa.field("files", pa.list_(pa.string())),                     # file names of this row
    pa.field("log_start_offset", pa.int64()),
    pa.field("log_end_offset", pa.int64()),
    pa.field("high_watermark_checkpoint", pa.int64()),            # raw checkpoint value, null if absent
    pa.field("problems", pa.list_(pa.string())),                  # partition-level, on every row
])


# --- data structures -----------------------------------------------------------------------------

@dataclass(frozen=True)
class SegmentInfo:
    """One segment as the decisions see it."""

    base_offset: int
    size: int
    largest_timestamp_ms: int
    largest_timestamp_source: str
    log_mtime_ms: int
    next_base_offset: Optional[int] = None          # None for the active segment
    files: SegmentFiles = field(default=None, compare=False, repr=False)   # type: ignore[assignment]

    @property
    def is_active(self) -> bool:
        return self.next_base_offset is None


@dataclass
class PartitionState:
    """A partition folder loaded as a broker would load it (without recovering anything)."""

    log_dir: Optional[Path]
    path: Path
    topic: str
    partition: int
    kind: str
    segments: list[SegmentInfo]
    log_start_offset: int
    log_end_offset: int
    high_watermark_checkpoint: Optional[int]
    leftovers: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    dir_listing: Optional[PartitionDir] = field(default=None, repr=False)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)


@dataclass(frozen=True)
class LogDirCheckpoints:
    """The log-dir checkpoints a partition's state depends on (read once per log dir)."""

    log_start_offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    high_watermarks: Mapping[tuple[str, int], int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


# --- reading ------------------------------------------------------------------------------------

def read_log_dir_checkpoints(log_dir: Optional[os.PathLike | str]) -> LogDirCheckpoints:
    """Read ``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` of a log dir. A
    malformed file is a problem (the broker would refuse it) and reads as empty."""
    if log_dir is None:
        return LogDirCheckpoints()
    problems = []
    values = []
    for name in (LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        try:
            values.append(read_offset_checkpoint(Path(log_dir) / name))
        except KafkalogError as exc:
            problems.append(str(exc))
            values.append({})
        except OSError as exc:
            problems.append(f"{Path(log_dir) / name}: cannot read ({exc.strerror or exc})")
            values.append({})
    return LogDirCheckpoints(values[0], values[1], tuple(problems))


def _mtime_ms(path: Path) -> int:
    return filesystem.stat(path).st_mtime_ns // 1_000_000


def _rolled_largest_timestamp(seg: SegmentFiles, mtime_ms: int, problems: list[str]) -> tuple[int, str]:
    """``LogSegment.largestTimestamp`` for a segment this process has not appended to."""
    if seg.timeindex is not None:
        try:
            last = read_time_index(seg.timeindex, base_offset=seg.base_offset).last_entry()
        except KafkalogError as exc:
            problems.append(f"{exc}; its largest timestamp falls back to the .log mtime")
            last = None
        if last is not None and last[0] >= 0:
            return last[0], FROM_TIMEINDEX
    return mtime_ms, FROM_MTIME


def _active_tail(seg: SegmentFiles, mtime_ms: int, problems: list[str]) -> tuple[int, str, int]:
    """(largest timestamp, its source, next offset) of the active segment from its batch headers."""
    result = scan_batches(seg.log, verify_crc=False, on_corrupt="stop")
    if result.error is not None:
        problems.append(f"{result.error}; the log end offset is that of the "
                        f"{result.valid_bytes} valid bytes, where a broker's recovery would truncate")
    batches = result.batches
    if batches.num_rows == 0:
        return mtime_ms, FROM_MTIME, seg.base_offset
    max_ts = int(pa.compute.max(batches.column("maxTimestamp")).as_py())
    next_offset = int(batches.column("lastOffset")[batches.num_rows - 1].as_py()) + 1
    if max_ts >= 0:
        return max_ts, FROM_BATCHES, next_offset
    return mtime_ms, FROM_MTIME, next_offset


def load_partition(partition_dir: PartitionDir, checkpoints: LogDirCheckpoints) -> PartitionState:
    """Load one listed partition folder into a PartitionState. Per-file trouble becomes a problem
    line; only an unreadable folder raises (OSError)."""
    problems = list(partition_dir.problems)
    infos: list[SegmentInfo] = []
    segments = partition_dir.segments
    log_end_offset = segments[-1].base_offset if segments else 0
    for i, seg in enumerate(segments):
        stat = filesystem.stat(seg.log)
        mtime_ms = stat.st_mtime_ns // 1_000_000
        active = i == len(segments) - 1
        if active:
            try:
                largest, source, log_end_offset = _active_tail(seg, mtime_ms, problems)
            except KafkalogError as exc:
                problems.append(str(exc))
                largest, source = mtime_ms, FROM_MTIME
        else:
            largest, source = _rolled_largest_timestamp(seg, mtime_ms, problems)
        infos.append(SegmentInfo(
            base_offset=seg.base_offset, size=stat.st_size, largest_timestamp_ms=largest,
            largest_timestamp_source=source, log_mtime_ms=mtime_ms,
            next_base_offset=None if active else segments[i + 1].base_offset, files=seg))
    key = (partition_dir.topic, partition_dir.partition)
    first_base = segments[0].base_offset if segments else 0
    checkpointed = checkpoints.log_start_offsets.get(key) if partition_dir.kind == LIVE else None
    log_start = max(checkpointed, first_base) if checkpointed is not None else first_base
    if log_end_offset < log_start and segments:
        problems.append(f"{partition_dir.path}: log end offset {log_end_offset} is below the checkpointed log start "
                        f"offset {log_start}; a broker would delete every segment of this partition at startup")
    hw = checkpoints.high_watermarks.get(key) if partition_dir.kind == LIVE else None
    return PartitionState(
        log_dir=partition_dir.log_dir, path=partition_dir.path, topic=partition_dir.topic,
        partition=partition_dir.partition, kind=partition_dir.kind, segments=infos,
        log_start_offset=log_start, log_end_offset=log_end_offset, high_watermark_checkpoint=hw,
        leftovers=list(partition_dir.leftovers) + list(partition_dir.stray_snapshots), problems=problems,
        dir_listing=partition_dir)


def load_partition_path(path: os.PathLike | str, *, log_dir: Optional[os.PathLike | str] = None,
                        checkpoints: Optional[LogDirCheckpoints] = None) -> PartitionState:
    """List and load one partition folder (``log_dir`` defaults to its parent folder)."""
    path = Path(path)
    log_dir = path.parent if log_dir is None else Path(log_dir)
    if checkpoints is None:
        checkpoints = read_log_dir_checkpoints(log_dir)
    state = load_partition(scan_partition_dir(path, log_dir=log_dir), checkpoints)
    state.problems[:0] = list(checkpoints.problems)
    return state


# --- Arrow ---------------------------------------------------------------------------------------

def catalog_rows(state: PartitionState) -> list[dict]:
    """The catalog rows of one partition (segments, then leftovers grouped by base offset)."""
    common = dict(
        log_dir=None if state.log_dir is None else os.fspath(state.log_dir), topic=state.topic,
        partition=state.partition, partition_dir=os.fspath(state.path), partition_kind=state.kind,
        log_start_offset=state.log_start_offset, log_end_offset=state.log_end_offset,
        high_watermark_checkpoint=state.high_watermark_checkpoint, problems=list(state.problems))
    rows = []
    for seg in state.segments:
        files = seg.files
        rows.append(dict(
            common, kind=SEGMENT, base_offset=seg.base_offset, next_base_offset=seg.next_base_offset,
            size=seg.size, largest_timestamp=seg.largest_timestamp_ms, largest_timestamp_ms=seg.largest_timestamp_ms,
            largest_timestamp_source=seg.largest_timestamp_source, log_mtime_ms=seg.log_mtime_ms,
            has_index=files.index is not None, has_timeindex=files.timeindex is not None,
            has_txnindex=files.txnindex is not None, has_snapshot=files.snapshot is not None,
            is_active=seg.is_active,
            files=[p.name for p in (files.log, files.index, files.timeindex, files.txnindex, files.snapshot)
                   if p is not None]))
    groups: dict[Optional[int], list[Path]] = {}
    for path in state.leftovers:
        try:
            base: Optional[int] = parse_segment_file_name(path.name).base_offset
        except KafkalogError:
            base = None
        groups.setdefault(base, []).append(path)
    for base, paths in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        size = 0
        for p in paths:
            try:
                size += filesystem.stat(p).st_size
            except OSError:
                pass
        rows.append(dict(common, kind=LEFTOVER, base_offset=base, size=size, files=sorted(p.name for p in paths)))
    return rows


def catalog_table(states: Iterable[PartitionState]) -> pa.Table:
    """The catalog of many partitions as one Arrow table (CATALOG_SCHEMA)."""
    rows = [row for state in states for row in catalog_rows(state)]
    return pa.Table.from_pylist(rows, schema=CATALOG_SCHEMA)


def error_rows(*, log_dir: Optional[str], path: str, topic: str, partition: int, kind: str,
               problem: str) -> list[dict]:
    """The one catalog row (kind ``error``) of a partition that could not be loaded at all."""
    return [dict(log_dir=log_dir, topic=topic, partition=partition, partition_dir=path, partition_kind=kind,
                 kind=ERROR, files=[], problems=[problem])]
