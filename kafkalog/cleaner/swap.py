"""Swapping a cleaned segment group in place of its sources, as ``LocalLog.replaceSegments`` does
(``.cleaned`` → ``.swap`` → live, old files ``.deleted`` then removed, each step fsynced), and the
``cleaner-offset-checkpoint`` update that follows (Kafka's ``LocalLog.replaceSegments``,
``LogCleanerManager.doneCleaning``; what ``LogLoader.load`` does with the leftovers). A crash between any two steps is
finished or rolled back by a broker's startup or ``kafkalog recover``.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import List, Optional

import numpy as np

from kafkalog.cleaner.clean_options import StepHook
from kafkalog.cleaner.cleaned_segment import GroupOutput
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.fs.durable import fsync_dir
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT
from kafkalog.errors import KafkalogError
from kafkalog.format.buffer_pool import release_pages
from kafkalog.format.file_records import SCAN_WINDOW_BYTES, scan_buffer
from kafkalog.fs.filesystem import MappedFile
from kafkalog.format.record_batch import crc32c_update
from kafkalog.index.transaction_index import TransactionIndex
from kafkalog.fs import durable
from kafkalog.fs.names import SNAPSHOT_SUFFIX
from kafkalog.fs.names import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, format_segment_file_name
from kafkalog.topic_partition import TopicPartition

# Steps reported to ``on_step(step, path)`` (tests raise there to simulate a crash).
STEP_CLEANED = "cleaned-written"
STEP_SWAP = "renamed-to-swap"
STEP_MARK_DELETED = "old-renamed-to-deleted"
STEP_INSTALL = "swap-installed"
STEP_PURGE = "deleted-removed"
STEP_CHECKPOINT = "checkpoint-written"

FILE_SUFFIXES = ("log", "index", "timeindex", "txnindex")   # LogSegment.changeFileSuffixes order
MTIME_SUFFIXES = ("log", "index", "timeindex")              # LogSegment.lastModified_= sets these


# --- swap-in ---------------------------------------------------------------------------------

def _name(base: int, suffix: str, temp: Optional[str] = None) -> str:
    return format_segment_file_name(base, suffix, temp)


def _verify_cleaned_log(path: Path, expected_size: int, expected_digest: int) -> None:
    """Re-read the written .log: same bytes (size and CRC-32C of the whole file, hardware
    accelerated: a blake2b digest cost a tenth of the round), every batch walks and passes its CRC,
    offsets increase."""
    with MappedFile(path) as f:            # one mapping for both checks: no copy into fresh buffers
        view = f.array
        digest = 0
        for at in range(0, len(view), SCAN_WINDOW_BYTES):       # the batch walk's windows, for the same RSS
            end = min(len(view), at + SCAN_WINDOW_BYTES)
            digest = crc32c_update(view[at:end], digest)
            release_pages(view, at, end)    # (the page cache keeps them; the RSS stays one window)
        if len(view) != expected_size or digest != expected_digest:
            raise KafkalogError("the cleaned segment read back differs from what was written", path=path)
        scan = scan_buffer(view, path=path, verify_crc=True, on_corrupt="raise", drop_pages=True)
    h = scan.headers
    back = np.flatnonzero(h.baseOffset[1:] <= h.lastOffset[:-1])
    if back.size:
        raise KafkalogError(f"cleaned segment offsets do not increase at batch {int(back[0]) + 1}", path=path)


def report_step(on_step: Optional[StepHook], step: str, path: Optional[Path]) -> None:
    if on_step is not None:
        on_step(step, path)


def swap_in(directory: Path, g: GroupOutput, on_step: Optional[StepHook]) -> None:
    """Steps a. to e. for one group: its ``.cleaned`` files written and verified, then installed."""
    suffixes = write_cleaned(directory, g, on_step)
    install_cleaned(directory, g.base_offset, [s.base_offset for s in g.sources], suffixes, on_step)


def write_cleaned(directory: Path, g: GroupOutput, on_step: Optional[StepHook]) -> List[str]:
    """Step a. for one group: ``<base>.log.cleaned`` (streamed already) closed and fsynced, its
    ``.index``/``.timeindex`` (``.txnindex`` when an entry) written as ``.cleaned``, mtimes set to the
    last source's, the .log re-read and verified. Returns the suffixes written (for ``install_cleaned``)."""
    base = g.base_offset
    mtime = g.sources[-1].mtime_ns
    offset_index, time_index = g.appender.finish()
    # the .log.cleaned was streamed while the group was cleaned (``CleanedSink``); the indexes are small
    contents = {"log": None, "index": offset_index.to_bytes(), "timeindex": time_index.to_bytes()}
    if g.txn_entries:
        contents["txnindex"] = TransactionIndex(base, tuple(g.txn_entries)).to_bytes()
    # a. the .cleaned files (stale ones first removed), verified
    for suffix in FILE_SUFFIXES:
        stale = directory / _name(base, suffix, CLEANED_SUFFIX)
        if suffix != "log" and stale.exists():
            durable.remove(stale)
    g.sink.close()
    durable.set_mtime(g.sink.path, mtime)
    for suffix, data in contents.items():
        if data is not None:
            durable.write_file(directory / _name(base, suffix, CLEANED_SUFFIX), data,
                               mtime_ns=mtime if suffix in MTIME_SUFFIXES else None)
    fsync_dir(directory)
    _verify_cleaned_log(g.sink.path, g.sink.size, g.sink.digest())
    report_step(on_step, STEP_CLEANED, directory / _name(base, "log", CLEANED_SUFFIX))
    return [suffix for suffix in FILE_SUFFIXES if suffix in contents]


