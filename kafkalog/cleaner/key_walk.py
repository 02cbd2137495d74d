"""The map pass of a round (``Cleaner.buildOffsetMap`` in Kafka's ``Cleaner.java``) over a partition's segments,
compiled: a window of batches is decompressed in one call, the transaction tracker sees only the
transactional and control batches (Python; rare), and ``walk_keys_kernel`` walks the keys into the
budgeted map (``key_map``). When the dirty range holds more distinct keys than the map takes,
hash-slice passes mark the superseded records of the recopied range in bitsets instead (``bitsets``).

Hash slices: when the dirty range holds more distinct keys than fit, pass s of n keeps only the
keys whose hash's high 32 bits fall in slice s (``key_hash.slice_of``) and marks, in two bitsets
over the records of the recopied range (one bit per record each), which records a later record of
the same key supersedes and which records' keys are in the map; n is planned from a HyperLogLog
count of the distinct keys (``hyper_log_log``), doubled while a slice still overflows. Kafka's
cleaner stops the round where its map fills and leaves the rest for the next round; these passes
clean the whole range in one round.

The walk (``walk_keys_kernel``) reads each record's length, offset delta and key (attributes,
timestamp, value and headers are skipped by length): no value is copied. Its parameters come in
groups (``WalkRecords``, ``WalkBatches``, ``WalkKeys``, ``WalkBits``, ``WalkFrom`` and the map's
``arrays()``), named tuples that numba unpacks at no cost.

Which records enter the map is ``offset_map.map_entries``' rule (the reference): the dirty range
[firstDirty, upperBound) walked from ``offsetIndex.lookup(firstDirty)``, control batches only update
the tracker, aborted transactional data is skipped, null keys never enter.

What the recopy asks per record comes back as ``KeyVerdicts.lookup``: from two bitsets over the
records of the recopied range, NOT_FOUND / the record's own offset (it is its key's latest) / offset
+ 1 (superseded), or from the map itself its offset for the key — the same answers either way. The
insert walk sets the bits of the dirty records as it goes (``key_map.map_put``, ``mark``); the
records below the first dirty offset are asked of the map (one pass) or marked by a lookup walk of
their own (hash slices). Where the bits could differ from the map's answer — a key whose offsets go
backwards, a data batch the map pass skipped as aborted, more records than an ordinal numbers — the
map answers everything (one pass) or every record is marked by lookup (hash slices), as before.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from numba import njit

from kafkalog.errors import KafkalogError
from kafkalog.format import control_record as cr
from kafkalog.format import record_batch as rb
from kafkalog.format.decoder import decode_window, decompress_batches
from kafkalog.format.file_records import HeaderArrays
from kafkalog.fs import filesystem
from kafkalog.format.varint import read_varint, read_varlong
from kafkalog.cleaner.bitsets import new_bitsets, set_bit
from kafkalog.cleaner.hyper_log_log import hll_add, hll_estimate, new_registers
from kafkalog.cleaner.key_hash import key_hash, slice_of
from kafkalog.cleaner.key_map import MAX_MARKED_RECORDS, NOT_FOUND, KeyMap, KeyMapStats, map_get, map_put, prefetch_slot
from kafkalog.cleaner.source_segments import start_position
from kafkalog.format.records_accel import read_varint as read_varint_at, read_varlong as read_varlong_at
from kafkalog.log.local_log import collect_aborted_transactions
from kafkalog.log.segment import LogSegment
from kafkalog.topic_partition import UNKNOWN_PARTITION
from kafkalog.cleaner.transaction_metadata import CleanedTransactionMetadata
from kafkalog.cleaner.window_cache import WindowCache
from kafkalog.format.buffer_pool import release_pages
from kafkalog.format.compression import OutputBuffer, thread_output_buffer

WINDOW_BATCHES = 1024              # batches decompressed and walked per kernel call
WINDOW_BYTES = 2 << 20             # ... and at most this many bytes of (decompressed) records: bounds a
                                   # worker's buffers; against 8 MiB, two interleaved A/Bs of one partition
                                   # (5 reps, load 4-5) were within noise (min 0.74 vs 0.70 s, 0.91 vs 0.96 s)
SLICE_HEADROOM = 1.25              # slices planned for this many times the estimated keys
MAX_RESTARTS = 6                   # slice counts tried (each doubles) before giving up
PIPELINE = 16                      # keys a walk parses and prefetches before it probes the first

_TXN_OR_CONTROL = rb.TRANSACTIONAL_FLAG_MASK | rb.CONTROL_FLAG_MASK
_CACHE = os.path.isfile(__file__)

# walk modes
WALK_INSERT = 0     # map[key] = offset for the batches flagged, records at or past ``lo_offset``
WALK_MARK = 1       # set the bits of the flagged batches' records below ``hi_offset``
WALK_COUNT = 2      # count the distinct keys at or past ``lo_offset`` (HyperLogLog registers)

# walk statuses
WALK_OK = 0
WALK_FULL = 1       # the map is full (at its current size): batch, record and byte position say where
WALK_MALFORMED = 2  # a record does not walk (the decoder would refuse it and name the error)


class WalkRecords(NamedTuple):
    """Where a window's records lie: the segment's bytes, and the decompressed records of its
    compressed batches."""
    buf: np.ndarray          # uint8: the segment file (mapped)
    dbuf: np.ndarray         # uint8: the window's decompressed records regions


class WalkBatches(NamedTuple):
    """Per batch of the window (arrays of one length)."""
    src: np.ndarray          # 0: its records lie in ``buf``, 1: in ``dbuf``
    start: np.ndarray        # where its records start there
    end: np.ndarray          # ... and end
    records: np.ndarray      # int64 records count (not ``count``: that is tuple.count)
    base_offset: np.ndarray  # int64 baseOffset
    flag: np.ndarray         # uint8: 1 for the batches walked
    ordinal: np.ndarray      # int64: its first record's ordinal in the recopied range


class WalkKeys(NamedTuple):
    """Which keys a walk takes."""
    lo_offset: int           # WALK_INSERT / WALK_COUNT: records at or past it
    hi_offset: int           # WALK_MARK: records below it
    n_slices: int            # hash slices of the round (1: every key)
    slice_index: int         # the slice this pass takes
    weak: bool               # the tests' weak hash (``key_hash``)


class WalkBits(NamedTuple):
    """What a walk marks: the two bitsets (``bitsets``), and whether an insert marks as it goes.
    WALK_COUNT: ``found`` is the HyperLogLog registers."""
    found: np.ndarray
    superseded: np.ndarray
    mark: bool


class WalkFrom(NamedTuple):
    """Where a walk starts: record ``record`` (at byte ``position``) of batch ``batch``; (0, 0, -1):
    the start. A walk stopped by WALK_FULL resumes there once the map has grown."""
    batch: int
    record: int
    position: int


WALK_START = WalkFrom(0, 0, -1)


@njit(cache=_CACHE, nogil=True)
def walk_keys_kernel(mode, records, batches, keys, table, bits, start):
    """Walk the records of the flagged batches (``batches.flag[b] != 0``); batch b's records lie in
    ``records.buf`` (``src`` 0) or ``records.dbuf`` (1) at [start, end). Keys in another hash slice
    are passed over.

    WALK_INSERT: every non-null key with offset >= lo_offset goes into the map; ``bits.mark``: the
    record's bits are set as ``map_put`` says (``batches.ordinal[b]`` + its index in the batch: its
    ordinal). WALK_COUNT: every non-null key with offset >= lo_offset updates the HyperLogLog
    registers (``bits.found``). WALK_MARK: every non-null key with offset < hi_offset is looked up;
    when the map holds it, the record's bit is set in ``bits.found``, and in ``bits.superseded`` too
    when the map's offset is greater than the record's.

    In steps of ``PIPELINE`` keys: the records are parsed and their keys hashed, each key's first
    slot prefetched (``key_map.prefetch_slot``), then the keys are put or looked up in log order;
    the probes' cache misses (the slots of a map of millions of keys are far from any cache)
    overlap instead of each waiting for the one before.

    :param mode: WALK_INSERT, WALK_MARK or WALK_COUNT.
    :param records: ``WalkRecords``.
    :param batches: ``WalkBatches``.
    :param keys: ``WalkKeys``.
    :param table: the map's (slots, arena, state) (``KeyMap.table()``).
    :param bits: ``WalkBits``.
    :param start: ``WalkFrom``.
    :returns: (status, batch, record in it, its byte position, records put or counted).
    """
    buf, dbuf = records
    b_src, b_start, b_end, b_count, b_base_offset, b_flag, b_ordinal = batches
    lo_offset, hi_offset, n_slices, slice_index, weak = keys
    slots, arena, state = table
    found_bits, superseded_bits, mark = bits
    from_b, from_k, from_p = start
    # the keys of one step: their record's index in the batch and byte position, the key's position
    # and length, its hash and its record's offset
    q_k = np.empty(PIPELINE, np.int64)
    q_rec = np.empty(PIPELINE, np.int64)
    q_key = np.empty(PIPELINE, np.int64)
    q_len = np.empty(PIPELINE, np.int64)
    q_hash = np.empty(PIPELINE, np.uint64)
    q_offset = np.empty(PIPELINE, np.int64)
    walked = 0
    for b in range(from_b, b_start.shape[0]):
        if b_flag[b] == 0:
            continue
        src = buf if b_src[b] == 0 else dbuf
        p = b_start[b]
        k = 0
        if b == from_b and from_p >= 0:
            p = from_p
            k = from_k
        end = b_end[b]
        base = b_base_offset[b]
        count = b_count[b]
        while k < count:
            n = 0
            bad_k = -1                   # a record that does not walk: its index, at ``bad_rec``
            bad_rec = 0
            while k < count and n < PIPELINE:
                rec = p
                length, p = read_varint_at(src, p, end)
                if p < 0 or length <= 0 or p + length > end:
                    bad_k, bad_rec = k, rec
                    break
                rend = p + length
                _ts, c = read_varlong_at(src, p + 1, rend)          # attributes, timestampDelta
                if c < 0:
                    bad_k, bad_rec = k, rec
                    break
                od, c = read_varint_at(src, c, rend)
                if c < 0:
                    bad_k, bad_rec = k, rec
                    break
                klen, c = read_varint_at(src, c, rend)
                if c < 0 or c + klen > rend:
                    bad_k, bad_rec = k, rec
                    break
                p = rend
                k += 1
                if klen < 0:                                        # null key: never in the map
                    continue
                offset = base + od
                if mode == WALK_MARK:
                    if offset >= hi_offset:
                        continue
                elif offset < lo_offset:
                    continue
                h = key_hash(src, c, klen, weak)
                if mode == WALK_COUNT:
                    hll_add(found_bits, h)
                    walked += 1
                    continue
                if n_slices > 1 and slice_of(h, n_slices) != slice_index:
                    continue
                prefetch_slot(slots, h)
                q_k[n] = k - 1
                q_rec[n] = rec
                q_key[n] = c
                q_len[n] = klen
                q_hash[n] = h
                q_offset[n] = offset
                n += 1
            for j in range(n):
                if mode == WALK_INSERT:
                    if not map_put(slots, arena, state, src, q_key[j], q_len[j], q_hash[j], q_offset[j],
                                   b_ordinal[b] + q_k[j], mark, found_bits, superseded_bits):
                        return WALK_FULL, b, q_k[j], q_rec[j], walked
                    walked += 1
                else:
                    latest = map_get(slots, arena, src, q_key[j], q_len[j], q_hash[j])
                    if latest != NOT_FOUND:
                        set_bit(found_bits, b_ordinal[b] + q_k[j])
                        if q_offset[j] < latest:
                            set_bit(superseded_bits, b_ordinal[b] + q_k[j])
            if bad_k >= 0:
                return WALK_MALFORMED, b, bad_k, bad_rec, walked
        if p != end:
            return WALK_MALFORMED, b, b_count[b], p, walked
    return WALK_OK, -1, 0, 0, walked


@njit(cache=_CACHE, nogil=True)
def bits_kernel(found_bits, superseded_bits, ordinals, offsets, out):
    """The answer of a lookup from the bitsets, as ``key_map.lookup_kernel`` gives it from the map,
    for the records at ``ordinals`` (with their ``offsets``): NOT_FOUND, the record's own offset (it
    is the latest of its key) or offset + 1 (a later record supersedes it)."""
    for j in range(ordinals.shape[0]):
        bit = ordinals[j]
        byte, mask = bit >> 3, np.uint8(1 << (bit & 7))
        if superseded_bits[byte] & mask:
            out[j] = offsets[j] + 1
        elif found_bits[byte] & mask:
            out[j] = offsets[j]
        else:
            out[j] = NOT_FOUND


def _readonly(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


@dataclass
class _Window:
    """Batches [first, first + count) of a segment's scan, their records regions located."""
    first: int
    headers: HeaderArrays
    buf: np.ndarray
    dbuf: np.ndarray
    b_src: np.ndarray
    b_start: np.ndarray
    b_end: np.ndarray


