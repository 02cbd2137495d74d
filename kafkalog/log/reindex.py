"""Reindexing a partition: verify every segment's indexes (``kafkalog.index.verify``), rebuild
the ones that are not byte-identical to Kafka's recovery, and optionally cut a ``.log``'s corrupt tail
as recovery does — one row per index file saying what was found and done (``REINDEX_SCHEMA``), plus a
``log`` row for each ``.log`` with a corrupt tail (class ``corrupt``), for the skipped active segment
(class ``skipped``) and for a segment that could not be read (class ``error``).

Rules and choices (Kafka's ``LogLoader.load``, ``AbstractIndex.resize``, ``LogSegment.recover``):

* **Active segment** (the partition's last): a running broker owns it — its indexes are preallocated,
  zero-padded and written as it appends. It is skipped unless ``include_active``; then it is checked
  with the active rules (zero tail allowed, no final time-index entry needed) and a rebuild writes
  trimmed files with the final entry, which is what a clean shutdown (``close()``) leaves; a broker
  resizes them to ``segment.index.bytes`` when it loads the log.
* **Rebuild**: every index that is ``valid``, ``missing`` or ``corrupt`` is replaced by recovery's
  rebuild (the topic's ``index.interval.bytes``), written through ``<name>.tmp``, fsynced, renamed and
  the folder fsynced. ``identical`` files are not touched, so a second run changes nothing and reports
  every file ``identical``. A ``.txnindex`` whose rebuild is empty is truncated to 0 bytes (as recovery
  does) and never created.
* **Corrupt tail** (``truncate_tail``): the ``.log`` is cut where recovery truncates it (``LogSegment.recover``,
  ``file_records.recovery_valid_bytes``: Kafka judges a batch by its size and CRC only, so a CRC-valid
  batch with magic > 2 or a negative record count is kept, and a magic > 2 batch with a bad CRC is
  not). The cut bytes are first saved, atomically, beside it as
  ``corrupt-tail-<20-digit base offset>-at-<position>.bin`` (``-<n>`` added when an earlier cut at the
  same place saved other bytes: a side file is never overwritten). A broker never reads or deletes that file:
  it is not a segment, index, snapshot, ``.deleted``/``.cleaned``/``.swap`` or ``.tmp`` name, and
  because it does not start with digits, the startup pass that deletes files whose leading offset lies
  in an interrupted swap's range skips it (``offsetFromFile`` fails and the file is ignored, ``LogLoader.load``) — a
  ``<base>.log.<suffix>`` name would be deleted there. ``kafkalog dump --files`` reads ``.bin`` files as
  raw record sets. Unlike a broker, later segments are kept (a broker recovering a truncated segment
  deletes every later one); the row says how many there are. While a ``.log`` keeps a corrupt tail,
  its indexes are not rebuilt: an index of the valid prefix would hide the batches after it from a
  broker that starts without recovery.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pyarrow as pa

from kafkalog.fs.durable import fsync_dir, replace_file, truncate
from kafkalog.errors import KafkalogError
from kafkalog.index.builder import DEFAULT_INDEX_INTERVAL_BYTES
from kafkalog.index.offset_index import write_offset_index
from kafkalog.index.time_index import write_time_index
from kafkalog.index.transaction_index import write_transaction_index
from kafkalog.index.verdicts import (CORRUPT, DEFAULT_SEGMENT_INDEX_BYTES, IDENTICAL, MISSING, OFFSET_INDEX,
                                     TIME_INDEX, TXN_INDEX, VALID, SegmentVerification)
from kafkalog.index.verify import verify_segment
from kafkalog.format.file_records import recovery_valid_bytes
from kafkalog.fs.filesystem import MappedFile
from kafkalog.log.logdir import PartitionDir, scan_partition_dir
from kafkalog.fs.names import KRAFT_METADATA_TOPIC
from kafkalog.log.producer_snapshot import read_producer_snapshot

LOG = "log"
PARTITION = "partition"
ERROR = "error"       # a class: the file or folder could not be read
SKIPPED = "skipped"   # a class: the active segment without include_active; the KRaft metadata log
#: actions
NONE, REBUILT, CREATED, TRUNCATED, NOT_REBUILT, FAILED = "none", "rebuilt", "created", "truncated", "not rebuilt", "failed"
CORRUPT_TAIL_PREFIX = "corrupt-tail-"

REINDEX_SCHEMA = pa.schema([
    pa.field("log_dir", pa.string()),
    pa.field("partition_dir", pa.string(), nullable=False),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("base_offset", pa.int64()),
    pa.field("is_active", pa.bool_()),
    pa.field("file", pa.string()),                  # file name (null for a partition-level error)
    pa.field("kind", pa.string(), nullable=False),  # index / timeindex / txnindex / log / partition
    pa.field("class", pa.string(), nullable=False), # identical/valid/missing/corrupt; error; skipped (active)
    pa.field("reason", pa.string()),
    pa.field("entries", pa.int64()),
    pa.field("expected_entries", pa.int64()),
    pa.field("first_bad_entry", pa.int64()),
    pa.field("first_bad_position", pa.int64()),
    pa.field("file_size", pa.int64()),
    pa.field("log_size", pa.int64()),
    pa.field("log_valid_bytes", pa.int64()),
    pa.field("action", pa.string(), nullable=False),
    pa.field("action_detail", pa.string()),
])


@dataclass(frozen=True)
class TailCut:
    """What ``truncate_corrupt_tail`` did: the .log was cut at ``position`` and the ``length`` bytes
    after it were saved in ``side_file``."""

    log_path: Path
    position: int
    length: int
    side_file: Path
    error: Optional[str] = None          # why the walk stopped there


def corrupt_tail_file_name(base_offset: int, position: int) -> str:
    return f"{CORRUPT_TAIL_PREFIX}{base_offset:020d}-at-{position}.bin"


def _free_side_file(directory: Path, base: int, position: int, data: bytes) -> Tuple[Path, bool]:
    """The side file for a tail cut at ``position``: the plain name, or ``…-at-<pos>-<n>.bin`` when a
    file of that name already holds other bytes (an earlier cut at the same place: never replaced).
    Returns (path, already_saved) — already saved when a file holds exactly these bytes."""
    name = corrupt_tail_file_name(base, position)
    path, n = directory / name, 1
    while path.exists():
        if path.read_bytes() == data:
            return path, True
        n += 1
        path = directory / f"{name[:-len('.bin')]}-{n}.bin"
    return path, False


def truncate_corrupt_tail(log_path: os.PathLike | str) -> Optional[TailCut]:
    """Cut the ``.log`` where Kafka's recovery truncates it (``file_records.recovery_valid_bytes``),
    after saving the cut bytes beside it as ``corrupt-tail-<base>-at-<position>[-<n>].bin`` (see the
    module docstring; an earlier side file is never overwritten). Returns None when Kafka's recovery
    would keep the whole file. Safe to repeat after a crash between the save and the cut."""
    log_path = Path(log_path)
    with MappedFile(log_path) as f:
        position, error = recovery_valid_bytes(f.array, path=log_path)
        size = len(f.array)
        if position >= size:
            return None
        tail = bytes(f.array[position:])
    base = int(log_path.name.split(".", 1)[0])
    side, saved = _free_side_file(log_path.parent, base, position, tail)
    if not saved:
        replace_file(side, tail)
    truncate(log_path, position)
    fsync_dir(log_path.parent)
    message = None if error is None else getattr(error, "message", str(error))
    return TailCut(log_path, position, len(tail), side, message)


TAIL_NOT_CUT = ("not rebuilt: the .log has a corrupt tail that was not cut, and an index rebuilt from the valid "
                "prefix would hide the batches after it from a broker that starts without recovery; cut the tail "
                "first (--truncate-corrupt-tail, as recovery does)")


def rebuild_indexes(v: SegmentVerification, actions: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Write recovery's rebuild over every index of ``v`` that is not identical; kind → action.
    ``actions`` (pass your own) holds each file's action as soon as it is done, so a failure part-way
    still tells which files were written."""
    actions = {} if actions is None else actions
    index: Any                             # the index to write, and its writer, per verdict kind
    writer: Callable[..., None]
    for verdict in v.verdicts:
        if verdict.status == IDENTICAL:
            actions[verdict.kind] = NONE
            continue
        if v.log.corrupt:
            actions[verdict.kind] = NOT_REBUILT
            continue
        if verdict.kind == TXN_INDEX:
            if verdict.status == VALID and not v.txn_state_known:
                # entries consistent with the log, but the producer state at the segment's start is
                # not known (no snapshot, earlier segments gone): a rebuild could only be worse
                actions[verdict.kind] = NOT_REBUILT
                continue
            index = v.txn_index
            writer = write_transaction_index
        elif v.rebuild_error is not None:
            actions[verdict.kind] = NOT_REBUILT
            continue
        else:
            index = v.offset_index if verdict.kind == OFFSET_INDEX else v.time_index
            writer = write_offset_index if verdict.kind == OFFSET_INDEX else write_time_index
        writer(verdict.path, index)
        actions[verdict.kind] = CREATED if verdict.status == MISSING else REBUILT
    return actions


