"""Finish or roll back an interrupted compaction swap exactly as a broker's startup does
(``LogLoader.removeTempFilesAndCollectSwapFiles`` and the swap pass of ``LogLoader.load``;
spec §3.3 steps 1-2), partition folder by partition folder, with a report.

1. delete every ``*.deleted`` file (not KRaft ``*.checkpoint.deleted``); collect ``*.cleaned`` and
   ``*.swap``; delete every ``.swap`` whose base offset >= the smallest ``.cleaned`` base offset (an
   incomplete operation), then every ``.cleaned`` file;
2. for each remaining ``<base>.log.swap``: [base, readNextOffset) where readNextOffset is the last
   valid batch's lastOffset + 1 (base when empty); over all of them [min base, max next); delete every
   non-swap file whose leading number (text before the first ``.``) lies in that range; then drop
   the ``.swap`` suffix of every ``.swap`` file.

Nothing else is touched (segment recovery, index rebuilds and truncation are the broker's).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Optional

from ..checkpoint import fsync_dir
from ..errors import KafkalogError, LogDirLockedError
from ..format.file_records import scan_batches
from ..logdir import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, is_locked, lock_log_dir, scan_log_dir

KRAFT_DELETED_SUFFIX = ".checkpoint.deleted"   # Snapshots.DELETE_SUFFIX: left to KRaft's own recovery


@dataclass
class PartitionRecovery:
    path: Path
    deleted: List[str] = field(default_factory=list)
    renamed: List[str] = field(default_factory=list)
    swap_range: Optional[tuple] = None
    error: Optional[str] = None

    @property
    def changed(self) -> bool:
        return bool(self.deleted or self.renamed)

    def describe(self) -> str:
        if self.error:
            return f"{self.path.name}: error: {self.error}"
        if not self.changed:
            return f"{self.path.name}: nothing to recover"
        parts = []
        if self.swap_range:
            parts.append(f"completed swap of offsets [{self.swap_range[0]}, {self.swap_range[1]})")
        parts.append(f"deleted {len(self.deleted)} file(s)")
        if self.renamed:
            parts.append(f"renamed {len(self.renamed)} .swap file(s)")
        return f"{self.path.name}: " + ", ".join(parts)


def _offset_from_name(name: str) -> Optional[int]:
    """``LogFileUtils.offsetFromFileName``: the number before the first '.', None if not a number."""
    head = name.split(".", 1)[0] if "." in name else None
    if not head or not (head.isdigit() or (head[0] in "+-" and head[1:].isdigit())):
        return None
    return int(head)


def _read_next_offset(log_swap: Path, base: int) -> int:
    scan = scan_batches(log_swap, verify_crc=False, on_corrupt="stop")
    lasts = scan.batches.column("lastOffset")
    return int(lasts[len(lasts) - 1].as_py()) + 1 if len(lasts) else base


def recover_partition(partition_dir) -> PartitionRecovery:
    """Apply §3.3 steps 1-2 to one partition folder (the caller holds the log dir lock)."""
    d = Path(partition_dir)
    report = PartitionRecovery(d)
    try:
        files = sorted(p for p in d.iterdir() if p.is_file())
        cleaned, swaps = [], []
        for p in files:
            name = p.name
            if name.endswith("." + DELETED_SUFFIX) and not name.endswith(KRAFT_DELETED_SUFFIX):
                p.unlink(missing_ok=True)
                report.deleted.append(name)
            elif name.endswith("." + CLEANED_SUFFIX):
                cleaned.append(p)
            elif name.endswith("." + SWAP_SUFFIX):
                swaps.append(p)
        offsets = [o for o in (_offset_from_name(p.name) for p in cleaned) if o is not None]
        min_cleaned = min(offsets) if offsets else None
        valid_swaps = []
        for p in swaps:
            off = _offset_from_name(p.name)
            if min_cleaned is not None and off is not None and off >= min_cleaned:
                p.unlink(missing_ok=True)
                report.deleted.append(p.name)
            else:
                valid_swaps.append(p)
        for p in cleaned:
            p.unlink(missing_ok=True)
            report.deleted.append(p.name)
        lo, hi = None, None
        for p in valid_swaps:
            if not p.name.endswith(".log." + SWAP_SUFFIX):
                continue
            base = _offset_from_name(p.name)
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
                off = _offset_from_name(p.name)
                if off is not None and lo <= off < hi:
                    p.unlink(missing_ok=True)
                    report.deleted.append(p.name)
        for p in sorted(q for q in d.iterdir() if q.is_file() and q.name.endswith("." + SWAP_SUFFIX)):
            target = p.with_name(p.name[:-len("." + SWAP_SUFFIX)])
            os.replace(p, target)
            report.renamed.append(p.name)
        if report.changed:
            fsync_dir(d)
    except (OSError, KafkalogError) as e:
        report.error = str(e)
    return report


def recover_log_dirs(log_dirs: Iterable) -> List[PartitionRecovery]:
    """Recover every partition folder of the given log dirs, refusing a dir a live broker holds."""
    reports: List[PartitionRecovery] = []
    for log_dir in log_dirs:
        log_dir = Path(log_dir)
        if is_locked(log_dir):
            raise LogDirLockedError("the log dir is locked by a running broker; it recovers its own files",
                                    path=log_dir / ".lock")
        scanned = scan_log_dir(log_dir)
        with lock_log_dir(log_dir):
            for p in scanned.partitions:
                reports.append(recover_partition(p.path))
    return reports