def _windows(seg: LogSegment, from_position: int, max_batch_bytes: int, *,
             landing: Optional[Callable[[], Optional[OutputBuffer]]] = None,
             cache: Optional[WindowCache] = None) -> Iterator[_Window]:
    """The segment's windows from ``from_position``, decompressed; ``landing``: where to decompress
    the next one (``WindowCache.landing``, None: this thread's buffer), ``cache`` the cache it is."""
    h = seg.scan().headers
    n = len(h)
    i = int(np.searchsorted(h.position, from_position, side="left")) if n else 0
    own = thread_output_buffer("cleaner map pass")
    with filesystem.open_view(seg.log_path) as f:
        buf = _readonly(f.array)
        while i < n:
            part = h.slice(i, min(n, i + WINDOW_BATCHES))
            out = (landing() if landing is not None else None) or own
            nb, b_src, b_start, b_end, dbuf = decompress_batches(buf, part, out, path=seg.log_path,
                                                                 max_batch_bytes=max_batch_bytes, budget=WINDOW_BYTES)
            nb = max(int(nb), 1)
            if out is not own and cache is not None:
                cache.landed(dbuf)
            try:
                yield _Window(i, part.head(nb), buf, dbuf, b_src, b_start, b_end)
            finally:
                if out is not own and cache is not None:
                    cache.unpin()
            release_pages(buf, int(h.position[i]), int(h.position[i + nb - 1]) + int(h.size[i + nb - 1]))
            i += nb