@dataclass
class PartitionReindex:
    """The outcome for one partition folder: one row per index file (and per corrupt ``.log``)."""

    partition_dir: Path
    topic: Optional[str]
    partition: Optional[int]
    rows: List[dict] = field(default_factory=list)
    skipped_active: Optional[int] = None        # base offset of the active segment left alone
    error: Optional[str] = None


def _snapshot_open_txns(path: Optional[Path]) -> Optional[Dict[int, int]]:
    if path is None:
        return None
    try:
        snap = read_producer_snapshot(path)
    except (KafkalogError, OSError):
        return None
    return {e.producer_id: e.current_txn_first_offset for e in snap.entries if e.current_txn_first_offset >= 0}


def reindex_partition(
    folder: os.PathLike | str,
    *,
    log_dir: Optional[os.PathLike | str] = None,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    include_active: bool = False,
    verify_only: bool = True,
    truncate_tail: bool = False,
    partition_dir: Optional[PartitionDir] = None,
) -> PartitionReindex:
    """Verify (and unless ``verify_only``, rebuild; with ``truncate_tail``, cut corrupt tails) every
    segment of one partition folder. Per-segment failures become rows; the folder listing failing
    raises (KafkalogError / OSError)."""
    if truncate_tail and verify_only:
        raise ValueError("truncate_tail modifies the log: it cannot be combined with verify_only")
    pdir = partition_dir or scan_partition_dir(folder, log_dir=log_dir)
    out = PartitionReindex(pdir.path, pdir.topic, pdir.partition)
    common = dict(log_dir=None if log_dir is None else os.fspath(log_dir), partition_dir=os.fspath(pdir.path),
                  topic=pdir.topic, partition=pdir.partition)
    if pdir.topic == KRAFT_METADATA_TOPIC:
        # KRaft's metadata log is loaded by raft (KafkaMetadataLog), never by the LogManager's recovery: its
        # indexes stay preallocated, and nothing offline may rewrite a byte of the cluster's metadata.
        out.rows.append(dict(common, base_offset=None, is_active=None, file=None, kind=PARTITION,
                             **{"class": SKIPPED}, reason="the KRaft metadata log: raft owns its files, a broker's "
                             "log recovery never rebuilds its indexes", action=NONE, action_detail=None))
        return out
    segments = pdir.segments
    open_txns: Dict[int, int] = {}
    known = True
    for k, seg in enumerate(segments):
        is_active = k == len(segments) - 1
        if is_active and not include_active:
            out.skipped_active = seg.base_offset
            out.rows.append(dict(common, base_offset=seg.base_offset, is_active=True, file=seg.log.name, kind=LOG,
                                 **{"class": SKIPPED}, reason="active segment: a running broker owns its indexes "
                                 "(--include-active checks it)", action=NONE, action_detail=None))
            continue
        snap = _snapshot_open_txns(seg.snapshot)
        if snap is not None:
            open_txns, known = snap, True
        elif k == 0:
            open_txns, known = {}, seg.base_offset == 0
        seg_common = dict(common, base_offset=seg.base_offset, is_active=is_active)
        cut = v = None
        actions: Dict[str, str] = {}
        try:
            if truncate_tail:
                cut = truncate_corrupt_tail(seg.log)
            v = verify_segment(seg.log, is_active=is_active, index_interval_bytes=index_interval_bytes,
                               segment_index_bytes=segment_index_bytes, base_offset=seg.base_offset,
                               open_txns=open_txns, txn_state_known=known)
            open_txns, known = v.open_txns_after, v.txn_state_known_after
            if not verify_only:
                rebuild_indexes(v, actions)
        except (KafkalogError, OSError) as exc:
            out.rows.extend(_failed_segment_rows(seg_common, seg, v, cut, actions, exc))
            known = False
            continue
        later = len(segments) - 1 - k
        if cut is not None or v.log.corrupt:
            if cut is not None:
                reason = (f"corrupt tail: {cut.length} bytes from position {cut.position} were not valid batches "
                          f"({cut.error})")
                detail = (f"cut at {cut.position}; the {cut.length} bytes are in {cut.side_file.name}"
                          + (f"; {later} later segment(s) kept (a broker recovering this one would delete them)"
                             if later else ""))
                action, size = TRUNCATED, cut.position + cut.length
            else:
                reason = (f"corrupt tail: {v.log.size - v.log.valid_bytes} bytes from position {v.log.valid_bytes} "
                          f"are not valid batches ({v.log.error})")
                if v.log.kafka_keeps_tail:
                    reason += ("; Kafka's recovery judges that batch by its CRC only and keeps it (it would cut at "
                               f"{v.log.recovery_valid_bytes} of {v.log.size})")
                action, size = NONE, v.log.size
                detail = ("not cut: Kafka keeps this batch" if v.log.kafka_keeps_tail else
                          "not cut (--truncate-corrupt-tail cuts it, as recovery would)") if not verify_only else None
            out.rows.append(dict(seg_common, file=seg.log.name, kind=LOG, **{"class": CORRUPT}, reason=reason,
                                 entries=None, expected_entries=None,
                                 first_bad_entry=None, first_bad_position=cut.position if cut else v.log.valid_bytes,
                                 file_size=size, log_size=size, log_valid_bytes=v.log.valid_bytes,
                                 action=action, action_detail=detail))
        for verdict in v.verdicts:
            action = actions.get(verdict.kind, NONE)
            detail = None
            if action in (REBUILT, CREATED):
                written: Any = {OFFSET_INDEX: v.offset_index, TIME_INDEX: v.time_index,
                                  TXN_INDEX: v.txn_index}[verdict.kind]
                detail = f"{len(written)} entries written (Kafka's recovery rebuild)"
            elif action == NOT_REBUILT:
                detail = TAIL_NOT_CUT if v.log.corrupt else v.rebuild_error or (
                    "kept: valid, and the producer state at this segment's start is unknown, so a rebuild "
                    "could only be less exact" if verdict.kind == TXN_INDEX else None)
            out.rows.append(dict(
                seg_common, file=verdict.path.name, kind=verdict.kind, **{"class": verdict.status},
                reason=verdict.reason, entries=verdict.entries, expected_entries=verdict.expected_entries,
                first_bad_entry=verdict.first_bad_entry, first_bad_position=verdict.first_bad_position,
                file_size=verdict.file_size, log_size=v.log.size, log_valid_bytes=v.log.valid_bytes,
                action=action, action_detail=detail))
    return out


