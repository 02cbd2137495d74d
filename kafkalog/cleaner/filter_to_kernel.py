"""The kernel of the compiled ``MemoryRecords.filterTo`` (``filter_to``): one numba call that walks
every record of a window of plain batches once, looks its key up in the map pass's answer, decides
keep/drop by the same rules as the reference ``record_filter.filter_batch`` (Kafka's
``LogCleaner.shouldRetainRecord``), and writes every batch's output into one buffer. The driver
(``filter_to``: which windows come here, the buffers, what the kernel hands back) is beside it.

Its parameters are grouped by what they are, as NamedTuples (numba types them as tuples and unpacks
them for free): ``Source``, ``Batches``, ``Rules``, ``Lookup``, ``Work``, ``Result``, ``Codecs``.
"""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
from numba import njit

from kafkalog.format import record_batch as rb
from kafkalog.format.compression import NONE
from kafkalog.format.records_accel import copy_bytes, read_varint, read_varlong
from kafkalog.format.records_encode_accel import (ENC_OK, seal_batch_kernel, varint_canonical,
                                                  write_kept_records_kernel)
import kafkalog.cleaner.key_map as km
from kafkalog.cleaner.key_hash import key_hash
from kafkalog.cleaner.record_filter import RecordReason

_CACHE = os.path.isfile(__file__)

# record codes: a RecordReason's index (the kernel counts per code; the columnar path keeps them per record)
REASONS = list(RecordReason)
KEPT_LATEST, KEPT_NOT_IN_MAP, KEPT_BEYOND_MAP, KEPT_TOMBSTONE, KEPT_CONTROL = (
    REASONS.index(RecordReason.KEPT_LATEST), REASONS.index(RecordReason.KEPT_NOT_IN_MAP),
    REASONS.index(RecordReason.KEPT_BEYOND_MAP), REASONS.index(RecordReason.KEPT_TOMBSTONE),
    REASONS.index(RecordReason.KEPT_CONTROL))
REMOVED_SUPERSEDED, REMOVED_NULL_KEY, REMOVED_TOMBSTONE_EXPIRED, REMOVED_ABORTED, REMOVED_MARKER = (
    REASONS.index(RecordReason.REMOVED_SUPERSEDED), REASONS.index(RecordReason.REMOVED_NULL_KEY),
    REASONS.index(RecordReason.REMOVED_TOMBSTONE_EXPIRED), REASONS.index(RecordReason.REMOVED_ABORTED),
    REASONS.index(RecordReason.REMOVED_MARKER))
N_CODES = len(REASONS)

# counters after the per-code ones
C_KEPT, C_TOMBS_KEPT, C_COPIED, C_REWRITTEN, C_REMOVED, C_HORIZONS, C_BYTES_WRITTEN = range(N_CODES, N_CODES + 7)
N_COUNTERS = N_CODES + 7

# kernel statuses
FT_OK = 0
FT_FALLBACK = 1        # hand the window to filter_to.filter_window (the columnar path)

HEADER_BYTES = rb.RECORDS_OFFSET
_LOG_APPEND = 0x08
_HORIZON_FLAG = rb.DELETE_HORIZON_FLAG_MASK
_NONE_TS = rb.NO_TIMESTAMP


class Source(NamedTuple):
    """The bytes the records come from."""
    buf: np.ndarray            # the segment (mapped)
    dbuf: np.ndarray           # decompressed records regions of the window's compressed batches


class Batches(NamedTuple):
    """Per batch of the window (int64 arrays, one entry a batch)."""
    src: np.ndarray            # 0: records in buf, else in dbuf
    start: np.ndarray          # the records region, in buf or dbuf
    end: np.ndarray
    position: np.ndarray       # the batch in buf
    size: np.ndarray
    records: np.ndarray        # records count (negative counts as 0; not ``count``: that is tuple.count)
    base_offset: np.ndarray
    last_offset: np.ndarray
    attributes: np.ndarray
    base_timestamp: np.ndarray
    max_timestamp: np.ndarray


class Rules(NamedTuple):
    """The round's numbers the decisions use."""
    end_offset: int            # records at or above it were beyond the map: kept
    now_ms: int
    new_horizon: int           # now + delete.retention.ms: the horizon a rewritten batch gets
    map_below: int             # records below it ask the map itself, the others the bitsets
    ordinal_base: int          # the window's first record in the round's recopied range


class Lookup(NamedTuple):
    """The map pass's answer (``key_walk.KeyVerdicts``)."""
    weak: bool
    slots: np.ndarray
    arena: np.ndarray
    found_bits: np.ndarray
    superseded_bits: np.ndarray


class Work(NamedTuple):
    """Buffers the kernel writes through."""
    kept_body: np.ndarray      # per kept record of one batch: where its bytes from offsetDelta on start
    kept_end: np.ndarray
    kept_ts: np.ndarray
    scratch: np.ndarray        # kept records of a batch to compress
    out: np.ndarray            # every batch's output, back to back