def _control_type(w: _Window, b: int) -> Optional[int]:
    """The type of a control batch's (first) record, None when it holds none."""
    if int(w.headers.recordsCount[b]) <= 0:
        return None
    src = w.buf if w.b_src[b] == 0 else w.dbuf
    rec = bytes(src[int(w.b_start[b]):int(w.b_end[b])])
    _length, p = read_varint(rec, 0)
    _ts, p = read_varlong(rec, p + 1)
    _od, p = read_varint(rec, p)
    klen, p = read_varint(rec, p)
    return cr.parse_control_type(rec[p:p + klen] if klen >= 0 else None)


def _refuse(w: _Window, seg: LogSegment, b: int, pos: int, max_batch_bytes: int):
    """A record that does not walk: the decoder names the error; else a plain one."""
    decode_window(w.buf, w.headers.head(b + 1), UNKNOWN_PARTITION, engine=None, path=seg.log_path,
                  verify_crc=False, max_batch_bytes=max_batch_bytes)
    raise KafkalogError(f"a record of the batch at offset {int(w.headers.baseOffset[b])} does not walk",
                        path=seg.log_path, position=int(w.headers.position[b]))


NO_BITS = np.zeros(1, np.uint8)          # the bitsets' stand-in where the map answers everything
MAP_NEVER = np.iinfo(np.int64).min       # ``map_below`` when every record is answered by the bits
MAP_ALWAYS = np.iinfo(np.int64).max      # ... and when none is


