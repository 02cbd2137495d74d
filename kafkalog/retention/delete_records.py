"""Kafka's DeleteRecords done offline: advance partitions' log start offsets in a log dir the way a
broker answers ``kafka-delete-records.sh --offset-json-file FILE`` (KIP-107), so that the segments
wholly below the new log start offset go at the next retention run.

The broker's rules (``Partition.deleteRecordsOnLeader``, ``UnifiedLog.maybeIncrementLogStartOffset``,
``DeleteRecordsCommand``):

* the JSON is ``{"partitions": [{"topic": T, "partition": P, "offset": O}, ...], "version": 1}``; a
  topic-partition named twice is refused before anything is sent;
* the topic's ``cleanup.policy`` must contain ``delete`` (else PolicyViolationException);
* offset ``-1`` (``DeleteRecordsRequest.HIGH_WATERMARK``) means the partition's high watermark; any
  other offset below 0 is OffsetOutOfRange ("not valid"), and so is one above the high watermark;
* the log start offset only moves forward: an offset at or below it changes nothing; the answer, the
  "low watermark", is the log start offset afterwards;
* the broker then truncates the leader-epoch cache from the start at the new log start offset
  (``LeaderEpochFileCache.truncateFromStart``) and its checkpoint task writes the partition's
  ``log-start-offset-checkpoint`` entry (present only while the log start offset is above the first
  segment's base offset). The retention task deletes the segments wholly below it later
  (``deleteLogStartOffsetBreachedSegments``); here that is the next ``retention`` run.

Offline the high watermark is the ``replication-offset-checkpoint`` entry, as retention reads it
(``kafkalog.log.local_log.high_watermark``; a missing entry means 0 unless ``hw_missing="log-end"``).

One deliberate difference: a broker answers each partition on its own, so one bad offset leaves the
others applied. Offline, where nobody retries a half-applied file, every partition is checked first and
a file with any error changes nothing (every partition's error is reported).
"""
from __future__ import annotations

import json
import os
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, List, Mapping, Optional, Sequence

from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint, write_leader_epoch_checkpoint
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.config import KafkaConfigs
from kafkalog.errors import KafkalogError, UsageError
from kafkalog.log.local_log import HW_MISSING_ZERO, LogDirCheckpoints, load_partition, read_log_dir_checkpoints
from kafkalog.fs.lock import lock_log_dir
from kafkalog.log.logdir import scan_partition_dir
from kafkalog.fs.names import LEADER_EPOCH_CHECKPOINT, LIVE, LOG_START_OFFSET_CHECKPOINT, parse_partition_dir_name
from kafkalog.fs import filesystem
from kafkalog.retention.deletion import truncate_epochs_from_start, updated_log_start_offsets
from kafkalog.topic_partition import TopicPartition

HIGH_WATERMARK = -1          # DeleteRecordsRequest.HIGH_WATERMARK
SUPPORTED_VERSION = 1        # DeleteRecordsCommand: the only offset JSON version


