"""Carrying out a retention plan on disk the way a broker does (``UnifiedLog.deleteSegments``,
``LocalLog.deleteSegmentFiles``, ``LeaderEpochFileCache.truncateFromStart``), and removing ``.deleted``
files once ``file.delete.delay.ms`` has passed.

Order, so that a crash at any point leaves a log a broker loads with no live record lost:

1. check each segment to delete is still what the plan saw (same ``.log`` size); a changed partition
   is refused, nothing is touched;
2. if the plan rolls, create the new empty active segment (``<log end offset>.log``, ``.index``,
   ``.timeindex``, all empty) and fsync the folder — before anything is renamed; a rerun after a
   run killed between those creations finds the empty ``.log`` and creates its missing indexes;
3. rename every file of each deleted segment, and its producer snapshot, to ``<name>.deleted``; the
   renamed file's mtime is set to "now", which is when its deletion delay starts (with the run's tag
   in the nanoseconds below the millisecond, :func:`deletion_stamp_ns`); fsync the folder;
4. truncate ``leader-epoch-checkpoint`` from the start at the new log start offset (atomic rewrite);
   whenever that changes the file, even with nothing left to delete — a run killed between step 3
   and this one left it stale, and the rerun, whose log start offset is already the new one, puts
   it right (Kafka's ``LogLoader`` does the same at load from the checkpointed log start offset);
5. (per log dir, by the caller) rewrite ``log-start-offset-checkpoint`` atomically:
   :func:`updated_log_start_offsets`.

A ``.deleted`` file is removed when now - its mtime >= ``file.delete.delay.ms``; a broker starting on
the folder removes them all at once, which is also safe.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional

from kafkalog.log.local_log import LocalLog
from kafkalog.checkpoint.leader_epoch import EpochEntry, read_leader_epoch_checkpoint, write_leader_epoch_checkpoint
from kafkalog.fs.durable import fsync_dir
from kafkalog.fs.names import LEADER_EPOCH_CHECKPOINT
from kafkalog.fs.durable import ownership_for, remove, rename, set_mtime, write_file
from kafkalog.errors import KafkalogError
from kafkalog.retention.policy import DELETE, RetentionPlan
from kafkalog.fs.names import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, format_segment_file_name


class PlanOutdatedError(KafkalogError):
    """The partition changed between planning and applying."""

    default_hint = "run the job again: it plans from what is on disk now"


# --- data structures -----------------------------------------------------------------------------

@dataclass
class DeletionResult:
    """What applying a plan did to one partition folder."""

    renamed: list[str] = field(default_factory=list)        # files now named *.deleted
    purged: list[str] = field(default_factory=list)         # *.deleted files removed
    rolled_segment: Optional[str] = None                    # the new empty .log, when rolled
    leader_epochs_truncated: bool = False
    bytes_purged: int = 0


# --- pure helpers ---------------------------------------------------------------------------------

def truncate_epochs_from_start(entries: Iterable[EpochEntry], start_offset: int) -> list[EpochEntry]:
    """``LeaderEpochFileCache.truncateFromStart``: drop entries starting at or below ``start_offset``
    and re-insert the last dropped one as (its epoch, start_offset)."""
    entries = list(entries)
    removed = [e for e in entries if e.start_offset <= start_offset]
    if not removed:
        return entries
    kept = [e for e in entries if e.start_offset > start_offset]
    return [EpochEntry(removed[-1].epoch, start_offset)] + kept


def updated_log_start_offsets(current: Mapping[tuple[str, int], int],
                              changes: Mapping[tuple[str, int], tuple[int, int]]) -> dict[tuple[str, int], int]:
    """The new ``log-start-offset-checkpoint`` entries: ``changes`` maps a partition to (new log start
    offset, its first remaining segment's base offset). As ``LogManager.checkpointLogStartOffsetsInDir``
    writes it, a partition has an entry only when its log start offset is above its first segment's
    base offset; partitions not in ``changes`` keep theirs."""
    entries = dict(current)
    for key, (log_start, first_base) in changes.items():
        if log_start > first_base:
            entries[key] = log_start
        else:
            entries.pop(key, None)
    return entries


def purge_due(mtime_ms: int, now_ms: int, delay_ms: int) -> bool:
    """A ``.deleted`` file may go once ``file.delete.delay.ms`` has passed since it was scheduled."""
    return now_ms - mtime_ms >= delay_ms


MIN_TAG, MAX_TAG = 1_000, 999_999


def run_tag(run_id: str) -> int:
    """A run's tag, kept in the sub-millisecond nanoseconds of the files it renames (0: no tag). At
    least 1,000, so a stamp cut to 100 ns or 1 µs by the file system still differs from a whole
    millisecond, which is what untagged calls and Kafka itself write."""
    return zlib.crc32(run_id.encode()) % (MAX_TAG - MIN_TAG + 1) + MIN_TAG


def deletion_stamp_ns(now_ms: int, tag: int = 0) -> int:
    """The mtime ``apply_plan`` gives each file it renames: ``now_ms``, when the file's deletion delay
    starts (all Kafka and ``purge_due`` read), plus the run's tag in the nanoseconds below it."""
    if tag and not MIN_TAG <= tag <= MAX_TAG:
        raise ValueError(f"a run tag is 0 or between {MIN_TAG} and {MAX_TAG}, not {tag}")
    return now_ms * 1_000_000 + tag


def renamed_by_run(mtime_ns: int, now_ms: int, tag: int) -> bool:
    """Whether a ``.deleted`` file carries the stamp of the run (``now_ms``, ``tag``): to the nanosecond,
    or as a file system that keeps 100 ns (NTFS, SMB) or 1 µs cuts it; there two runs whose tags
    agree in those digits look alike. One that keeps whole seconds loses the stamp: a retried task
    there reports only what it renamed itself."""
    stamp = deletion_stamp_ns(now_ms, tag)
    return mtime_ns in (stamp, stamp - stamp % 100, stamp - stamp % 1_000)


# --- side effects ---------------------------------------------------------------------------------

def _touch_empty(path: Path) -> None:
    """A new empty file of the rolled segment, owned like the partition folder's segments."""
    write_file(path, b"", exclusive=True, owner=ownership_for(_sibling_model(path)))


def _sibling_model(path: Path) -> Path:
    """A live segment file of the same kind in the folder (its owner and mode are the ones a broker
    gave), else the folder itself."""
    suffix = path.name.split(".", 1)[1]
    siblings = sorted(p for p in path.parent.glob(f"*.{suffix}") if p != path and not p.is_symlink())
    return siblings[-1] if siblings else path.parent


def apply_plan(state: LocalLog, plan: RetentionPlan, *, now_ms: int, tag: int = 0,
               result: Optional[DeletionResult] = None) -> DeletionResult:
    """Steps 1–4 above for one partition. Everything that can be checked is checked before anything
    is touched (PlanOutdatedError, or the leader-epoch file's CheckpointError); ``result`` (pass your
    own to see how far a failure got) records each file as it is renamed; ``tag`` (:func:`run_tag`)
    goes into their mtime, so a retried task of the same run knows them (:func:`renamed_by_run`)."""
    result = DeletionResult() if result is None else result
    by_base = {s.base_offset: s for s in state.segments}
    doomed = [by_base[d.base_offset] for d in plan.decisions if d.decision == DELETE]
    unfinished_roll = _unfinished_roll(state) if plan.roll_at is None else None
    epoch_file = state.path / LEADER_EPOCH_CHECKPOINT
    epochs = truncated = None
    if epoch_file.exists():
        try:
            epochs = read_leader_epoch_checkpoint(epoch_file)      # a malformed file stops us here
        except KafkalogError:
            if doomed or plan.roll_at is not None:
                raise
            epochs = None              # nothing to delete: a malformed file is the broker's to refuse, not ours
        if epochs is not None:
            truncated = truncate_epochs_from_start(epochs, plan.new_log_start_offset)
    stale_epochs = truncated is not None and truncated != epochs
    if not doomed and plan.roll_at is None and unfinished_roll is None and not stale_epochs:
        return result
    for seg in doomed:
        try:
            size = os.stat(seg.on_disk().log).st_size
        except FileNotFoundError:
            raise PlanOutdatedError(f"segment {seg.base_offset} is gone", path=seg.on_disk().log) from None
        if size != seg.size:
            raise PlanOutdatedError(f"segment {seg.base_offset} is {size} bytes, the plan saw {seg.size}",
                                    path=seg.on_disk().log)
    if unfinished_roll is not None:
        for path in unfinished_roll:
            _touch_empty(path)
        fsync_dir(state.path)
    if plan.roll_at is not None:
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            path = state.path / format_segment_file_name(plan.roll_at, suffix)
            if path.exists():
                if path.stat().st_size:
                    raise PlanOutdatedError(f"cannot roll: {path.name} exists and is not empty", path=path)
                continue
            _touch_empty(path)
        result.rolled_segment = format_segment_file_name(plan.roll_at, LOG_SUFFIX)
        fsync_dir(state.path)
    stamp = deletion_stamp_ns(now_ms, tag)
    for seg in doomed:
        files = seg.on_disk()
        for path in (files.log, files.index, files.timeindex, files.txnindex, files.snapshot):
            if path is not None:
                _rename_for_deletion(path, stamp, result)
    if doomed:
        fsync_dir(state.path)
    if stale_epochs:
        write_leader_epoch_checkpoint(epoch_file, truncated)
        result.leader_epochs_truncated = True
    return result


def _unfinished_roll(state: LocalLog) -> Optional[list]:
    """The ``.index`` / ``.timeindex`` missing beside an empty last ``.log``: a roll interrupted
    after creating the ``.log`` (step 2). A broker creates both at every roll and, loading a segment
    without them, rebuilds them empty; finishing the roll gives the same files. None when complete."""
    if not state.segments:
        return None
    last = state.segments[-1]
    if last.size != 0 or last.base_offset != state.log_end_offset:
        return None
    missing = [state.path / format_segment_file_name(last.base_offset, suffix)
               for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)]
    missing = [p for p in missing if not os.path.lexists(p)]
    return missing or None