@dataclass
class KeyVerdicts:
    """The map pass's answer for the recopy: ``lookup`` per record, and the report's numbers.
    Records with an offset below ``map_below`` are asked of ``key_map``; the others are answered by
    the bitsets (one bit per record of the recopied range each)."""

    end_offset: int
    stats: KeyMapStats
    key_map: Optional[KeyMap] = None
    found_bits: np.ndarray = field(default_factory=lambda: NO_BITS)
    superseded_bits: np.ndarray = field(default_factory=lambda: NO_BITS)
    map_below: int = MAP_NEVER
    windows: Optional[WindowCache] = None        # the map pass's decompressed windows, for the recopy

    def __len__(self) -> int:
        return self.stats.keys

    def lookup(self, keys, index: np.ndarray, ordinals: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """For records ``index`` of a window (Arrow ``keys``, non-null there), at record ``ordinals``
        of the recopied range, with their ``offsets``: the offset to compare with (NOT_FOUND when the
        key is not in the map)."""
        offsets = offsets.astype(np.int64, copy=False)
        ordinals = ordinals.astype(np.int64, copy=False)
        out = np.empty(len(ordinals), np.int64)
        asked = offsets < self.map_below if self.key_map is not None else np.zeros(len(offsets), np.bool_)
        if asked.any():
            out[asked] = self.key_map.lookup(keys, index[asked])
        if not asked.all():          # (the bitsets exist wherever the map is not asked)
            rest = ~asked
            answers = np.empty(int(rest.sum()), np.int64)
            bits_kernel(self.found_bits, self.superseded_bits, ordinals[rest], offsets[rest], answers)
            out[rest] = answers
        return out


@dataclass
class DirtyWalk:
    """The map pass's batches. Every pass runs the transaction tracker afresh over them (it sees
    only the transactional and control batches, so this costs little); a verdict cached per window
    would be wrong, as the decoder may cut the same batches into windows differently each time."""
    segments: List[Tuple[LogSegment, int, int]]     # (segment, start position, its first record's ordinal)
    records: int                                       # records of the walked batches (an upper bound on keys)


def segment_ordinals(segments: Sequence[LogSegment]) -> Tuple[Dict[int, int], int]:
    """Each segment's first record's ordinal in the range the segments form, by base offset, and the
    range's records (a batch with a negative count holds none): how the bitsets number records."""
    firsts, total = {}, 0
    for seg in segments:
        firsts[seg.base_offset] = total
        total += int(np.maximum(seg.scan().headers.recordsCount.astype(np.int64), 0).sum())
    return firsts, total


def _batch_ordinals(seg: LogSegment, first_ordinal: int) -> np.ndarray:
    """Per batch of ``seg``: the ordinal of its first record in the recopied range."""
    counts = np.maximum(seg.scan().headers.recordsCount.astype(np.int64), 0)
    out = np.empty(len(counts), np.int64)
    if len(counts):
        out[0] = first_ordinal
        np.cumsum(counts[:-1], out=out[1:])
        out[1:] += first_ordinal
    return out


def _enter_flags(w: _Window, tracker: CleanedTransactionMetadata) -> Tuple[np.ndarray, bool]:
    """1 for the batches whose records enter the map (data, not aborted); and whether a data batch
    was left out (aborted)."""
    h = w.headers
    special = np.flatnonzero((h.attributes & _TXN_OR_CONTROL) != 0)
    flags = np.ones(len(h), np.uint8)
    skipped_data = False
    for b in special.tolist():
        pid, last = int(h.producerId[b]), int(h.lastOffset[b])
        if h.attributes[b] & rb.CONTROL_FLAG_MASK:
            tracker.on_control_batch(pid, last, _control_type(w, b))
            flags[b] = 0
        elif tracker.on_data_batch(pid, last, True):
            flags[b] = 0
            skipped_data = True
    return flags, skipped_data


@dataclass
class _PassResult:
    complete: bool             # every key of the slice went in (False: the map filled)
    marked: bool = False       # the bits it set are the map's answers for the dirty records


def insert_pass(plan, walk: DirtyWalk, m: KeyMap, n_slices: int, s: int, max_batch_bytes: int,
                 mode: int = WALK_INSERT, registers: Optional[np.ndarray] = None,
                 bits: Optional[Tuple[np.ndarray, np.ndarray]] = None,
                 cache: Optional[WindowCache] = None) -> _PassResult:
    """Pass s: keys of slice s into the map (or, WALK_COUNT, into ``registers``); ``bits``: (found,
    superseded) to mark the dirty records in as they go in; ``cache``: where to keep the decompressed
    windows while the map leaves room in its budget."""
    tracker = CleanedTransactionMetadata()
    tracker.add_aborted_transactions(collect_aborted_transactions(
        plan.segments, plan.first_dirty_offset, plan.upper_bound_offset, plan.log_start_offset))
    found, superseded = bits if bits is not None else (registers if registers is not None else NO_BITS, NO_BITS)
    mark = bits is not None
    bits_bytes = found.nbytes + superseded.nbytes if mark else 0
    keys = WalkKeys(plan.first_dirty_offset, plan.upper_bound_offset, n_slices, s, m.weak_hash)
    walk_bits = WalkBits(found, superseded, mark)
    skipped_data = False
    if cache is not None:
        cache.trim(m.budget - m.nbytes - bits_bytes)
    landing = None
    if cache is not None:
        def landing():
            return cache.landing(m.budget - m.nbytes - bits_bytes)
    for seg, pos, first_ordinal in walk.segments:
        ordinals = _batch_ordinals(seg, first_ordinal)
        for w in _windows(seg, pos, max_batch_bytes, landing=landing, cache=cache):
            flags, skipped = _enter_flags(w, tracker)
            skipped_data |= skipped
            counts = w.headers.recordsCount.astype(np.int64)
            b_ordinal = ordinals[w.first:w.first + len(counts)]
            records = WalkRecords(w.buf, w.dbuf)
            batches = WalkBatches(w.b_src, w.b_start, w.b_end, counts, w.headers.baseOffset, flags, b_ordinal)
            start = WALK_START
            while True:
                status, b, k, at, _walked = walk_keys_kernel(mode, records, batches, keys, m.table(), walk_bits, start)
                start = WalkFrom(b, k, at)
                if status != WALK_FULL:
                    break
                if cache is not None:      # room for the old and the new slots side by side while it grows
                    cache.trim(m.budget - m.growing_nbytes - bits_bytes)
                if not m.grow():
                    break
                if cache is not None:
                    cache.trim(m.budget - m.nbytes - bits_bytes)
            if cache is not None and status == WALK_OK:
                cache.offer(seg.base_offset, w.first, w.b_src, w.b_start, w.b_end, w.dbuf,
                            room=m.budget - m.nbytes - bits_bytes)
            if status == WALK_FULL:
                return _PassResult(False)
            if status == WALK_MALFORMED:
                _refuse(w, seg, b, at, max_batch_bytes)
    return _PassResult(True, mark and not skipped_data and not m.out_of_order)


def mark_pass(plan, recopied: Sequence[LogSegment], first_ordinals: Dict[int, int], m: KeyMap, n_slices: int,
               s: int, below_offset: int, found: np.ndarray, superseded: np.ndarray, max_batch_bytes: int) -> None:
    """Set the bits of the recopied records below ``below_offset`` whose keys (of slice s) the map
    holds: found, and superseded when the map's offset is greater."""
    for seg in recopied:
        if seg.base_offset >= below_offset:
            break
        ordinals = _batch_ordinals(seg, first_ordinals[seg.base_offset])
        for w in _windows(seg, 0, max_batch_bytes):
            h = w.headers
            counts = np.maximum(h.recordsCount.astype(np.int64), 0)
            data = ((h.attributes & rb.CONTROL_FLAG_MASK) == 0).astype(np.uint8)
            status, b, _k, at, _ = walk_keys_kernel(
                WALK_MARK, WalkRecords(w.buf, w.dbuf),
                WalkBatches(w.b_src, w.b_start, w.b_end, counts, h.baseOffset, data, ordinals[w.first:w.first + len(h)]),
                WalkKeys(plan.first_dirty_offset, below_offset, n_slices, s, m.weak_hash), m.table(),
                WalkBits(found, superseded, False), WALK_START)
            if status == WALK_MALFORMED:
                _refuse(w, seg, b, at, max_batch_bytes)


def dirty_outside_walk(recopied: Sequence[LogSegment], starts, first_dirty: int) -> bool:
    """Whether a batch the insert walk does not read (before its start) holds offsets at or past the
    first dirty offset (a stale index or offsets out of order): its records would have no bits."""
    walked_from = {s.base_offset: pos for s, pos, _ in starts}
    for s in recopied:
        h = s.scan().headers
        pos = walked_from.get(s.base_offset)
        if pos == 0:
            continue
        upto = len(h) if pos is None else int(np.searchsorted(h.position, pos, side="left"))
        if upto and int(h.lastOffset[:upto].max()) >= first_dirty:
            return True
    return False


def build_key_verdicts(plan, *, budget: int, load_factor: float, max_batch_bytes: int,
                       weak_hash: bool = False, slices: Optional[int] = None, mark: bool = True,
                       keep_windows: bool = True) -> KeyVerdicts:
    """The map pass of ``plan``'s round within ``budget`` bytes: one pass when the dirty range's keys
    fit, else hash-slice passes. ``slices``: force that many slices; ``mark=False``: never take the
    dirty records' answers from the insert walk's bits (tests: the two ways answer the same);
    ``keep_windows``: keep decompressed windows for the recopy in the budget the map leaves (one pass)."""
    end_offset = plan.upper_bound_offset
    first_dirty = plan.first_dirty_offset
    recopied = [s for s in plan.segments if s.base_offset < end_offset]
    seg_ordinal, nbits = segment_ordinals(recopied)
    mark = mark and nbits < MAX_MARKED_RECORDS
    dirty = plan.dirty_segments()
    starts = [(s, start_position(s, first_dirty) if i == 0 else 0, seg_ordinal[s.base_offset])
              for i, s in enumerate(dirty)]
    records = 0
    for s, pos, _ in starts:
        h = s.scan().headers
        first = int(np.searchsorted(h.position, pos, side="left"))
        records += int(np.maximum(h.recordsCount[first:].astype(np.int64), 0).sum())
    if mark and dirty_outside_walk(recopied, starts, first_dirty):
        mark = False
    walk = DirtyWalk(starts, records)
    m = KeyMap(budget, load_factor, weak_hash=weak_hash, max_records=records)
    stats = KeyMapStats(budget=budget, capacity=m.capacity, max_keys=m.max_keys)
    n_slices = slices or 1
    if n_slices == 1:
        bits = new_bitsets(nbits) if mark else None
        cache = WindowCache(budget) if keep_windows else None
        result = insert_pass(plan, walk, m, 1, 0, max_batch_bytes, bits=bits, cache=cache)
        if result.complete:
            stats.passes, stats.keys, stats.bytes, stats.capacity = 1, len(m), m.nbytes, m.capacity
            if result.marked:      # the bits answer the dirty records, the map the ones before (if any: else it goes)
                asked = recopied and recopied[0].base_offset < first_dirty
                return KeyVerdicts(end_offset, stats, key_map=m if asked else None, found_bits=bits[0],
                                   superseded_bits=bits[1], map_below=first_dirty if asked else MAP_NEVER, windows=cache)
            return KeyVerdicts(end_offset, stats, key_map=m, map_below=MAP_ALWAYS, windows=cache)
        if cache is not None:
            cache.trim(0)            # the slices take the whole budget: no window is kept, no page held
        # count the distinct keys (HyperLogLog, one more keys-only walk) to plan the slices
        registers = new_registers()
        insert_pass(plan, walk, m, 1, 0, max_batch_bytes, mode=WALK_COUNT, registers=registers)
        estimate = hll_estimate(registers)
        n_slices = max(2, math.ceil(estimate * SLICE_HEADROOM / max(m.max_keys, 1)))
    for _attempt in range(MAX_RESTARTS):
        found, superseded = new_bitsets(nbits)
        keys = 0
        for s in range(n_slices):
            m.clear()
            result = insert_pass(plan, walk, m, n_slices, s, max_batch_bytes,
                                  bits=(found, superseded) if mark else None)
            if not result.complete:
                break
            if mark and not result.marked:          # bits the map would not give: mark every record by lookup
                mark = False
                found, superseded = new_bitsets(nbits)
                for earlier in range(s):
                    m.clear()
                    insert_pass(plan, walk, m, n_slices, earlier, max_batch_bytes)
                    mark_pass(plan, recopied, seg_ordinal, m, n_slices, earlier, end_offset, found, superseded, max_batch_bytes)
                m.clear()
                insert_pass(plan, walk, m, n_slices, s, max_batch_bytes)
            keys += len(m)
            stats.bytes, stats.capacity = max(stats.bytes, m.nbytes), m.capacity
            mark_pass(plan, recopied, seg_ordinal, m, n_slices, s, first_dirty if mark else end_offset, found, superseded,
                       max_batch_bytes)
        else:
            stats.passes, stats.keys = n_slices, keys
            return KeyVerdicts(end_offset, stats, found_bits=found, superseded_bits=superseded)
        n_slices *= 2
    raise KafkalogError(f"the dirty range's keys do not fit the cleaner's map in {n_slices // 2} hash slices "
                        f"of {m.max_keys} keys ({budget} bytes)", path=plan.path,
                        hint="raise log.cleaner.dedupe.buffer.size")


__all__ = ["KeyVerdicts", "WALK_COUNT", "WALK_FULL", "WALK_INSERT", "WALK_MALFORMED", "WALK_MARK", "WALK_OK",
           "WALK_START", "WalkBatches", "WalkBits", "WalkFrom", "WalkKeys", "WalkRecords", "bits_kernel", "walk_keys_kernel",
           "MAP_ALWAYS", "MAP_NEVER", "NO_BITS", "build_key_verdicts", "segment_ordinals",
           "DirtyWalk", "dirty_outside_walk", "insert_pass", "mark_pass"]
