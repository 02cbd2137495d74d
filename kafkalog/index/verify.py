"""Index verification: is each of a segment's ``.index``, ``.timeindex`` and ``.txnindex`` what
Kafka's recovery would build from the ``.log`` (spec §5.2-§5.4), a valid index laid out differently,
missing, or corrupt — and, for the ``.log`` itself, where its valid bytes end.

Every index file gets one class (``IndexVerdict.status``):

``identical``
    byte-identical to the rebuild (§5.2 over the valid batches with the topic's
    ``index.interval.bytes``, trimmed, with the final roll/close time-index entry, §5.3).
``valid``
    not identical, but every entry is consistent with the log, so every lookup a broker makes through
    it is right; ``reason`` says how it differs (§5.4): chunk-granular entries of follower fetches or
    cleaner output, entries where another ``index.interval.bytes`` puts them (the interval is inferred
    from the entries), a broker restart, an index that stops early, older brokers' time-index entries
    that hold the offset of the RECORD with the max timestamp instead of its batch's last offset (the
    ``pinterest__tiered-storage`` fixtures), the zero-padded preallocated file of an active segment.
``missing``
    no file. (``.txnindex`` only when an aborted transaction ends in the segment: Kafka creates that
    file for the first one, §3.2; an absent ``.txnindex`` with nothing to hold gets no verdict.)
``corrupt``
    some entry is not consistent with the log; ``first_bad_entry`` (slot number),
    ``first_bad_position`` (byte in the index file) and ``reason`` name the first one.

How many slots count (§4.3): a ROLLED segment's index is trimmed by Kafka, and Kafka counts
``length // entry size`` entries, so every slot is an entry and a zero slot (an untrimmed
preallocated tail) is corrupt. An ACTIVE segment's files are preallocated to ``segment.index.bytes``
with a zero tail: its entries end at the first zero slot (DumpLogSegments' rule) and every byte after
must be zero; it needs no final time-index entry yet.

Offset index, entry ``i`` = (offset O, position P), checked in this order (§4.1, §4.5, §4.7):
the length is a multiple of 8; O ≥ base offset; P > 0 (Kafka never indexes the first batch, so an
all-zero slot is padding); O and P strictly increase; P < the valid bytes of the ``.log`` and is the
start of a batch; O ≤ the log's last offset; the batch before P ends below O (else a lookup of an
offset between them would start after its batch).

Time index, entry ``i`` = (timestamp T, offset O) (§4.1, §4.5, §4.7, §9): the length is a multiple
of 12; O ≥ base offset; T strictly and O weakly increase; O ≤ the log's last offset and lies in a
batch (v2: [baseOffset, lastOffset]; legacy: after the previous batch's last offset); that batch's
max timestamp is T (DumpLogSegments' timestamp check); no earlier batch carries a timestamp ≥ T
(else a lookup by timestamp would skip it). A rolled segment's last entry must carry the segment's
max timestamp (the final roll entry, §5.3: retention reads it as ``largestTimestamp``).

Transaction index (§3.6): whole 34-byte entries (a partial tail is corrupt), version 0, lastOffset
within the segment and strictly increasing, firstOffset ≤ lastOffset, an ABORT marker of that
producer at lastOffset, and no aborted transaction of the log left out. The rebuild replays producer
state (``kafkalog.index.builder.replay_transactions``) from the state at the segment's start — the
``<base>.snapshot`` when there is one, else what the previous segments left. When that state is
unknown (the partition's first segment starts above 0 with no snapshot), an existing entry for a
marker whose transaction began earlier is kept, and differing first/last-stable offsets are
``valid``, not ``corrupt``.

The ``.log`` (§5.2): batches are walked with CRC checks as recovery does; ``LogTail`` holds the valid
bytes, the size and the first problem. Indexes are judged against the valid prefix only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from kafkalog.errors import KafkalogError, OffsetOverflowError
from kafkalog.format import control_record as cr
from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES
from kafkalog.format.file_records import recovery_valid_bytes, scan_buffer
from kafkalog.format.records_reference import decode_v2_batch
from kafkalog.index.builder import DEFAULT_INDEX_INTERVAL_BYTES, build_indexes, replay_transactions
from kafkalog.index.offset_index import OFFSET_ENTRY_DTYPE, OFFSET_ENTRY_SIZE, OffsetIndex
from kafkalog.index.time_index import TIME_ENTRY_DTYPE, TIME_ENTRY_SIZE, TimeIndex
from kafkalog.index.transaction_index import TXN_ENTRY_SIZE, TransactionIndex, parse_transaction_index
from kafkalog.log import filesystem
from kafkalog.log.logdir import format_segment_file_name

IDENTICAL, VALID, MISSING, CORRUPT = "identical", "valid", "missing", "corrupt"
CLASSES = (IDENTICAL, VALID, MISSING, CORRUPT)
OFFSET_INDEX, TIME_INDEX, TXN_INDEX = "index", "timeindex", "txnindex"
INDEX_KINDS = (OFFSET_INDEX, TIME_INDEX, TXN_INDEX)
DEFAULT_SEGMENT_INDEX_BYTES = 10_485_760


@dataclass(frozen=True)
class IndexVerdict:
    """The class of one index file. ``entries`` counts the entries read (an active segment's valid
    prefix); ``expected_entries`` those of the rebuild (None when the log allows none)."""

    kind: str                           # index / timeindex / txnindex
    path: Path
    status: str                         # one of CLASSES
    reason: str
    file_size: Optional[int]            # None when missing
    entries: int = 0
    expected_entries: Optional[int] = None
    first_bad_entry: Optional[int] = None
    first_bad_position: Optional[int] = None


@dataclass(frozen=True)
class LogTail:
    """Where the ``.log``'s valid bytes end (recovery truncates there) and why."""

    size: int
    valid_bytes: int
    error: Optional[str] = None
    kafka_keeps_tail: bool = False      # Kafka's recovery keeps bytes past where our walk stopped
    recovery_valid_bytes: Optional[int] = None   # where Kafka's recovery truncates (file_records)

    @property
    def corrupt(self) -> bool:
        return self.valid_bytes < self.size

    @property
    def first_bad_position(self) -> Optional[int]:
        return self.valid_bytes if self.corrupt else None