class Result(NamedTuple):
    """What the kernel tells back: per batch, and the counters."""
    start: np.ndarray
    end: np.ndarray
    max_offset: np.ndarray
    max_timestamp: np.ndarray
    shallow_offset: np.ndarray
    counts: np.ndarray         # N_COUNTERS int64


class Codecs(NamedTuple):
    """The C functions the kernel compresses and checksums with (addresses; 0 where missing)."""
    lz4_fns: np.ndarray
    lz4_state: np.ndarray
    zstd_fns: np.ndarray
    cctx: np.uintp
    zstd_io: np.ndarray
    crc_fn: np.uintp


@njit(cache=_CACHE, nogil=True)
def filter_window_kernel(source, batches, rules, lookup, work, result, codecs):
    """Filter and write every (plain) batch of the window; see the module docstring. Returns
    (status, batch): FT_FALLBACK names the first batch it could not do (nothing it counted or wrote
    is then used).

    Each record is parsed once: the walk checks that it is well formed, decides keep/drop, and for
    a kept record notes where its bytes from the offsetDelta on lie (``kept_body``/``kept_end``), its
    timestamp (``kept_ts``) and whether it is in the form the reference writer gives it (canonical
    varints, -1 for null, ASCII header keys: ``rewrite_records_kernel``'s checks). A batch that
    keeps everything and needs no horizon is copied whole; otherwise its kept records are written
    from those positions (``write_kept_records_kernel``: for codec none straight after the header
    space in ``out``, else in ``scratch`` for the codec) and sealed (``seal_batch_kernel``).

    The parameters are grouped by what they are (each one of the NamedTuples above, unpacked here):
    ``source`` (buf, dbuf): the segment's bytes and the decompressed records regions; ``batches``:
    per batch (src, records start, records end, position, size, count, base offset, last offset,
    attributes, base timestamp, max timestamp); ``rules`` (end offset of the map, now, the new
    horizon, the offset below which the map itself is asked, the window's first record ordinal);
    ``lookup`` (weak hash, map slots, map arena, found bits, superseded bits); ``work`` (kept
    record body starts, ends, timestamps, scratch, output buffer); ``result`` (per batch output
    start, end, max offset, max timestamp, shallow offset; the counters); ``codecs`` (the C
    functions: lz4 functions, lz4 state, zstd functions, zstd context, zstd io, CRC-32C).
    """
    buf, dbuf = source
    b_src, b_start, b_end, b_pos, b_size, b_count, b_base, b_last, b_attr, b_base_ts, b_max_ts = batches
    end_offset, now_ms, new_horizon, map_below, ordinal_base = rules
    weak, slots, arena, found_bits, superseded_bits = lookup
    kept_body, kept_end, kept_ts, scratch, out = work
    o_start, o_end, o_max_offset, o_max_ts, o_shallow, counts = result
    lz4_fns, lz4_state, zstd_fns, cctx, zstd_io, crc_fn = codecs
    q = 0
    ordinal = ordinal_base
    for b in range(b_pos.shape[0]):
        count = max(b_count[b], 0)
        src = buf if b_src[b] == 0 else dbuf
        p = b_start[b]
        end = b_end[b]
        base = b_base[b]
        attr = b_attr[b]
        log_append = (attr & _LOG_APPEND) != 0
        has_horizon = (attr & _HORIZON_FLAG) != 0
        horizon = b_base_ts[b]
        passed = has_horizon and now_ms >= horizon
        kc = 0
        tombs = 0
        odd = False             # a kept record the verbatim copy would not write as the reference does
        top_offset = np.int64(-1)
        for k in range(count):
            length, p = read_varint(src, p, end)
            if p < 0 or length <= 0 or p + length > end:
                return FT_FALLBACK, b
            rend = p + length
            tsd, c = read_varlong(src, p + 1, rend)
            if c < 0:
                return FT_FALLBACK, b
            body = c
            od, c = read_varint(src, c, rend)
            if c < 0:
                return FT_FALLBACK, b
            bad = not varint_canonical(src, body, c)
            at = c
            klen, c = read_varint(src, c, rend)
            if c < 0:
                return FT_FALLBACK, b
            bad |= klen < -1 or not varint_canonical(src, at, c)
            kpos = c
            if klen > 0:
                c += klen
                if c > rend:
                    return FT_FALLBACK, b
            at = c
            vlen, c = read_varint(src, c, rend)
            if c < 0:
                return FT_FALLBACK, b
            bad |= vlen < -1 or not varint_canonical(src, at, c)
            if vlen > 0:
                c += vlen
                if c > rend:
                    return FT_FALLBACK, b
            at = c
            hc, c = read_varint(src, c, rend)                  # headers: walked as the decoder walks them
            if c < 0 or hc < 0 or hc > rend - c:
                return FT_FALLBACK, b
            bad |= not varint_canonical(src, at, c)
            for _h in range(hc):
                at = c
                hkl, c = read_varint(src, c, rend)
                if c < 0 or hkl < 0 or c + hkl > rend:
                    return FT_FALLBACK, b
                bad |= not varint_canonical(src, at, c)
                for j in range(c, c + hkl):
                    if src[j] >= 0x80:          # non-ASCII header key: the reference re-encodes its text
                        bad = True
                c += hkl
                at = c
                hvl, c = read_varint(src, c, rend)
                if c < 0 or c + max(hvl, 0) > rend:
                    return FT_FALLBACK, b
                bad |= hvl < -1 or not varint_canonical(src, at, c)
                c += max(hvl, 0)
            if c != rend:
                return FT_FALLBACK, b
            p = rend
            offset = base + od
            if offset >= end_offset:
                code = KEPT_BEYOND_MAP
            elif klen < 0:
                code = REMOVED_NULL_KEY
            else:
                if offset < map_below:
                    found = km.map_get(slots, arena, src, kpos, klen, key_hash(src, kpos, klen, weak))
                else:
                    bit = ordinal + k
                    byte, mask = bit >> 3, np.uint8(1 << (bit & 7))
                    if superseded_bits[byte] & mask:
                        found = offset + 1
                    elif found_bits[byte] & mask:
                        found = offset
                    else:
                        found = km.NOT_FOUND
                has = found != km.NOT_FOUND
                if has and offset < found:
                    code = REMOVED_SUPERSEDED
                elif vlen < 0:
                    code = REMOVED_TOMBSTONE_EXPIRED if passed else KEPT_TOMBSTONE
                else:
                    code = KEPT_LATEST if has else KEPT_NOT_IN_MAP
            counts[code] += 1
            if code == KEPT_LATEST or code == KEPT_NOT_IN_MAP or code == KEPT_BEYOND_MAP or code == KEPT_TOMBSTONE:
                kept_ts[kc] = b_max_ts[b] if log_append else b_base_ts[b] + tsd
                kept_body[kc] = body
                kept_end[kc] = rend
                kc += 1
                odd |= bad
                if offset > top_offset:
                    top_offset = offset
                if vlen < 0:
                    tombs += 1
        if p != end:
            return FT_FALLBACK, b
        ordinal += count
        counts[C_KEPT] += kc
        counts[C_TOMBS_KEPT] += tombs
        o_start[b] = q
        if kc == 0:
            counts[C_REMOVED] += 1
            o_end[b] = q
            o_max_offset[b] = -1
            o_max_ts[b] = _NONE_TS
            o_shallow[b] = -1
            continue
        need_horizon = tombs > 0 and not has_horizon
        if kc == count and not need_horizon:
            size = b_size[b]
            if q + size > out.shape[0]:
                return FT_FALLBACK, b
            copy_bytes(out, q, buf, b_pos[b], size)
            q += size
            counts[C_COPIED] += 1
            o_max_offset[b] = b_last[b]
            o_max_ts[b] = b_max_ts[b]
        else:
            if odd:
                return FT_FALLBACK, b
            if need_horizon:
                horizon = new_horizon
                counts[C_HORIZONS] += 1
            base_ts = horizon if has_horizon or need_horizon else kept_ts[0]
            if (attr & 7) == NONE:          # the records go straight where the codec would put its frame
                at = q + HEADER_BYTES
                if at + (end - b_start[b]) + 16 * kc > out.shape[0]:
                    return FT_FALLBACK, b
                overflow, e, top = write_kept_records_kernel(src, kept_body, kept_end, kept_ts, kc, base_ts, out, at)
                rq = e - at
            else:
                overflow, rq, top = write_kept_records_kernel(src, kept_body, kept_end, kept_ts, kc, base_ts,
                                                              scratch, 0)
            if overflow:
                return FT_FALLBACK, b
            max_ts = b_max_ts[b] if log_append else top
            status, e = seal_batch_kernel(buf, b_pos[b], scratch, rq, kc, base_ts, max_ts, has_horizon or need_horizon,
                                          out, q, lz4_fns, lz4_state, zstd_fns, cctx, zstd_io, crc_fn)
            if status != ENC_OK:
                return FT_FALLBACK, b
            o_max_ts[b] = max_ts
            o_max_offset[b] = top_offset
            q = e
            counts[C_REWRITTEN] += 1
        o_end[b] = q
        o_shallow[b] = b_last[b]
    counts[C_BYTES_WRITTEN] = q
    return FT_OK, -1



__all__ = ["Batches", "Codecs", "FT_FALLBACK", "FT_OK", "Lookup", "N_COUNTERS", "Result", "Rules", "Source", "Work",
           "filter_window_kernel"]
