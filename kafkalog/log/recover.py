"""Do the file clean-up of a broker's startup (``LogLoader.load``: ``removeTempFilesAndCollectSwapFiles``, the
swap passes, and the orphan-index check of ``loadSegmentFiles``; Kafka's ``LogLoader.java``, its first three
steps), in Kafka's order, partition folder by partition folder, with a report.

1. delete every ``*.deleted`` file (not KRaft ``*.checkpoint.deleted``); collect ``*.cleaned`` and
   ``*.swap``; delete every ``.swap`` whose base offset >= the smallest ``.cleaned`` base offset (an
   incomplete operation), then every ``.cleaned`` file;
2. for each remaining ``<base>.log.swap``: [base, readNextOffset) where readNextOffset is the last
   valid batch's lastOffset + 1 (base when empty); over all of them [min base, max next); delete every
   non-swap file whose leading number (text before the first ``.``) lies in that range; then drop
   the ``.swap`` suffix of every ``.swap`` file (this finishes an interrupted compaction swap);
3. in file-name order, delete every ``.index`` / ``.timeindex`` / ``.txnindex`` whose
   ``<20-digit base>.log`` does not exist ("Found an orphaned index file …, with no corresponding
   log file.").

Left to the broker (it does them at every startup, and they need what only it knows or change
data): the rest of step 3 — creating a missing ``.timeindex`` empty, recovering a segment whose
``.index`` is missing or whose ``.txnindex`` is corrupt; step 4, recovery of the segments after the
recovery point when there was no clean shutdown (``.kafka_cleanshutdown``), truncating a corrupt
tail and deleting every later segment; step 5, deleting every segment when the log end is below the
checkpointed log start; step 6, resizing the active segment's indexes; step 7, removing stray
producer snapshots and rebuilding producer state. ``reindex`` rebuilds missing or wrong index files
and, with ``--truncate-corrupt-tail``, cuts a corrupt tail keeping the cut bytes; an index file
whose name has no number (Kafka's loader fails on it) is reported and left alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Optional

from kafkalog.fs import durable
from kafkalog.fs.durable import fsync_dir
from kafkalog.errors import KafkalogError
from kafkalog.format.file_records import scan_batches
from kafkalog.fs.lock import is_locked, lock_log_dir, locked_refusal
from kafkalog.log.logdir import scan_log_dir
from kafkalog.fs.names import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
                                TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, format_segment_file_name, offset_from_file_name)

KRAFT_DELETED_SUFFIX = ".checkpoint.deleted"   # Snapshots.DELETE_SUFFIX: left to KRaft's own recovery
INDEX_FILE_SUFFIXES = tuple("." + s for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))  # isIndexFile


@dataclass
class PartitionRecovery:
    path: Path
    deleted: List[str] = field(default_factory=list)
    renamed: List[str] = field(default_factory=list)
    swap_range: Optional[tuple] = None
    orphaned_indexes: List[str] = field(default_factory=list)    # deleted: no .log of their base offset
    unreadable_names: List[str] = field(default_factory=list)    # index files whose name has no offset
    error: Optional[str] = None

    @property
    def changed(self) -> bool:
        return bool(self.deleted or self.renamed)

    def describe(self) -> str:
        if self.error:
            return f"{self.path.name}: error: {self.error}"
        parts = []
        if self.swap_range:
            parts.append(f"completed swap of offsets [{self.swap_range[0]}, {self.swap_range[1]})")
        if self.changed:
            parts.append(f"deleted {len(self.deleted)} file(s)")
        if self.renamed:
            parts.append(f"renamed {len(self.renamed)} .swap file(s)")
        line = f"{self.path.name}: " + (", ".join(parts) or "nothing to recover")
        for name in self.orphaned_indexes:
            line += f"\n  Found an orphaned index file {self.path / name}, with no corresponding log file: deleted"
        for name in self.unreadable_names:
            line += (f"\n  {self.path / name}: an index file whose name does not start with an offset; left "
                     "alone (a broker's log loading fails on it)")
        return line


def _read_next_offset(log_swap: Path, base: int) -> int:
    scan = scan_batches(log_swap, verify_crc=False, on_corrupt="stop")
    lasts = scan.batches.column("lastOffset")
    return int(lasts[len(lasts) - 1].as_py()) + 1 if len(lasts) else base


def recover_partition(partition_dir) -> PartitionRecovery:
    """Apply ``LogLoader.load``'s file clean-up (its first three steps) to one partition folder (the caller holds the log dir lock).
    Every deletion and rename goes through ``durable``, so under ``durable.fenced`` each one first
    checks that the lock is still held: a recovery whose lock is lost stops (``error``) and changes
    nothing more. ``partition_dir``: the partition folder. Returns what was deleted and renamed.

    Example::

        import kafkalog
        report = kafkalog.recover_partition("logs/orders-0")
        print(report.describe())
    """
    d = Path(partition_dir)
    report = PartitionRecovery(d)
    try:
        files = sorted(p for p in d.iterdir() if p.is_file())
        cleaned, swaps = [], []
        for p in files:
            name = p.name
            if name.endswith("." + DELETED_SUFFIX) and not name.endswith(KRAFT_DELETED_SUFFIX):
                durable.remove(p, missing_ok=True)
                report.deleted.append(name)
            elif name.endswith("." + CLEANED_SUFFIX):
                cleaned.append(p)
            elif name.endswith("." + SWAP_SUFFIX):
                swaps.append(p)
        offsets = [o for o in (offset_from_file_name(p.name) for p in cleaned) if o is not None]
        min_cleaned = min(offsets) if offsets else None
        valid_swaps = []
        for p in swaps:
            off = offset_from_file_name(p.name)
            if min_cleaned is not None and off is not None and off >= min_cleaned:
                durable.remove(p, missing_ok=True)
                report.deleted.append(p.name)
            else:
                valid_swaps.append(p)
        for p in cleaned:
            durable.remove(p, missing_ok=True)
            report.deleted.append(p.name)
        lo, hi = None, None
        for p in valid_swaps:
            if not p.name.endswith(".log." + SWAP_SUFFIX):
                continue
            base = offset_from_file_name(p.name)
            if base is None:
                continue
            nxt = _read_next_offset(p, base)
            lo = base if lo is None else min(lo, base)
            hi = nxt if hi is None else max(hi, nxt)
        if lo is not None:
            report.swap_range = (lo, hi)
            for p in sorted(q for q in d.iterdir() if q.is_file()):
                if p.name.endswith("." + SWAP_SUFFIX):
                    continue
                off = offset_from_file_name(p.name)
                if off is not None and lo <= off < hi:
                    durable.remove(p, missing_ok=True)
                    report.deleted.append(p.name)
        for p in sorted(q for q in d.iterdir() if q.is_file() and q.name.endswith("." + SWAP_SUFFIX)):
            target = p.with_name(p.name[:-len("." + SWAP_SUFFIX)])
            durable.rename(p, target)
            report.renamed.append(p.name)
        _delete_orphaned_indexes(d, report)
        if report.changed:
            fsync_dir(d)
    except (OSError, KafkalogError) as e:
        report.error = str(e)
    return report


def _delete_orphaned_indexes(d: Path, report: PartitionRecovery) -> None:
    """``loadSegmentFiles``' first check, in sorted file-name order: an index file whose segment has
    no ``<20-digit base>.log`` is deleted."""
    for p in sorted(q for q in d.iterdir() if q.is_file() and q.name.endswith(INDEX_FILE_SUFFIXES)):
        offset = offset_from_file_name(p.name)
        if offset is None or not 0 <= offset < 2**63:
            report.unreadable_names.append(p.name)
        elif not (d / format_segment_file_name(offset, LOG_SUFFIX)).exists():
            durable.remove(p, missing_ok=True)
            report.deleted.append(p.name)
            report.orphaned_indexes.append(p.name)


def recover_log_dirs(log_dirs: Iterable) -> List[PartitionRecovery]:
    """Recover every partition folder of the given log dirs, refusing a dir a live process holds (the
    error names it: a broker, another kafkalog job, or an unknown process): finish or roll back an
    interrupted swap-in, remove temporary files, as a broker's startup does. ``log_dirs``: the log dirs.

    Example::

        import kafkalog
        for report in kafkalog.recover_log_dirs(["logs"]):
            if report.changed:
                print(report.describe())
    """
    reports: List[PartitionRecovery] = []
    for log_dir in log_dirs:
        log_dir = Path(log_dir)
        if is_locked(log_dir):
            raise locked_refusal(log_dir, doing="recover is for a log dir nothing holds: the temporary files there "
                                                "belong to its holder, which finishes or removes them itself")
        scanned = scan_log_dir(log_dir)
        with lock_log_dir(log_dir):
            for p in scanned.partitions:
                reports.append(recover_partition(p.path))
    return reports
