"""Verifying a segment's time index (``.timeindex``) against its log: the rules in
``kafkalog.index.verify``'s docstring."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from kafkalog.errors import KafkalogError
from kafkalog.index.builder import build_indexes
from kafkalog.index.time_index import TIME_ENTRY_DTYPE, TIME_ENTRY_SIZE, TimeIndex
from kafkalog.index.verdicts import CORRUPT, TIME_INDEX, VALID, Batches, IndexVerdict, first_violation, open_index


def verify_time_index(path: Path, base: int, b: Batches, rebuilt: Optional[TimeIndex], is_active: bool,
                       interval: int, segment_index_bytes: int,
                       interval_range: Optional[Tuple[int, int]]) -> IndexVerdict:
    expected = None if rebuilt is None else len(rebuilt)
    opened = open_index(path, TIME_INDEX, TIME_ENTRY_DTYPE, "timestamp", expected=expected,
                        missing="no .timeindex: a broker creates it EMPTY at startup (not rebuilt), so retention "
                                "falls back to the .log mtime", is_active=is_active,
                        segment_index_bytes=segment_index_bytes,
                        rebuilt=None if rebuilt is None else rebuilt.to_bytes())
    if isinstance(opened, IndexVerdict):
        return opened
    data, n, pad_note = opened.data, opened.entries, opened.padding_note
    ts = opened.slots["timestamp"].astype(np.int64)
    rel = opened.slots["relative_offset"].astype(np.int64)
    offsets = rel + base

    log_last = int(b.last[-1]) if b.n else base - 1
    first_off = b.first_offsets()
    k = np.searchsorted(b.last, offsets, side="left")          # first batch ending at or after O
    kc = np.minimum(k, max(b.n - 1, 0))
    in_batch = (k < b.n) & (first_off[kc] <= offsets) if b.n else np.zeros(n, bool)
    batch_ts = b.max_ts[kc] if b.n else np.zeros(n, np.int64)
    earlier_max = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(b.max_ts)[:-1])) if b.n \
        else np.zeros(0, np.int64)
    before = earlier_max[kc] if b.n else np.full(n, np.iinfo(np.int64).min)
    prev_t = np.concatenate(([np.iinfo(np.int64).min], ts[:-1]))
    prev_o = np.concatenate(([np.iinfo(np.int64).min], offsets[:-1]))
    zero_slot = (ts == 0) & (rel == 0)

    def zero_hint(i: int) -> str:
        return " (an all-zero slot: an untrimmed preallocated tail)" if zero_slot[i] else ""

    rules = [
        (rel < 0, lambda i: f"relative offset {rel[i]} is negative (offset {offsets[i]} is below the base "
                            f"offset {base})"),
        (ts <= prev_t, lambda i: f"timestamp {ts[i]} is not above the previous entry's {prev_t[i]} (out of "
                                 f"order){zero_hint(i)}"),
        (offsets < prev_o, lambda i: f"offset {offsets[i]} is below the previous entry's offset {prev_o[i]} "
                                     f"(out of order){zero_hint(i)}"),
        (offsets > log_last, lambda i: f"offset {offsets[i]} is past the log's last offset {log_last}"),
        (~in_batch, lambda i: f"offset {offsets[i]} is in no batch of the log"),
        (batch_ts != ts, lambda i: f"timestamp {ts[i]} is not the max timestamp {batch_ts[i]} of the batch "
                                   f"holding offset {offsets[i]}{zero_hint(i)}"),
        (before >= ts, lambda i: f"an earlier batch already carries timestamp {before[i]} >= {ts[i]}: a lookup by "
                                 "timestamp through this entry would skip it"),
    ]
    first = first_violation(rules, n)
    if first is not None:
        i, message = first
        return IndexVerdict(TIME_INDEX, path, CORRUPT, f"entry {i}: {message}", len(data), n, expected,
                            first_bad_entry=i, first_bad_position=i * TIME_ENTRY_SIZE)
    seg_max = int(b.max_ts.max()) if b.n else -1
    last_t = int(ts[-1]) if n else -1
    if not is_active and seg_max >= 0 and last_t < seg_max:
        what = ("is empty" if n == 0 else f"ends at timestamp {last_t}")
        return IndexVerdict(
            TIME_INDEX, path, CORRUPT,
            f"entry {n}: the final (roll) entry is missing: the index {what} but the segment's max timestamp is "
            f"{seg_max}; retention reads the last entry as the segment's largest timestamp"
            + (" (an empty .timeindex is what a broker creates when the file was missing)" if n == 0 else ""),
            len(data), n, expected, first_bad_entry=n, first_bad_position=n * TIME_ENTRY_SIZE)

    reasons = [pad_note] if pad_note else []
    batch_last = b.last[kc] if b.n else offsets
    record_level = offsets != batch_last
    if record_level.any():
        reasons.append(f"{int(record_level.sum())} of {n} entries hold the offset of the record with the max "
                       "timestamp inside its batch where recovery stores the batch's last offset (older brokers' "
                       "append path, changed around KAFKA-16310)")
    if rebuilt is not None:
        normal = (ts, batch_last)
        same = _same_time_entries(normal, rebuilt, is_active)
        if not same:
            explained = False
            if interval_range is not None and interval_range[0] != interval:
                try:
                    _, other = build_indexes(base_offset=base, positions=b.position, sizes=b.size,
                                             last_offsets=b.last, max_timestamps=b.max_ts,
                                             index_interval_bytes=interval_range[0])
                    if _same_time_entries(normal, other, is_active):
                        lo, hi = interval_range
                        span = f"={lo}" if lo == hi else f" in {lo}..{hi}" if hi < 2**62 else f" >= {lo}"
                        reasons.append(f"entries are where index.interval.bytes{span} puts them (the interval the "
                                       f"offset index shows), not the configured {interval}")
                        explained = True
                except KafkalogError:
                    pass
            if not explained:
                reasons.append(f"entries sit at other batches than recovery's with index.interval.bytes={interval} "
                               "(another interval, a broker restart's close entry, follower or cleaner appends)")
        if is_active and n < len(rebuilt) and same:
            reasons.append("no final entry yet (an active segment gets it when rolled or closed)")
    if not reasons:
        reasons.append("laid out differently from Kafka's recovery rebuild")
    return IndexVerdict(TIME_INDEX, path, VALID, "; ".join(reasons), len(data), n, expected)


def _same_time_entries(normal: Tuple[np.ndarray, np.ndarray], rebuilt: TimeIndex, is_active: bool) -> bool:
    ts, offsets = normal
    if is_active and len(ts) <= len(rebuilt):
        # an active segment's entries are a prefix of the rebuild's (its final entry comes at roll/close)
        return np.array_equal(ts, rebuilt.timestamps[:len(ts)]) and np.array_equal(offsets,
                                                                                    rebuilt.offsets[:len(ts)])
    return np.array_equal(ts, rebuilt.timestamps) and np.array_equal(offsets, rebuilt.offsets)