def _rename_for_deletion(path: Path, stamp_ns: int, result: DeletionResult) -> None:
    target = path.with_name(f"{path.name}.{DELETED_SUFFIX}")
    rename(path, target)
    result.renamed.append(target.name)
    set_mtime(target, stamp_ns)


def rename_left_behind(paths: Iterable[Path], *, now_ms: int, tag: int = 0,
                       result: Optional[DeletionResult] = None) -> DeletionResult:
    """Rename to ``.deleted``, stamped as :func:`apply_plan` stamps, the files an interrupted attempt
    left live after renaming their segment's ``.log`` (its indexes, its producer snapshot)."""
    result = DeletionResult() if result is None else result
    paths = list(paths)
    stamp = deletion_stamp_ns(now_ms, tag)
    for path in paths:
        _rename_for_deletion(path, stamp, result)
    for directory in {p.parent for p in paths}:
        fsync_dir(directory)
    return result


def purge_deleted_files(paths: Iterable[Path], *, now_ms: int, delay_ms: int,
                        result: Optional[DeletionResult] = None) -> DeletionResult:
    """Remove the ``*.deleted`` files among ``paths`` whose delay has passed."""
    result = DeletionResult() if result is None else result
    touched = set()
    for path in paths:
        if not path.name.endswith("." + DELETED_SUFFIX):
            continue
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        if purge_due(stat.st_mtime_ns // 1_000_000, now_ms, delay_ms):
            remove(path)
            result.purged.append(path.name)
            result.bytes_purged += stat.st_size
            touched.add(path.parent)
    for directory in touched:
        fsync_dir(directory)
    return result
