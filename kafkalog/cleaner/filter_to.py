"""``MemoryRecords.filterTo`` (the cleaner's recopy of a source segment, ``MemoryRecords.java``) for windows of
plain batches, compiled end to end: one numba call walks every record of the window once, looks its
key up in the map pass's answer (``key_walk.KeyVerdicts``: two bits per record, or the compiled map
below its ``map_below`` offset), decides keep/drop, and writes every batch's output — copied whole,
rebuilt with the kept records from the positions the walk noted (``records_encode_accel``'s
``write_kept_records_kernel`` and ``seal_batch_kernel``: header, C codecs, CRC), or nothing — into
one buffer, with no Python per batch and no Arrow.

A plain batch is a data batch outside any transaction, not an active producer's last, not the
last before the high watermark: its verdict is the constant ``record_filter.DELETE_IF_EMPTY`` and the
transaction tracker has nothing to do with it (``fast_filter.filter_window`` says why). Windows of
plain batches end before the next other batch; from another batch on, and for a window the
kernel hands back (a batch it cannot write exactly as the reference writer does: codecs without a
C encoder here, non-canonical varints, extreme offsets or timestamps; or a record that does not
walk), the decoder's window from there (``source_segments.read_windows``) goes to
``fast_filter.filter_window``, which decides the same and names any error.

Per window the result is ``WindowOutput``: the bytes of its batches back to back and per batch
where its output lies and the numbers the index builder needs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, List, Mapping, Optional

import numpy as np
from numba import njit

from kafkalog.format import record_batch as rb
from kafkalog.format.buffer_pool import release_pages
from kafkalog.format.compression import NONE, ZSTD_LEVEL, thread_output_buffer
from kafkalog.format.compression_accel import zstd_compressor
from kafkalog.format.decoder import decompress_batches
from kafkalog.fs.filesystem import MappedFile
from kafkalog.format.native import LZ4_STREAM_BYTES, native_functions
from kafkalog.format.records_accel import copy_bytes, read_varint, read_varlong
from kafkalog.format.records_encode_accel import (ENC_OK, seal_batch_kernel, varint_canonical,
                                                  write_kept_records_kernel)
import kafkalog.cleaner.fast_filter as ff
import kafkalog.cleaner.key_map as km
from kafkalog.cleaner.key_hash import key_hash
from kafkalog.cleaner.key_walk import MAP_NEVER, KeyVerdicts
from kafkalog.cleaner.source_segments import READ_WINDOW_BATCHES, read_windows
from kafkalog.log.segment import LogSegment
from kafkalog.cleaner.producer_state import LastRecord
from kafkalog.cleaner.record_filter import FilterCounts

_CACHE = os.path.isfile(__file__)

WINDOW_BYTES = 2 << 20         # records (decompressed) per window of plain batches: bounds the worker's buffers

# record codes (fast_filter's, as plain ints for the kernel)
_LATEST, _NOT_IN_MAP, _BEYOND_MAP, _TOMB_KEPT = (int(ff.KEPT_LATEST), int(ff.KEPT_NOT_IN_MAP),
                                                 int(ff.KEPT_BEYOND_MAP), int(ff.KEPT_TOMBSTONE))
_SUPERSEDED, _NULL_KEY, _TOMB_EXPIRED = (int(ff.REMOVED_SUPERSEDED), int(ff.REMOVED_NULL_KEY),
                                         int(ff.REMOVED_TOMBSTONE_EXPIRED))
N_CODES = len(ff.REASONS)

# counters after the per-code ones
C_KEPT, C_TOMBS_KEPT, C_COPIED, C_REWRITTEN, C_REMOVED, C_HORIZONS, C_BYTES_WRITTEN = range(N_CODES, N_CODES + 7)
N_COUNTERS = N_CODES + 7

# kernel statuses
FT_OK = 0
FT_FALLBACK = 1        # hand the window to fast_filter.filter_window

_TXN_OR_CONTROL = rb.TRANSACTIONAL_FLAG_MASK | rb.CONTROL_FLAG_MASK
_LOG_APPEND = 0x08
_HORIZON_FLAG = rb.DELETE_HORIZON_FLAG_MASK
_HEADER_BYTES = rb.RECORDS_OFFSET
_NONE_TS = rb.NO_TIMESTAMP


@dataclass
class WindowOutput:
    """Batches [first, first + count) of a segment after filtering: batch b's bytes are
    ``data[start[b]:end[b]]`` (empty when removed; one after the other), ``max_offset``,
    ``max_timestamp`` and ``shallow_offset`` as ``fast_filter.BatchOutput`` has them."""

    first: int
    data: np.ndarray
    start: np.ndarray
    end: np.ndarray
    max_offset: np.ndarray
    max_timestamp: np.ndarray
    shallow_offset: np.ndarray

    @property
    def count(self) -> int:
        return len(self.start)

    @staticmethod
    def of_batches(first: int, outputs: List["ff.BatchOutput"]) -> "WindowOutput":
        sizes = np.fromiter((len(o.output) for o in outputs), np.int64, len(outputs))
        end = np.cumsum(sizes)
        data = np.frombuffer(b"".join(o.output for o in outputs), np.uint8)
        return WindowOutput(first, data, end - sizes, end,
                            np.fromiter((o.max_offset for o in outputs), np.int64, len(outputs)),
                            np.fromiter((o.max_timestamp for o in outputs), np.int64, len(outputs)),
                            np.fromiter((o.shallow_offset_of_max_timestamp for o in outputs), np.int64, len(outputs)))

    def written(self, a: int, b: int):
        """What batches [a, b) of the window wrote, as one ``_GroupOutput.write`` takes it: (bytes,
        largest offset, largest timestamp, its shallow offset); None when they wrote nothing."""
        lo, hi = int(self.start[a]), int(self.end[b - 1])
        if hi == lo:
            return None
        wrote = self.end[a:b] > self.start[a:b]
        ts = self.max_timestamp[a:b][wrote]
        k = int(np.argmax(ts))              # the first batch with the largest timestamp, as batch by batch
        return (memoryview(self.data[lo:hi]), int(self.max_offset[a:b][wrote].max()), int(ts[k]),  # type: ignore[arg-type, unused-ignore]
                int(self.shallow_offset[a:b][wrote][k]))


# --- the kernel ------------------------------------------------------------------------------

@njit(cache=_CACHE, nogil=True)
def filter_window_kernel(buf, dbuf, b_src, b_start, b_end, b_pos, b_size, b_count, b_base, b_last, b_attr,
                         b_base_ts, b_max_ts, end_offset, now_ms, new_horizon, map_below, weak, slots, arena,
                         found_bits, superseded_bits, ordinal_base, kept_body, kept_end, kept_ts, scratch, out,
                         o_start, o_end, o_max_offset, o_max_ts, o_shallow, counts,
                         lz4_fns, lz4_state, zstd_fns, cctx, zstd_io, crc_fn):
    """Filter and write every (plain) batch of the window; see the module docstring. Returns
    (status, batch): FT_FALLBACK names the first batch it could not do (nothing it counted or wrote
    is then used).

    Each record is parsed once: the walk checks that it is well formed, decides keep/drop, and for
    a kept record notes where its bytes from the offsetDelta on lie (``kept_body``/``kept_end``), its
    timestamp (``kept_ts``) and whether it is in the form the reference writer gives it (canonical
    varints, -1 for null, ASCII header keys: ``rewrite_records_kernel``'s checks). A batch that
    keeps everything and needs no horizon is copied whole; otherwise its kept records are written
    from those positions (``write_kept_records_kernel``: for codec none straight after the header
    space in ``out``, else in ``scratch`` for the codec) and sealed (``seal_batch_kernel``)."""
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
                code = _BEYOND_MAP
            elif klen < 0:
                code = _NULL_KEY
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
                    code = _SUPERSEDED
                elif vlen < 0:
                    code = _TOMB_EXPIRED if passed else _TOMB_KEPT
                else:
                    code = _LATEST if has else _NOT_IN_MAP
            counts[code] += 1
            if code == _LATEST or code == _NOT_IN_MAP or code == _BEYOND_MAP or code == _TOMB_KEPT:
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
                at = q + _HEADER_BYTES
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


# --- Python side -----------------------------------------------------------------------------

class _Codecs:
    """What the kernel calls the C codecs and CRC with (addresses; 0 where missing)."""

    def __init__(self):
        native = native_functions()
        z = zstd_compressor(ZSTD_LEVEL) if native.enabled else None
        self.lz4 = np.array([native.lz4_reset_stream, native.lz4_compress_fast_continue] if native.enabled else [0, 0],
                            np.uintp)
        self.lz4_state = np.zeros(LZ4_STREAM_BYTES, np.uint8)
        self.crc = np.uintp(native.crc32c_update if native.enabled else 0)
        self.zstd_fns = z.fns if z is not None else np.zeros(3, np.uintp)
        self.cctx = np.uintp(z.cctx if z is not None else 0)
        self.zstd_io = z.io if z is not None else np.zeros(6, np.uint64)


def available(offset_map) -> bool:
    """Whether windows of plain batches can take the compiled path for this map."""
    return isinstance(offset_map, KeyVerdicts) and ff.USE_ACCEL_WRITER and native_functions().crc32c_update != 0


def plain_batches(h, high_watermark: int, active_ids: np.ndarray) -> np.ndarray:
    """Per batch of ``h``: True for a plain batch (see the module docstring)."""
    pids = h.producerId
    return (((h.attributes & _TXN_OR_CONTROL) == 0) & (h.lastOffset + 1 != high_watermark)
            & ((pids == rb.NO_PRODUCER_ID) | ~np.isin(pids, active_ids)))


def _run(buf, dbuf, b_src, b_start, b_end, h, offset_map: KeyVerdicts, now_ms: int, delete_retention_ms: int,
         ordinal: int, codecs: _Codecs, counts: FilterCounts, first: int) -> Optional[WindowOutput]:
    nb = len(h)
    per_batch = np.maximum(h.recordsCount.astype(np.int64), 0)
    region = (b_end - b_start).astype(np.int64)
    most = int(per_batch.max()) if nb else 0
    room = int(np.maximum(h.size.astype(np.int64), _HEADER_BYTES + region + 16 * per_batch + region // 64 + 1024).sum())
    out = thread_output_buffer("cleaner recopy, written").reserve(room, 0)
    scratch = thread_output_buffer("cleaner recopy, records").reserve(
        int((region + 16 * per_batch).max()) + 16 if nb else 16, 0)
    kept_body = np.empty(max(most, 1), np.int64)        # (per record of one batch: small)
    kept_end = np.empty(max(most, 1), np.int64)
    kept_ts = np.empty(max(most, 1), np.int64)
    o = [np.empty(nb, np.int64) for _ in range(5)]
    c = np.zeros(N_COUNTERS, np.int64)
    if offset_map.key_map is not None:
        slots, arena = offset_map.key_map.arrays()
        weak, map_below = offset_map.key_map.weak_hash, offset_map.map_below
    else:
        slots, arena, weak, map_below = np.zeros(km.SLOT_WORDS, np.int64), np.zeros(1, np.uint8), False, MAP_NEVER
    status, _b = filter_window_kernel(
        buf, dbuf, b_src, b_start, b_end, h.position.astype(np.int64), h.size.astype(np.int64), per_batch,
        h.baseOffset, h.lastOffset, h.attributes.astype(np.int64), h.baseTimestamp, h.maxTimestamp,
        offset_map.end_offset, now_ms, now_ms + delete_retention_ms, map_below, weak, slots, arena,
        offset_map.found_bits, offset_map.superseded_bits,
        ordinal, kept_body, kept_end, kept_ts, scratch, out, *o, c, codecs.lz4, codecs.lz4_state, codecs.zstd_fns,
        codecs.cctx, codecs.zstd_io, codecs.crc)
    if status != FT_OK:
        return None
    by = c.tolist()
    counts.batches_read += nb
    counts.records_read += int(per_batch.sum())
    counts.records_kept += by[C_KEPT]
    counts.records_superseded += by[_SUPERSEDED]
    counts.records_null_key += by[_NULL_KEY]
    counts.tombstones_kept += by[C_TOMBS_KEPT]
    counts.tombstones_removed += by[_TOMB_EXPIRED]
    counts.batches_copied += by[C_COPIED]
    counts.batches_rewritten += by[C_REWRITTEN]
    counts.batches_removed += by[C_REMOVED]
    counts.horizons_stamped += by[C_HORIZONS]
    counts.bytes_read += int(h.size.astype(np.int64).sum())
    counts.bytes_written += by[C_BYTES_WRITTEN]
    return WindowOutput(first, out[:by[C_BYTES_WRITTEN]], *o)      # valid until the next window


def filtered_windows(seg: LogSegment, *, tracker, active: Mapping[int, LastRecord], high_watermark: int,
                     offset_map: KeyVerdicts, now_ms: int, delete_retention_ms: int, counts: FilterCounts,
                     max_batch_bytes: int, ordinal: int) -> Iterator[WindowOutput]:
    """Every batch of ``seg`` filtered, in file order, a window at a time. ``ordinal``: the segment's
    first record in the recopied range. Adds the audit numbers to ``counts``."""
    h = seg.scan().headers
    n = len(h)
    legacy = np.flatnonzero(h.magic != rb.MAGIC_VALUE_V2)
    stop = int(legacy[0]) if legacy.size else n
    active_ids = np.fromiter(active.keys(), np.int64, len(active))
    codecs = _Codecs()
    cache = offset_map.windows
    decompressed = thread_output_buffer("cleaner recopy, decompressed")
    plain = plain_batches(h.head(stop), high_watermark, active_ids)
    others = np.flatnonzero(~plain)
    with MappedFile(seg.log_path) as f:
        buf = f.array
        i = 0
        while i < stop:
            result = None
            if plain[i]:          # a window of plain batches only: up to the next other batch
                k = int(np.searchsorted(others, i))
                j = min(int(others[k]) if k < len(others) else stop, i + READ_WINDOW_BATCHES)
                kept = cache.take(seg.base_offset, i, j - i) if cache is not None else None
                if kept is not None:      # decompressed by the map pass already
                    consumed, b_src, b_start, b_end, dbuf = kept
                else:
                    consumed, b_src, b_start, b_end, dbuf = decompress_batches(
                        buf, h.slice(i, j), decompressed, path=seg.log_path, max_batch_bytes=max_batch_bytes,
                        budget=WINDOW_BYTES)
                    consumed = max(int(consumed), 1)
                result = _run(buf, dbuf, b_src, b_start, b_end, h.slice(i, i + consumed), offset_map, now_ms,
                              delete_retention_ms, ordinal, codecs, counts, i)
            if result is None:    # the decoder's window from here, through filter_window
                windows = read_windows(seg, max_batch_bytes=max_batch_bytes, from_position=int(h.position[i]))
                win = next(windows)
                windows.close()
                result = WindowOutput.of_batches(i, ff.filter_window(
                    win, tracker=tracker, active=active, high_watermark=high_watermark,
                    offset_map=offset_map, now_ms=now_ms, delete_retention_ms=delete_retention_ms, counts=counts,  # type: ignore[arg-type]
                    record_decisions=False, asked=None, max_batch_bytes=max_batch_bytes, ordinal_base=ordinal))
                consumed = len(win.headers)
            yield result
            release_pages(buf, int(h.position[i]), int(h.position[i + consumed - 1]) + int(h.size[i + consumed - 1]))
            ordinal += int(np.maximum(h.recordsCount[i:i + consumed].astype(np.int64), 0).sum())
            i += consumed
    if cache is not None:
        cache.drop_segment(seg.base_offset)
    if stop < n:           # the decoder's refusal of a v0/v1 message, with its message
        yield from read_windows(seg, max_batch_bytes=max_batch_bytes, from_position=int(h.position[stop]))  # type: ignore[misc]  # raises first


__all__ = ["WindowOutput", "available", "filter_window_kernel", "filtered_windows", "plain_batches"]