@dataclass(frozen=True)
class DeleteRecordsRequest:
    """One entry of the offset JSON: delete the records of ``topic``-``partition`` below ``offset``."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class DeleteRecordsResult:
    """What DeleteRecords does (or would do) to one partition. ``low_watermark`` is the log start offset
    afterwards (the broker's answer); ``error`` says why the partition is refused (nothing changes)."""

    topic: str
    partition: int
    requested_offset: int
    log_dir: Optional[str] = None
    partition_dir: Optional[str] = None
    offset: Optional[int] = None              # the requested offset, -1 resolved to the high watermark
    log_start_offset: Optional[int] = None    # before
    low_watermark: Optional[int] = None       # the log start offset after
    high_watermark: Optional[int] = None
    first_segment_base: Optional[int] = None
    error: Optional[str] = None
    applied: bool = False

    @property
    def changes(self) -> bool:
        return self.error is None and self.low_watermark is not None and self.low_watermark > self.log_start_offset

    def to_dict(self) -> dict:
        return {**self.__dict__}


# --- the offset JSON ------------------------------------------------------------------------------

def parse_offset_json(text: str, *, path: Optional[str] = None) -> List[DeleteRecordsRequest]:
    """kafka-delete-records.sh's ``--offset-json-file`` content, checked as DeleteRecordsCommand checks
    it (version 1; topic, partition and offset in every entry; no topic-partition twice). Raises
    UsageError naming the file."""
    where = f"{path}: " if path else ""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{where}not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f'{where}expected {{"partitions": [...], "version": 1}}')
    version = doc.get("version", SUPPORTED_VERSION)
    if version != SUPPORTED_VERSION:
        raise UsageError(f"{where}Not supported version field value {version}")
    entries = doc.get("partitions")
    if not isinstance(entries, list):
        raise UsageError(f'{where}no "partitions" list in the offset JSON')
    out: List[DeleteRecordsRequest] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise UsageError(f"{where}partitions[{i}] is not an object")
        missing = [k for k in ("topic", "partition", "offset") if k not in e]
        if missing:
            raise UsageError(f"{where}partitions[{i}] has no {', '.join(missing)}")
        topic, partition, offset = e["topic"], e["partition"], e["offset"]
        if not isinstance(topic, str) or not topic:
            raise UsageError(f"{where}partitions[{i}]: topic must be a non-empty string, not {topic!r}")
        for name, value in (("partition", partition), ("offset", offset)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise UsageError(f"{where}partitions[{i}]: {name} must be an integer, not {value!r}")
        if partition < 0:
            raise UsageError(f"{where}partitions[{i}]: partition must be >= 0, not {partition}")
        out.append(DeleteRecordsRequest(topic, partition, offset))
    seen, dupes = set(), []
    for r in out:
        key = f"{r.topic}-{r.partition}"
        if key in seen:
            dupes.append(key)
        seen.add(key)
    if dupes:
        raise UsageError(f"{where}Offset json file contains duplicate topic partitions: {','.join(dupes)}")
    if not out:
        raise UsageError(f"{where}the offset JSON names no partition")
    return out


def read_offset_json_file(path: os.PathLike | str) -> List[DeleteRecordsRequest]:
    """Read and parse an offset JSON file (UsageError when it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UsageError(f"cannot read the offset JSON file ({exc.strerror or exc})", path=path) from None
    return parse_offset_json(text, path=os.fspath(path))


# --- the decision (pure) --------------------------------------------------------------------------

def decide_delete_records(request: DeleteRecordsRequest, *, delete_policy: bool, log_start_offset: int,
                          high_watermark: int, first_segment_base: Optional[int]) -> DeleteRecordsResult:
    """``Partition.deleteRecordsOnLeader`` for one partition with these offsets.

    Parameters:
        request: the entry of the offset JSON.
        delete_policy: whether the topic's cleanup.policy contains ``delete``.
        log_start_offset, high_watermark: the partition's, as a broker loads them.
        first_segment_base: the first segment's base offset (None: no segment)."""
    tp = f"{request.topic}-{request.partition}"
    base = DeleteRecordsResult(request.topic, request.partition, request.offset, log_start_offset=log_start_offset,
                               high_watermark=high_watermark, first_segment_base=first_segment_base)
    if not delete_policy:
        return replace(base, error=f"PolicyViolation: Records of partition {tp} can not be deleted due to the "
                                   "configured policy")
    offset = high_watermark if request.offset == HIGH_WATERMARK else request.offset
    if offset < 0:
        return replace(base, offset=offset,
                       error=f"OffsetOutOfRange: The offset {offset} for partition {tp} is not valid")
    if offset > high_watermark:
        return replace(base, offset=offset, error=(
            f"OffsetOutOfRange: Cannot increment the log start offset to {offset} of partition {tp} since it is "
            f"larger than the high watermark {high_watermark}"))
    return replace(base, offset=offset, low_watermark=max(log_start_offset, offset))


# --- over log dirs ----------------------------------------------------------------------------------

def find_partition_folders(log_dirs: Sequence[os.PathLike | str],
                           requests: Iterable[DeleteRecordsRequest]) -> dict:
    """{(topic, partition): (log dir, folder)} for every request; a partition in no log dir (or in two)
    is a UsageError naming them all, raised before anything is read or written."""
    wanted = {(r.topic, r.partition) for r in requests}
    found: dict = {}
    twice = []
    for log_dir in log_dirs:
        for entry in sorted(filesystem.scandir(log_dir), key=lambda e: e.name):
            try:
                topic, partition, kind = parse_partition_dir_name(entry.name)
            except KafkalogError:
                continue
            if kind != LIVE or (topic, partition) not in wanted or not entry.is_dir():
                continue
            if (topic, partition) in found:
                twice.append(f"{topic}-{partition}")
            found[(topic, partition)] = (os.fspath(log_dir), os.path.join(os.fspath(log_dir), entry.name))
    missing = sorted(f"{t}-{p}" for t, p in wanted - set(found))
    if missing:
        raise UsageError(f"not in the log dir(s) {', '.join(os.fspath(d) for d in log_dirs)}: {', '.join(missing)}",
                         hint="check the topic names and partitions of the offset JSON; nothing was changed")
    if twice:
        raise UsageError(f"in two log dirs: {', '.join(sorted(set(twice)))}",
                         hint="a broker refuses to start like this; give only the log dir holding the replica")
    return found


def plan_delete_records(log_dirs: Sequence[os.PathLike | str], requests: Sequence[DeleteRecordsRequest], *,
                        configs: KafkaConfigs, hw_missing: str = HW_MISSING_ZERO,
                        checkpoints: Optional[Mapping[str, LogDirCheckpoints]] = None) -> List[DeleteRecordsResult]:
    """Decide every request against the partitions' folders and checkpoints (reads only).
    ``checkpoints``: {log dir: LogDirCheckpoints} already read (default: read here)."""
    folders = find_partition_folders(log_dirs, requests)
    read: dict = dict(checkpoints or {})
    results = []
    for r in requests:
        log_dir, folder = folders[(r.topic, r.partition)]
        if log_dir not in read:
            read[log_dir] = read_log_dir_checkpoints(log_dir)
        state = load_partition(scan_partition_dir(folder, log_dir=log_dir), read[log_dir])
        first = state.segments[0].base_offset if state.segments else None
        result = decide_delete_records(r, delete_policy=configs.for_topic(r.topic).delete,
                                       log_start_offset=state.log_start_offset,
                                       high_watermark=state.high_watermark(hw_missing), first_segment_base=first)
        results.append(replace(result, log_dir=log_dir, partition_dir=folder))
    return results


def log_start_overrides(results: Iterable[DeleteRecordsResult]) -> dict:
    """{log dir: {TopicPartition: new log start offset}} of the results that move a log start offset
    (for planning retention as if they were applied)."""
    out: dict = {}
    for r in results:
        if r.changes:
            out.setdefault(r.log_dir, {})[TopicPartition(r.topic, r.partition)] = r.low_watermark
    return out


def with_log_starts(checkpoints: LogDirCheckpoints, starts: Mapping[TopicPartition, int]) -> LogDirCheckpoints:
    """``checkpoints`` with these log start offsets in place of the file's (a dry run's view)."""
    merged = dict(checkpoints.log_start_offsets)
    merged.update(starts)
    return replace(checkpoints, log_start_offsets=merged)


def apply_delete_records(results: Sequence[DeleteRecordsResult], *, lock: bool = True) -> List[DeleteRecordsResult]:
    """Write what ``results`` decided: per log dir, its ``log-start-offset-checkpoint`` (atomically), then
    each moved partition's ``leader-epoch-checkpoint`` truncated from the start as the broker's cache is.
    Refuses (KafkalogError, nothing written) when any result has an error. ``lock``: take each log dir's
    ``.lock`` (LogDirLockedError when a broker holds it); False when the caller holds it already."""
    bad = [r for r in results if r.error]
    if bad:
        raise KafkalogError("DeleteRecords refused, nothing changed: " + "; ".join(r.error for r in bad))
    by_dir: dict = {}
    for r in results:
        by_dir.setdefault(r.log_dir, []).append(r)
    done = []
    for log_dir, rs in by_dir.items():
        moved = [r for r in rs if r.changes]
        if moved:
            if lock:
                with lock_log_dir(log_dir):
                    _write(log_dir, moved)
            else:
                _write(log_dir, moved)
        done += [replace(r, applied=r in moved) for r in rs]
    return done


def _write(log_dir: str, moved: Sequence[DeleteRecordsResult]) -> None:
    path = Path(log_dir) / LOG_START_OFFSET_CHECKPOINT
    current = read_offset_checkpoint(path)
    changes = {(r.topic, r.partition): (r.low_watermark, r.first_segment_base
                                        if r.first_segment_base is not None else r.low_watermark)
               for r in moved}
    updated = updated_log_start_offsets(current, changes)
    if updated != current:
        write_offset_checkpoint(path, updated)
    for r in moved:
        epochs_path = Path(r.partition_dir) / LEADER_EPOCH_CHECKPOINT
        if epochs_path.exists():
            epochs = read_leader_epoch_checkpoint(epochs_path)
            truncated = truncate_epochs_from_start(epochs, r.low_watermark)
            if truncated != epochs:
                write_leader_epoch_checkpoint(epochs_path, truncated)


def delete_records(log_dirs: Sequence[os.PathLike | str], requests: Sequence[DeleteRecordsRequest], *,
                   configs: KafkaConfigs, hw_missing: str = HW_MISSING_ZERO,
                   dry_run: bool = False) -> List[DeleteRecordsResult]:
    """Plan and (unless ``dry_run``) apply DeleteRecords over ``log_dirs``, holding each log dir's lock
    while planning and writing, so no broker starts on it meanwhile. Results carry per-partition errors;
    with any error nothing is written (see the module docstring)."""
    if dry_run:
        return plan_delete_records(log_dirs, requests, configs=configs, hw_missing=hw_missing)
    with ExitStack() as stack:
        for log_dir in log_dirs:
            stack.enter_context(lock_log_dir(log_dir))
        results = plan_delete_records(log_dirs, requests, configs=configs, hw_missing=hw_missing)
        if any(r.error for r in results):
            return results
        return apply_delete_records(results, lock=False)


def describe(result: DeleteRecordsResult) -> str:
    """kafka-delete-records.sh's line for one partition."""
    tp = f"{result.topic}-{result.partition}"
    if result.error:
        return f"partition: {tp}\terror: {result.error}"
    return f"partition: {tp}\tlow_watermark: {result.low_watermark}"


__all__ = ["HIGH_WATERMARK", "DeleteRecordsRequest", "DeleteRecordsResult", "parse_offset_json",
           "read_offset_json_file", "decide_delete_records", "find_partition_folders", "plan_delete_records",
           "log_start_overrides", "with_log_starts", "apply_delete_records", "delete_records", "describe"]