@dataclass
class SegmentVerification:
    """The verdicts for one segment, and the rebuilt indexes (None when the log forbids a rebuild:
    ``rebuild_error`` says why: offsets beyond 32 bits of the base, which Kafka's recovery splits
    into new segments, or offsets that make it empty the segment)."""

    log_path: Path
    base_offset: int
    is_active: bool
    log: LogTail
    verdicts: List[IndexVerdict]
    offset_index: Optional[OffsetIndex] = None
    time_index: Optional[TimeIndex] = None
    txn_index: Optional[TransactionIndex] = None
    rebuild_error: Optional[str] = None
    open_txns_after: Dict[int, int] = field(default_factory=dict)
    txn_state_known_after: bool = True
    txn_state_known: bool = True     # the producer state at the segment's start was complete

    def verdict(self, kind: str) -> Optional[IndexVerdict]:
        return next((v for v in self.verdicts if v.kind == kind), None)


@dataclass
class _Batches:
    """The valid batches of a segment as int64 arrays (file order)."""

    position: np.ndarray
    size: np.ndarray
    base: np.ndarray
    last: np.ndarray
    max_ts: np.ndarray
    magic: np.ndarray
    producer_id: np.ndarray
    is_txn: np.ndarray
    is_control: np.ndarray
    control_type: np.ndarray

    @property
    def n(self) -> int:
        return int(self.position.shape[0])

    def first_offsets(self) -> np.ndarray:
        """The first offset each batch covers: v2 baseOffset; legacy: one past the previous batch."""
        prev = np.concatenate(([np.iinfo(np.int64).min // 2], self.last[:-1] + 1)) if self.n else self.last
        return np.where(self.magic == 2, self.base, prev)


# --- reading the log ---------------------------------------------------------------------------

def _read_log(log_path: Path) -> Tuple[_Batches, LogTail]:
    with filesystem.open_view(log_path) as f:
        scan = scan_buffer(f.array, path=log_path, verify_crc=True, on_corrupt="stop")
        kafka_end = scan.valid_bytes if scan.error is None else recovery_valid_bytes(f.array, path=log_path)[0]
        t = scan.batches
        col = {name: t.column(name).to_numpy(zero_copy_only=False) for name in
               ("position", "size", "baseOffset", "lastOffset", "maxTimestamp", "magic", "producerId",
                "isTransactional", "isControl")}
        control_type = np.full(t.num_rows, -1, np.int64)
        for i in np.flatnonzero(col["isControl"]).tolist():
            try:
                _, records = decode_v2_batch(f.array, int(col["position"][i]), path=log_path,
                                             max_batch_bytes=DEFAULT_MAX_BATCH_BYTES)
                if records:
                    control_type[i] = cr.parse_control_type(records[0].key)
            except KafkalogError:
                control_type[i] = cr.UNKNOWN
    batches = _Batches(
        position=col["position"].astype(np.int64), size=col["size"].astype(np.int64),
        base=col["baseOffset"].astype(np.int64), last=col["lastOffset"].astype(np.int64),
        max_ts=col["maxTimestamp"].astype(np.int64), magic=col["magic"].astype(np.int64),
        producer_id=col["producerId"].astype(np.int64), is_txn=col["isTransactional"].astype(bool),
        is_control=col["isControl"].astype(bool), control_type=control_type)
    error = None if scan.error is None else str(scan.error.message if isinstance(scan.error, KafkalogError)
                                                 else scan.error)
    tail = LogTail(size=scan.file_size, valid_bytes=scan.valid_bytes, error=error,
                   kafka_keeps_tail=kafka_end > scan.valid_bytes, recovery_valid_bytes=kafka_end)
    return batches, tail


# --- verification --------------------------------------------------------------------------------

def verify_segment(
    log_path: os.PathLike | str,
    *,
    is_active: bool = False,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    base_offset: Optional[int] = None,
    open_txns: Optional[Mapping[int, int]] = None,
    txn_state_known: bool = True,
) -> SegmentVerification:
    """Classify the three index files beside ``log_path`` (``<base>.index`` etc.).

    ``is_active``: the partition's last segment (zero-padded files allowed, no final time entry
    needed). ``open_txns`` (producer id → first offset of its open transaction) is the producer
    state at the segment's start; ``txn_state_known`` says whether it is complete (see the module
    docstring). The base offset comes from the file name unless given.
    """
    log_path = Path(log_path)
    base = int(base_offset) if base_offset is not None else int(log_path.name.split(".", 1)[0])
    folder = log_path.parent
    batches, tail = _read_log(log_path)

    rebuild_error = None
    offset_index = time_index = None
    try:
        offset_index, time_index = build_indexes(
            base_offset=base, positions=batches.position, sizes=batches.size, last_offsets=batches.last,
            max_timestamps=batches.max_ts, index_interval_bytes=index_interval_bytes)
    except OffsetOverflowError as exc:
        rebuild_error = (f"this segment's offsets do not fit its indexes ({exc.message}); Kafka's recovery "
                         "splits such a segment into segments that each fit (LogLoader.retryOnOffsetOverflow → "
                         "LocalLog.splitOverflowedSegment, KAFKA-6264; its cleaner does the same), which kafkalog "
                         "does not do, so its indexes are not rebuilt")
    except KafkalogError as exc:
        rebuild_error = (f"Kafka's recovery cannot index this log ({exc.message}); it would empty the segment, "
                         "so kafkalog does not rebuild it")

    txn_index, open_after, known_after, kept = _rebuild_txn_index(base, batches, folder, open_txns, txn_state_known)

    verdicts = [
        _verify_offset_index(folder / format_segment_file_name(base, OFFSET_INDEX), base, batches, tail,
                             offset_index, is_active, index_interval_bytes, segment_index_bytes),
    ]
    interval_range = _offset_index_interval(verdicts[0], folder / format_segment_file_name(base, OFFSET_INDEX),
                                            base, batches, is_active)
    verdicts.append(_verify_time_index(folder / format_segment_file_name(base, TIME_INDEX), base, batches,
                                       time_index, is_active, index_interval_bytes, segment_index_bytes,
                                       interval_range))
    txn_verdict = _verify_txn_index(folder / format_segment_file_name(base, TXN_INDEX), base, batches,
                                    txn_index, txn_state_known, kept)
    if txn_verdict is not None:
        verdicts.append(txn_verdict)
    if rebuild_error:
        verdicts = [v if v.status in (CORRUPT, MISSING) or v.kind == TXN_INDEX else
                    IndexVerdict(v.kind, v.path, VALID, f"{v.reason}; {rebuild_error}".lstrip("; "),
                                 v.file_size, v.entries, None) for v in verdicts]
    return SegmentVerification(log_path=log_path, base_offset=base, is_active=is_active, log=tail,
                               verdicts=verdicts, offset_index=offset_index, time_index=time_index,
                               txn_index=txn_index, rebuild_error=rebuild_error, open_txns_after=open_after,
                               txn_state_known_after=known_after, txn_state_known=txn_state_known)


def _read_slots(path: Path, dtype: np.dtype, entry_size: int, kind: str):
    """(raw bytes, slots array) or a corrupt verdict for a length that is not a multiple of the entry."""
    data = filesystem.read_bytes(path)
    if len(data) % entry_size:
        whole = len(data) // entry_size
        return data, None, IndexVerdict(
            kind, path, CORRUPT,
            f"file size {len(data)} bytes is not a multiple of the {entry_size}-byte entry: a partial entry of "
            f"{len(data) % entry_size} bytes at the end (Kafka's sanity check rejects it)",
            len(data), whole, first_bad_entry=whole, first_bad_position=whole * entry_size)
    return data, np.frombuffer(data, dtype=dtype), None


def _active_prefix(path: Path, kind: str, data: bytes, slots: np.ndarray, n_valid: int, entry_size: int,
                   segment_index_bytes: int) -> Tuple[Optional[IndexVerdict], Optional[str]]:
    """For an active segment: every byte after the valid prefix must be zero. Returns (corrupt verdict,
    padding note)."""
    tail = np.frombuffer(data, dtype=np.uint8)[n_valid * entry_size:]
    if tail.size == 0:
        return None, None
    nonzero = np.flatnonzero(tail)
    if nonzero.size:
        slot = n_valid + int(nonzero[0]) // entry_size
        return IndexVerdict(
            kind, path, CORRUPT,
            f"slot {slot} holds data after the zero slot {n_valid} that ends the active segment's entries "
            "(a torn preallocated file; a broker rebuilds the active segment after an unclean shutdown)",
            len(data), n_valid, first_bad_entry=slot, first_bad_position=slot * entry_size), None
    prealloc = (segment_index_bytes // entry_size) * entry_size
    size_note = "preallocated to segment.index.bytes" if len(data) == prealloc else f"zero-padded to {len(data)} bytes"
    return None, (f"active segment's file is {size_note} ({len(slots) - n_valid} zero slots after {n_valid} "
                  "entries), as while a broker owns it")


def _zero_prefix(first: np.ndarray, second: np.ndarray) -> int:
    """DumpLogSegments' valid prefix: stop at the first slot i > 0 whose relative offset is 0; an
    all-zero slot 0 means no entries."""
    n = first.shape[0]
    if n == 0 or (first[0] == 0 and second[0] == 0):
        return 0
    zero = np.flatnonzero(first[1:] == 0)
    return int(zero[0]) + 1 if zero.size else n


def _first(mask: np.ndarray) -> Optional[int]:
    hit = np.flatnonzero(mask)
    return int(hit[0]) if hit.size else None


def _verify_offset_index(path: Path, base: int, b: _Batches, tail: LogTail, rebuilt: Optional[OffsetIndex],
                         is_active: bool, interval: int, segment_index_bytes: int) -> IndexVerdict:
    expected = None if rebuilt is None else len(rebuilt)
    if not filesystem.exists(path):
        return IndexVerdict(OFFSET_INDEX, path, MISSING,
                            "no .index: a broker recovers (rebuilds) the segment at startup", None, 0, expected)
    data, slots, bad = _read_slots(path, OFFSET_ENTRY_DTYPE, OFFSET_ENTRY_SIZE, OFFSET_INDEX)
    if bad is not None:
        return _with_expected(bad, expected)
    rel = slots["relative_offset"].astype(np.int64)
    pos = slots["position"].astype(np.int64)
    pad_note = None
    n = len(slots)
    if is_active:
        n = _zero_prefix(rel, pos)
        bad, pad_note = _active_prefix(path, OFFSET_INDEX, data, slots, n, OFFSET_ENTRY_SIZE, segment_index_bytes)
        if bad is not None:
            return _with_expected(bad, expected)
        rel, pos = rel[:n], pos[:n]
    offsets = rel + base
    if rebuilt is not None and data == rebuilt.to_bytes():
        return IndexVerdict(OFFSET_INDEX, path, IDENTICAL, "byte-identical to Kafka's recovery rebuild", len(data),
                            n, expected)

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
                              f"{int(b.position[max(j[i] - 1, 0)])} covers it)"),
        (offsets > log_last, lambda i: f"offset {offsets[i]} is past the log's last offset {log_last}"),
        (prev_last >= offsets, lambda i: f"offset {offsets[i]} is not after the batch before position {pos[i]}, "
                                         f"which ends at offset {prev_last[i]}: a lookup of offsets "
                                         f"{offsets[i]}..{prev_last[i]} would start after their batch"),
    ]
    first = _first_violation(rules, n)
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


def _with_expected(v: IndexVerdict, expected: Optional[int]) -> IndexVerdict:
    return IndexVerdict(v.kind, v.path, v.status, v.reason, v.file_size, v.entries, expected, v.first_bad_entry,
                        v.first_bad_position)


def _first_violation(rules, n: int) -> Optional[Tuple[int, str]]:
    """The smallest entry breaking any rule, with the message of the first rule it breaks."""
    best = None
    for mask, _ in rules:
        i = _first(mask[:n]) if n else None
        if i is not None and (best is None or i < best):
            best = i
    if best is None:
        return None
    for mask, message in rules:
        if mask[best]:
            return best, message(best)
    return None  # pragma: no cover


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


def _explain_offset_layout(offsets, pos, j, b: _Batches, rebuilt: OffsetIndex, interval: int) -> str:
    chunk = offsets != b.last[j]
    if chunk.any():
        return (f"{int(chunk.sum())} of {len(offsets)} entries map the last offset of a multi-batch append to the "
                "position of its first batch (follower fetches, cleaner or split output; spec §5.4)")
    lo, hi, tail_lo = _interval_bounds(b.position, j)
    if lo <= hi and tail_lo <= hi and max(lo, tail_lo) <= hi:
        lo = max(lo, tail_lo)
        span = f"={lo}" if lo == hi else (f" in {lo}..{hi}" if hi < 2**62 else f" >= {lo}")
        return (f"entries are where recovery puts them with index.interval.bytes{span} (the next batch more than "
                f"that many bytes after the previous entry), not the configured {interval}: the broker used "
                "another interval (spec §5.4)")
    if lo <= hi:
        return (f"entries stop at position {int(pos[-1]) if len(pos) else 0} although the log goes on to "
                f"{int(b.position[-1]) if b.n else 0}: the index ends early ({len(rebuilt)} entries after a "
                f"rebuild, {len(offsets)} here)")
    return ("batch-granular entries at a spacing no single index.interval.bytes gives (a broker restart while the "
            "segment was active, a changed interval, or a follower truncation; spec §5.4)")


def _offset_index_interval(verdict: IndexVerdict, path: Path, base: int, b: _Batches,
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


def _verify_time_index(path: Path, base: int, b: _Batches, rebuilt: Optional[TimeIndex], is_active: bool,
                       interval: int, segment_index_bytes: int,
                       interval_range: Optional[Tuple[int, int]]) -> IndexVerdict:
    expected = None if rebuilt is None else len(rebuilt)
    if not filesystem.exists(path):
        return IndexVerdict(TIME_INDEX, path, MISSING,
                            "no .timeindex: a broker creates it EMPTY at startup (not rebuilt), so retention "
                            "falls back to the .log mtime", None, 0, expected)
    data, slots, bad = _read_slots(path, TIME_ENTRY_DTYPE, TIME_ENTRY_SIZE, TIME_INDEX)
    if bad is not None:
        return _with_expected(bad, expected)
    ts = slots["timestamp"].astype(np.int64)
    rel = slots["relative_offset"].astype(np.int64)
    pad_note = None
    n = len(slots)
    if is_active:
        n = _zero_prefix(rel, ts)
        bad, pad_note = _active_prefix(path, TIME_INDEX, data, slots, n, TIME_ENTRY_SIZE, segment_index_bytes)
        if bad is not None:
            return _with_expected(bad, expected)
        ts, rel = ts[:n], rel[:n]
    offsets = rel + base
    if rebuilt is not None and data == rebuilt.to_bytes():
        return IndexVerdict(TIME_INDEX, path, IDENTICAL, "byte-identical to Kafka's recovery rebuild", len(data),
                            n, expected)

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
    first = _first_violation(rules, n)
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
                       "append path, changed around KAFKA-16310; spec §5.4)")
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
                                       f"offset index shows), not the configured {interval} (spec §5.4)")
                        explained = True
                except KafkalogError:
                    pass
            if not explained:
                reasons.append(f"entries sit at other batches than recovery's with index.interval.bytes={interval} "
                               "(another interval, a broker restart's close entry, follower or cleaner appends; "
                               "spec §5.4)")
        if is_active and n < len(rebuilt) and same:
            reasons.append("no final entry yet (an active segment gets it when rolled or closed)")
    if not reasons:
        reasons.append("laid out differently from Kafka's recovery rebuild")
    return IndexVerdict(TIME_INDEX, path, VALID, "; ".join(reasons), len(data), n, expected)


def _same_time_entries(normal, rebuilt: TimeIndex, is_active: bool) -> bool:
    ts, offsets = normal
    if is_active and len(ts) <= len(rebuilt):
        # an active segment's entries are a prefix of the rebuild's (its final entry comes at roll/close)
        return np.array_equal(ts, rebuilt.timestamps[:len(ts)]) and np.array_equal(offsets,
                                                                                    rebuilt.offsets[:len(ts)])
    return np.array_equal(ts, rebuilt.timestamps) and np.array_equal(offsets, rebuilt.offsets)


# --- transaction index --------------------------------------------------------------------------

def _txn_columns(b: _Batches, stop: Optional[int] = None) -> dict:
    s = slice(0, stop)
    return dict(base_offset=b.base[s], producer_id=b.producer_id[s], is_transactional=b.is_txn[s],
                is_control=b.is_control[s], control_type=b.control_type[s])


def _rebuild_txn_index(base: int, b: _Batches, folder: Path, open_txns, known: bool):
    """(rebuilt index, open transactions after, state known after, markers kept from the file)."""
    start = dict(open_txns or {})
    try:
        aborted, open_after = replay_transactions(batches=_txn_columns(b), open_txn_first_offsets=start)
    except KafkalogError:
        aborted, open_after = (), dict(start)
    kept: set = set()
    path = folder / format_segment_file_name(base, TXN_INDEX)
    if not known and filesystem.exists(path):
        # Entries for markers whose transaction began before the known state: keep them.
        try:
            existing = parse_transaction_index(filesystem.read_bytes(path), base, path=path)
        except KafkalogError:
            existing = None
        if existing is not None:
            found = {(t.producer_id, t.last_offset) for t in aborted}
            extra = []
            for t in existing.entries:
                if (t.producer_id, t.last_offset) in found:
                    continue
                i = _marker_index(b, t.producer_id, t.last_offset)
                if i is None or b.control_type[i] != cr.ABORT:
                    continue
                _, before = replay_transactions(batches=_txn_columns(b, i), open_txn_first_offsets=start)
                if t.producer_id not in before:
                    extra.append(t)
                    kept.add((t.producer_id, t.last_offset))
            if extra:
                aborted = tuple(sorted(list(aborted) + extra, key=lambda t: t.last_offset))
    return TransactionIndex(base, aborted), open_after, known, kept


def _marker_index(b: _Batches, producer_id: int, offset: int) -> Optional[int]:
    hit = np.flatnonzero(b.is_control & (b.base == offset) & (b.producer_id == producer_id))
    return int(hit[0]) if hit.size else None


def _verify_txn_index(path: Path, base: int, b: _Batches, rebuilt: TransactionIndex, known: bool,
                      kept: set) -> Optional[IndexVerdict]:
    expected = len(rebuilt)
    if not filesystem.exists(path):
        if expected == 0:
            return None
        return IndexVerdict(TXN_INDEX, path, MISSING,
                            f"no .txnindex although {expected} aborted transaction(s) end in this segment: "
                            "read_committed consumers would get their records", None, 0, expected)
    data = filesystem.read_bytes(path)
    if data == rebuilt.to_bytes():
        note = f" ({len(kept)} entries kept for transactions that began before the known producer state)" if kept else ""
        return IndexVerdict(TXN_INDEX, path, IDENTICAL, "byte-identical to Kafka's recovery rebuild" + note,
                            len(data), expected, expected)
    whole = len(data) // TXN_ENTRY_SIZE
    try:
        index = parse_transaction_index(data, base, path=path)
    except KafkalogError as exc:
        i = (exc.position or 0) // TXN_ENTRY_SIZE
        return IndexVerdict(TXN_INDEX, path, CORRUPT, f"entry {i}: {exc.message}", len(data), whole, expected,
                            first_bad_entry=i, first_bad_position=i * TXN_ENTRY_SIZE)
    entries = index.entries
    log_last = int(b.last[-1]) if b.n else base - 1
    expected_by_marker = {(t.producer_id, t.last_offset): t for t in rebuilt.entries}
    prev_last = None
    for i, t in enumerate(entries):
        problem = None
        if t.last_offset < base:
            problem = f"last offset {t.last_offset} is below the base offset {base} (Kafka's startup sanity check fails)"
        elif t.last_offset > log_last:
            problem = f"last offset {t.last_offset} is past the log's last offset {log_last}"
        elif prev_last is not None and t.last_offset <= prev_last:
            problem = f"last offset {t.last_offset} is not above the previous entry's {prev_last} (out of order)"
        elif t.first_offset > t.last_offset:
            problem = f"first offset {t.first_offset} is above the last offset {t.last_offset}"
        else:
            m = _marker_index(b, t.producer_id, t.last_offset)
            if m is None or b.control_type[m] != cr.ABORT:
                problem = f"there is no ABORT marker of producer {t.producer_id} at offset {t.last_offset}"
            elif known:
                want = expected_by_marker.get((t.producer_id, t.last_offset))
                if want is None:
                    problem = (f"the ABORT marker at {t.last_offset} ends a transaction with no data, which Kafka "
                               "does not index")
                elif (want.first_offset, want.last_stable_offset) != (t.first_offset, t.last_stable_offset):
                    problem = (f"first/last stable offset {t.first_offset}/{t.last_stable_offset}, the producer "
                               f"state gives {want.first_offset}/{want.last_stable_offset}")
        prev_last = t.last_offset
        if problem:
            return IndexVerdict(TXN_INDEX, path, CORRUPT, f"entry {i}: {problem}", len(data), len(entries), expected,
                                first_bad_entry=i, first_bad_position=i * TXN_ENTRY_SIZE)
    present = {(t.producer_id, t.last_offset) for t in entries}
    for k, want in enumerate(rebuilt.entries):
        if (want.producer_id, want.last_offset) not in present:
            slot = sum(1 for t in entries if t.last_offset < want.last_offset)
            return IndexVerdict(TXN_INDEX, path, CORRUPT,
                                f"entry {slot}: the aborted transaction of producer {want.producer_id} ending at "
                                f"{want.last_offset} is not indexed: read_committed consumers would get its records",
                                len(data), len(entries), expected, first_bad_entry=slot,
                                first_bad_position=slot * TXN_ENTRY_SIZE)
    if len(data) % TXN_ENTRY_SIZE:
        return IndexVerdict(TXN_INDEX, path, CORRUPT,
                            f"entry {whole}: a partial entry of {len(data) % TXN_ENTRY_SIZE} bytes at the end (a "
                            "torn write; Kafka ignores it)", len(data), len(entries), expected,
                            first_bad_entry=whole, first_bad_position=whole * TXN_ENTRY_SIZE)
    reason = ("producer state before this segment is unknown (no producer snapshot, first segment above offset 0): "
              "first/last stable offsets cannot be checked" if not known else
              "laid out differently from Kafka's recovery rebuild")
    return IndexVerdict(TXN_INDEX, path, VALID, reason, len(data), len(entries), expected)


__all__ = [
    "CLASSES", "CORRUPT", "IDENTICAL", "INDEX_KINDS", "MISSING", "OFFSET_INDEX", "TIME_INDEX", "TXN_INDEX", "VALID",
    "IndexVerdict", "LogTail", "SegmentVerification", "verify_segment",
]
