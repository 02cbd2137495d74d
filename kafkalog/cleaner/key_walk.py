"""The map pass of a round (``Cleaner.buildOffsetMap``, spec §7.4) over a partition's segments,
compiled: a window of batches is decompressed in one call, the transaction tracker sees only the
transactional and control batches (Python; rare), and ``key_map.walk_keys_kernel`` walks the keys
into the budgeted map. When the dirty range holds more distinct keys than the map takes, hash-slice
passes mark the superseded records of the recopied range in bitsets instead (``key_map``).

Which records enter the map is ``offset_map.map_entries``' rule (the reference): the dirty range
[firstDirty, upperBound) walked from ``offsetIndex.lookup(firstDirty)``, control batches only update
the tracker, aborted transactional data is skipped, null keys never enter.

What the recopy asks per record comes back as ``KeyVerdicts.lookup``: the map's offset for the key
(one pass), or from the bits NOT_FOUND / the record's own offset (it is its key's latest) / offset
+ 1 (superseded) — the same answers either way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from kafkalog.errors import KafkalogError
from kafkalog.format import control_record as cr
from kafkalog.format import record_batch as rb
from kafkalog.format.decoder import decode_window, decompress_batches
from kafkalog.format.file_records import HeaderArrays
from kafkalog.log import filesystem
from kafkalog.format.varint import read_varint, read_varlong
from kafkalog.cleaner import key_map as km
from kafkalog.cleaner.source_segments import start_position
from kafkalog.log.local_log import collect_aborted_transactions
from kafkalog.log.segment import SegmentHandle
from kafkalog.topic_partition import UNKNOWN_PARTITION
from kafkalog.cleaner.transaction_metadata import CleanedTransactionMetadata
from kafkalog.format.buffer_pool import release_pages
from kafkalog.format.compression import thread_output_buffer

WINDOW_BATCHES = 1024              # batches decompressed and walked per kernel call
WINDOW_BYTES = 2 << 20             # ... and at most this many bytes of (decompressed) records: bounds a
                                   # worker's buffers; against 8 MiB, two interleaved A/Bs of one partition
                                   # (5 reps, load 4-5) were within noise (min 0.74 vs 0.70 s, 0.91 vs 0.96 s)
SLICE_HEADROOM = 1.25              # slices planned for this many times the estimated keys
MAX_RESTARTS = 6                   # slice counts tried (each doubles) before giving up

_TXN_OR_CONTROL = rb.TRANSACTIONAL_FLAG_MASK | rb.CONTROL_FLAG_MASK


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


def _windows(seg: SegmentHandle, from_position: int, max_batch_bytes: int) -> Iterator[_Window]:
    h = seg.scan().headers
    n = len(h)
    i = int(np.searchsorted(h.position, from_position, side="left")) if n else 0
    out = thread_output_buffer("cleaner map pass")
    with filesystem.open_view(seg.log_path) as f:
        buf = _readonly(f.array)
        while i < n:
            part = h.slice(i, min(n, i + WINDOW_BATCHES))
            nb, b_src, b_start, b_end, dbuf = decompress_batches(buf, part, out, path=seg.log_path,
                                                                 max_batch_bytes=max_batch_bytes, budget=WINDOW_BYTES)
            nb = max(int(nb), 1)
            yield _Window(i, part.head(nb), buf, dbuf, b_src, b_start, b_end)
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


def _refuse(w: _Window, seg: SegmentHandle, b: int, pos: int, max_batch_bytes: int):
    """A record that does not walk: the decoder names the error; else a plain one."""
    decode_window(w.buf, w.headers.head(b + 1), UNKNOWN_PARTITION, engine="auto", path=seg.log_path,
                  verify_crc=False, max_batch_bytes=max_batch_bytes)
    raise KafkalogError(f"a record of the batch at offset {int(w.headers.baseOffset[b])} does not walk",
                        path=seg.log_path, position=int(w.headers.position[b]))


@dataclass
class KeyVerdicts:
    """The map pass's answer for the recopy: ``lookup`` per record, and the report's numbers."""

    end_offset: int
    stats: km.KeyMapStats
    key_map: Optional[km.KeyMap] = None          # one pass: asked directly
    found_bits: Optional[np.ndarray] = None      # several passes: one bit per record of the recopied range
    superseded_bits: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return self.stats.keys

    def lookup(self, keys, index: np.ndarray, ordinals: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """For records ``index`` of a window (Arrow ``keys``, non-null there), at record ``ordinals``
        of the recopied range, with their ``offsets``: the offset to compare with (NOT_FOUND when the
        key is not in the map)."""
        if self.key_map is not None:
            return self.key_map.lookup(keys, index)
        out = np.empty(len(ordinals), np.int64)
        km.bits_kernel(self.found_bits, self.superseded_bits, ordinals.astype(np.int64, copy=False),
                       offsets.astype(np.int64, copy=False), out)
        return out


@dataclass
class _DirtyWalk:
    """The map pass's batches. Every pass runs the transaction tracker afresh over them (it sees
    only the transactional and control batches, so this costs little); a verdict cached per window
    would be wrong, as the decoder may cut the same batches into windows differently each time."""
    segments: List[Tuple[SegmentHandle, int]]            # (segment, start position)
    records: int                                       # records of the walked batches (an upper bound on keys)


def _enter_flags(w: _Window, tracker: CleanedTransactionMetadata) -> np.ndarray:
    """1 for the batches whose records enter the map (data, not aborted)."""
    h = w.headers
    special = np.flatnonzero((h.attributes & _TXN_OR_CONTROL) != 0)
    flags = np.ones(len(h), np.uint8)
    for b in special.tolist():
        pid, last = int(h.producerId[b]), int(h.lastOffset[b])
        if h.attributes[b] & rb.CONTROL_FLAG_MASK:
            tracker.on_control_batch(pid, last, _control_type(w, b))
            flags[b] = 0
        elif tracker.on_data_batch(pid, last, True):
            flags[b] = 0
    return flags


def _insert_pass(plan, walk: _DirtyWalk, m: km.KeyMap, n_slices: int, s: int, max_batch_bytes: int,
                 mode: int = km.WALK_INSERT, registers: Optional[np.ndarray] = None) -> Tuple[bool, int]:
    """Pass s: keys of slice s into the map (or, WALK_COUNT, into ``registers``). Returns
    (complete, records put before it filled)."""
    tracker = CleanedTransactionMetadata()
    tracker.add_aborted_transactions(collect_aborted_transactions(
        plan.segments, plan.first_dirty_offset, plan.upper_bound_offset, plan.log_start_offset))
    put = 0
    zeros = np.zeros(1, np.uint8)
    counters = registers if registers is not None else zeros
    ords = np.zeros(0, np.int64)
    for seg, pos in walk.segments:
        for w in _windows(seg, pos, max_batch_bytes):
            flags = _enter_flags(w, tracker)
            counts = w.headers.recordsCount.astype(np.int64)
            b, k, at = 0, 0, -1
            while True:
                status, b, k, at, walked = km.walk_keys_kernel(
                    mode, w.buf, w.dbuf, w.b_src, w.b_start, w.b_end, counts, w.headers.baseOffset, flags, ords,
                    plan.first_dirty_offset, plan.upper_bound_offset, m.weak_hash, n_slices, s, *m.arrays(),
                    m.state, counters, zeros, b, k, at)
                put += walked
                if status != km.WALK_FULL or not m.grow():
                    break
            if status == km.WALK_FULL:
                return False, put
            if status == km.WALK_MALFORMED:
                _refuse(w, seg, b, at, max_batch_bytes)
    return True, put


def _mark_pass(plan, recopied: Sequence[SegmentHandle], m: km.KeyMap, n_slices: int, s: int, end_offset: int,
               found: np.ndarray, superseded: np.ndarray, max_batch_bytes: int) -> None:
    ordinal = 0
    for seg in recopied:
        for w in _windows(seg, 0, max_batch_bytes):
            h = w.headers
            counts = np.maximum(h.recordsCount.astype(np.int64), 0)
            b_ordinal = np.empty(len(h), np.int64)
            b_ordinal[0] = ordinal
            np.cumsum(counts[:-1], out=b_ordinal[1:])
            b_ordinal[1:] += ordinal
            data = ((h.attributes & rb.CONTROL_FLAG_MASK) == 0).astype(np.uint8)
            status, b, _k, at, _ = km.walk_keys_kernel(
                km.WALK_MARK, w.buf, w.dbuf, w.b_src, w.b_start, w.b_end, counts, h.baseOffset, data, b_ordinal,
                plan.first_dirty_offset, end_offset, m.weak_hash, n_slices, s, *m.arrays(), m.state, found,
                superseded, 0, 0, -1)
            if status == km.WALK_MALFORMED:
                _refuse(w, seg, b, at, max_batch_bytes)
            ordinal += int(counts.sum())


def recopied_records(segments: Sequence[SegmentHandle]) -> int:
    """Records of the recopied segments: the bit count of the hash-slice bitsets."""
    return int(sum(int(np.maximum(s.scan().headers.recordsCount.astype(np.int64), 0).sum()) for s in segments))


def build_key_verdicts(plan, *, budget: int, load_factor: float, max_batch_bytes: int,
                       weak_hash: bool = False, slices: Optional[int] = None) -> KeyVerdicts:
    """The map pass of ``plan``'s round within ``budget`` bytes: one pass when the dirty range's keys
    fit, else hash-slice passes with bitsets. ``slices``: force that many slices (tests)."""
    dirty = plan.dirty_segments()
    starts = [(s, start_position(s, plan.first_dirty_offset) if i == 0 else 0) for i, s in enumerate(dirty)]
    records = 0
    for s, pos in starts:
        h = s.scan().headers
        first = int(np.searchsorted(h.position, pos, side="left"))
        records += int(np.maximum(h.recordsCount[first:].astype(np.int64), 0).sum())
    walk = _DirtyWalk(starts, records)
    m = km.KeyMap(budget, load_factor, weak_hash=weak_hash, max_records=records)
    end_offset = plan.upper_bound_offset
    stats = km.KeyMapStats(budget=budget, capacity=m.capacity, max_keys=m.max_keys)
    n_slices = slices or 1
    if n_slices == 1:
        complete, put = _insert_pass(plan, walk, m, 1, 0, max_batch_bytes)
        if complete:
            stats.passes, stats.keys, stats.bytes, stats.capacity = 1, len(m), m.nbytes, m.capacity
            return KeyVerdicts(end_offset, stats, key_map=m)
        # count the distinct keys (HyperLogLog, one more keys-only walk) to plan the slices
        registers = np.zeros(km.HLL_REGISTERS, np.uint8)
        _insert_pass(plan, walk, m, 1, 0, max_batch_bytes, mode=km.WALK_COUNT, registers=registers)
        estimate = km.hll_estimate(registers)
        n_slices = max(2, math.ceil(estimate * SLICE_HEADROOM / max(m.max_keys, 1)))
    recopied = [s for s in plan.segments if s.base_offset < end_offset]
    nbits = recopied_records(recopied)
    for _attempt in range(MAX_RESTARTS):
        found = np.zeros((nbits + 7) // 8, np.uint8)
        superseded = np.zeros((nbits + 7) // 8, np.uint8)
        keys = 0
        for s in range(n_slices):
            m.clear()
            complete, _put = _insert_pass(plan, walk, m, n_slices, s, max_batch_bytes)
            if not complete:
                break
            keys += len(m)
            stats.bytes, stats.capacity = max(stats.bytes, m.nbytes), m.capacity
            _mark_pass(plan, recopied, m, n_slices, s, end_offset, found, superseded, max_batch_bytes)
        else:
            stats.passes, stats.keys = n_slices, keys
            return KeyVerdicts(end_offset, stats, found_bits=found, superseded_bits=superseded)
        n_slices *= 2
    raise KafkalogError(f"the dirty range's keys do not fit the cleaner's map in {n_slices // 2} hash slices "
                        f"of {m.max_keys} keys ({budget} bytes)", path=plan.path,
                        hint="raise log.cleaner.dedupe.buffer.size")


__all__ = ["KeyVerdicts", "build_key_verdicts", "recopied_records"]