def _failed_segment_rows(seg_common: dict, seg: Any, v: Any, cut: Optional[TailCut], actions: Dict[str, str],
                         exc: BaseException) -> List[dict]:
    """A segment whose reindexing failed part-way: a row per change already made (what is on disk
    now), then the error row naming the file that failed and why."""
    rows = []
    if cut is not None:
        rows.append(dict(seg_common, file=seg.log.name, kind=LOG, **{"class": CORRUPT},
                         reason=f"corrupt tail cut at {cut.position} ({cut.error})", action=TRUNCATED,
                         action_detail=f"the {cut.length} bytes are in {cut.side_file.name}"))
    for verdict in (v.verdicts if v is not None else ()):
        if actions.get(verdict.kind) in (REBUILT, CREATED):
            rows.append(dict(seg_common, file=verdict.path.name, kind=verdict.kind, **{"class": verdict.status},
                             reason=verdict.reason, action=actions[verdict.kind],
                             action_detail="written before a later file of the segment failed"))
    failed = Path(exc.filename).name if isinstance(exc, OSError) and exc.filename else seg.log.name
    reason = (f"{exc.filename}: {exc.strerror} (the folder or file is not writable by this job)"
              if isinstance(exc, PermissionError) and exc.filename else str(exc))
    rows.append(dict(seg_common, file=failed, kind=LOG, **{"class": ERROR}, reason=reason, action=FAILED,
                     action_detail=None))
    return rows


def partition_error_row(*, log_dir: Any, folder: Any, topic: Optional[str], partition: Optional[int],
                        message: str) -> dict:
    return dict(log_dir=None if log_dir is None else os.fspath(log_dir), partition_dir=os.fspath(folder),
                topic=topic, partition=partition, base_offset=None, is_active=None, file=None, kind=PARTITION,
                **{"class": ERROR}, reason=message, action=FAILED, action_detail=None)


__all__ = [
    "CORRUPT_TAIL_PREFIX", "REINDEX_SCHEMA", "PartitionReindex", "TailCut", "corrupt_tail_file_name",
    "partition_error_row", "rebuild_indexes", "reindex_partition", "truncate_corrupt_tail",
]