def install_cleaned(directory: Path, base: int, source_bases: List[int], suffixes: List[str],
                    on_step: Optional[StepHook]) -> None:
    """Steps b. to e. for one group whose ``.cleaned`` files (``suffixes``) are written: ``.cleaned``
    → ``.swap``, the sources' files → ``.deleted``, ``.swap`` → live, ``.deleted`` removed.

    :param directory: the partition folder.
    :param base: the cleaned segment's base offset.
    :param source_bases: the base offsets of the segments it replaces, ascending.
    :param suffixes: the ``.cleaned`` files there are (``write_cleaned``'s answer).
    :param on_step: called after each step.
    """
    # b. .cleaned -> .swap
    for suffix in FILE_SUFFIXES:
        if suffix in suffixes:
            target = directory / _name(base, suffix, SWAP_SUFFIX)
            durable.rename(directory / _name(base, suffix, CLEANED_SUFFIX), target)
            fsync_dir(directory)
            report_step(on_step, STEP_SWAP, target)
    # c. old segments -> .deleted (ascending), snapshots of the bases that disappear
    deleted: List[Path] = []
    for source in source_bases:
        all_suffixes = list(FILE_SUFFIXES) + ([SNAPSHOT_SUFFIX] if source != base else [])
        for suffix in all_suffixes:
            src = directory / _name(source, suffix)
            if not src.exists():
                continue
            target = directory / _name(source, suffix, DELETED_SUFFIX)
            durable.rename(src, target)
            deleted.append(target)
            fsync_dir(directory)
            report_step(on_step, STEP_MARK_DELETED, target)
    # d. .swap -> live
    for suffix in FILE_SUFFIXES:
        if suffix in suffixes:
            target = directory / _name(base, suffix)
            durable.rename(directory / _name(base, suffix, SWAP_SUFFIX), target)
            fsync_dir(directory)
            report_step(on_step, STEP_INSTALL, target)
    # e. physical deletion
    for p in deleted:
        durable.remove(p, missing_ok=True)
        report_step(on_step, STEP_PURGE, p)
    fsync_dir(directory)


def update_cleaner_checkpoint(log_dir, topic: str, partition: int, offset: int) -> None:
    """``LogCleanerManager.updateCheckpoints``: set one entry of ``cleaner-offset-checkpoint``
    (read, modify, write atomically through ``.tmp``). One writer per log dir at a time."""
    update_cleaner_checkpoints(log_dir, {TopicPartition(topic, partition): offset})


def update_cleaner_checkpoints(log_dir, offsets) -> None:
    """Set several entries of a log dir's ``cleaner-offset-checkpoint`` in one atomic rewrite: read,
    modify and replace under an exclusive ``flock`` of the log dir itself, so cleaners running at
    once in several processes (Spark tasks) each keep the others' entries. No file is added to the
    log dir for the lock (a broker holds ``.lock`` with a record lock, which ``flock`` does not touch)."""
    if not offsets:
        return
    log_dir = Path(log_dir)
    path = log_dir / CLEANER_OFFSET_CHECKPOINT
    fd = os.open(log_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        entries = read_offset_checkpoint(path)
        entries.update({tp: int(o) for tp, o in offsets.items()})
        write_offset_checkpoint(path, entries)
    finally:
        os.close(fd)          # releases the flock
