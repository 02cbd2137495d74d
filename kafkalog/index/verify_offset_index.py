"""Verifying a segment's offset index (``.index``) against its log: the rules in
``kafkalog.index.verify``'s docstring, and the ``index.interval.bytes`` its entries imply."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from kafkalog.fs import filesystem
from kafkalog.index.offset_index import OFFSET_ENTRY_DTYPE, OFFSET_ENTRY_SIZE, OffsetIndex
from kafkalog.index.verdicts import (CORRUPT, OFFSET_INDEX, VALID, Batches, IndexVerdict, LogTail, first_violation,
                                     open_index)


def verify_offset_index(path: Path, base: int, b: Batches, tail: LogTail, rebuilt: Optional[OffsetIndex],
                         is_active: bool, interval: int, segment_index_bytes: int) -> IndexVerdict:
    expected = None if rebuilt is None else len(rebuilt)
    opened = open_index(path, OFFSET_INDEX, OFFSET_ENTRY_DTYPE, "position", expected=expected,
                        missing="no .index: a broker recovers (rebuilds) the segment at startup", is_active=is_active,
                        segment_index_bytes=segment_index_bytes,
                        rebuilt=None if rebuilt is None else rebuilt.to_bytes())
    if isinstance(opened, IndexVerdict):
        return opened
    data, n, pad_note = opened.data, opened.entries, opened.padding_note
    rel = opened.slots["relative_offset"].astype(np.int64)
    pos = opened.slots["position"].astype(np.int64)
    offsets = rel + base

    log_last = int(b.last[-1]) if b.n else base - 1
    j = np.searchsorted(b.position, pos)
    jc = np.minimum(j, max(b.n - 1, 0))
    is_start = (j < b.n) & (b.position[jc] == pos) if b.n else np.zeros(n, bool)
    prev_last = np.where(j > 0, b.last[np.maximum(j - 1, 0)] if b.n else base - 1, np.iinfo(np.int64).min)
    prev_o = np.concatenate(([np.iinfo(np.int64).min], offsets[:-1]))
    prev_p = np.concatenate(([-1], pos[:-1]))
    zero_slot = (rel == 0) & (pos == 0)
    rules = [
        (rel < 0, lambda i: f"relative offset {rel[i]} is negative (offset {offsets[i]} is below the base offset "
                            f"{base}; Kafka's sanity check rejects it)"),
        (pos == 0, lambda i: ("an all-zero slot: an untrimmed preallocated tail in a rolled segment (Kafka counts "
                              f"it as entry ({base}, position 0))") if zero_slot[i] else
         f"position 0 for offset {offsets[i]}: Kafka never indexes the segment's first batch"),
        (offsets <= prev_o, lambda i: f"offset {offsets[i]} is not above the previous entry's offset {prev_o[i]} "
                                      "(entries out of order)"),
        (pos <= prev_p, lambda i: f"position {pos[i]} is not above the previous entry's position {prev_p[i]} "
                                  "(entries out of order)"),
        (pos >= tail.valid_bytes, lambda i: f"position {pos[i]} is past the end of the log's valid bytes "
                                            f"({tail.valid_bytes}{' of ' + str(tail.size) if tail.corrupt else ''})"),
        (~is_start, lambda i: f"position {pos[i]} is not the start of a batch (the batch at "
                              f"{int(b.position[max(int(j[i]) - 1, 0)])} covers it)"),
        (offsets > log_last, lambda i: f"offset {offsets[i]} is past the log's last offset {log_last}"),
        (prev_last >= offsets, lambda i: f"offset {offsets[i]} is not after the batch before position {pos[i]}, "
                                         f"which ends at offset {prev_last[i]}: a lookup of offsets "
                                         f"{offsets[i]}..{prev_last[i]} would start after their batch"),
    ]
    first = first_violation(rules, n)
    if first is not None:
        i, message = first
        return IndexVerdict(OFFSET_INDEX, path, CORRUPT, f"entry {i}: {message}", len(data), n, expected,
                            first_bad_entry=i, first_bad_position=i * OFFSET_ENTRY_SIZE)
    reasons = [pad_note] if pad_note else []
    if rebuilt is not None and not (np.array_equal(offsets, rebuilt.offsets) and np.array_equal(pos, rebuilt.positions)):
        reasons.append(_explain_offset_layout(offsets, pos, j, b, rebuilt, interval))
    if not reasons:
        reasons.append("laid out differently from Kafka's recovery rebuild")
    return IndexVerdict(OFFSET_INDEX, path, VALID, "; ".join(reasons), len(data), n, expected)


def _interval_bounds(positions: np.ndarray, entry_batches: np.ndarray) -> Tuple[int, int, int]:
    """For batch-granular entries at batches ``entry_batches``: the index.interval.bytes range
    [lo, hi] that places every entry where it is (recovery's greedy rule), and ``tail_lo``, the
    lower bound the batches after the last entry add (an index that stops early breaks only that)."""
    lo, hi = 0, np.iinfo(np.int64).max
    last_pos = 0
    for k in entry_batches.tolist():
        if k >= 1:
            lo = max(lo, int(positions[k - 1]) - last_pos)
        hi = min(hi, int(positions[k]) - last_pos - 1)
        last_pos = int(positions[k])
    tail_lo = int(positions[-1]) - last_pos if positions.size else 0
    return lo, hi, tail_lo


def _explain_offset_layout(offsets: np.ndarray, pos: np.ndarray, j: np.ndarray, b: Batches, rebuilt: OffsetIndex, interval: int) -> str:
    chunk = offsets != b.last[j]
    if chunk.any():
        return (f"{int(chunk.sum())} of {len(offsets)} entries map the last offset of a multi-batch append to the "
                "position of its first batch (follower fetches, cleaner or split output: LogSegment.append indexes per append)")
    lo, hi, tail_lo = _interval_bounds(b.position, j)
    if lo <= hi and tail_lo <= hi and max(lo, tail_lo) <= hi:
        lo = max(lo, tail_lo)
        span = f"={lo}" if lo == hi else (f" in {lo}..{hi}" if hi < 2**62 else f" >= {lo}")
        return (f"entries are where recovery puts them with index.interval.bytes{span} (the next batch more than "
                f"that many bytes after the previous entry), not the configured {interval}: the broker used "
                "another interval")
    if lo <= hi:
        return (f"entries stop at position {int(pos[-1]) if len(pos) else 0} although the log goes on to "
                f"{int(b.position[-1]) if b.n else 0}: the index ends early ({len(rebuilt)} entries after a "
                f"rebuild, {len(offsets)} here)")
    return ("batch-granular entries at a spacing no single index.interval.bytes gives (a broker restart while the "
            "segment was active, a changed interval, or a follower truncation)")


def offset_index_interval(verdict: IndexVerdict, path: Path, base: int, b: Batches,
                           is_active: bool) -> Optional[Tuple[int, int]]:
    """The index.interval.bytes range the offset index was written with, when it is batch-granular
    and consistent with one interval; used to explain the time index."""
    if verdict.status != VALID or b.n == 0:
        return None
    slots = np.frombuffer(filesystem.read_bytes(path), dtype=OFFSET_ENTRY_DTYPE)
    pos = slots["position"].astype(np.int64)[:verdict.entries]
    offsets = slots["relative_offset"].astype(np.int64)[:verdict.entries] + base
    j = np.searchsorted(b.position, pos)
    if not np.array_equal(b.last[j], offsets):
        return None
    lo, hi, tail_lo = _interval_bounds(b.position, j)
    lo = max(lo, tail_lo)
    return (lo, hi) if lo <= hi else None
