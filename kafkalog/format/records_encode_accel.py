"""The accelerated writer of a retained v2 batch (the cleaner's write-back, ``MemoryRecords.filterTo``): a numba
kernel re-encodes the kept records of one batch straight from its (decompressed) records region.

A retained record keeps its offsetDelta (baseOffset is kept), key, value and headers, so the kernel
copies the record's bytes from the offsetDelta field onward verbatim and writes only a new length
varint, attributes 0 and the new timestampDelta varlong. That equals what the reference writer
(``record_batch.encode_batch`` over the decoded fields) produces exactly when every varint of the
copied part is in canonical (shortest) form, every null length is -1 and every header key is
ASCII (a header key is decoded leniently as UTF-8 and re-encoded); the kernel checks all of this
and answers ``ENC_FALLBACK`` otherwise, and the caller then takes the reference writer. The
header and CRC are built as ``encode_batch`` builds them; tests compare both writers byte for byte.

For compiled callers that have walked the records themselves (the cleaner's window recopy,
``cleaner.filter_to``, which decides keep/drop in the same walk and checks the same canonical
forms with ``varint_canonical``), the same writing comes in pieces with no Python call at all:
``write_kept_records_kernel`` writes the kept records from the positions the caller noted
(``write_kept_record`` each, no second parse), and ``seal_batch_kernel`` puts the header in front
— the source batch's with the fields a rewrite changes patched — compressing the records through
the C codecs (``compression_accel``; for codec none they are written in place after the header)
and computing the CRC through the C CRC-32C (``native``); whatever it cannot do the same way it
answers ENC_FALLBACK.
"""
from __future__ import annotations

import functools
import os
from typing import Optional

import numpy as np
from numba import njit

from kafkalog.format import record_batch as rb
from kafkalog.format.records_accel import copy_bytes
from kafkalog.format.compression import LZ4, NONE, ZSTD
from kafkalog.format.compression_accel import COMP_OK, lz4_frame_compress, zstd_frame_compress
from kafkalog.format.native import crc32c_update
from kafkalog.java_types import INT64_MAX, INT64_MIN

_CACHE = os.path.isfile(__file__)

ENC_OK = 0
ENC_FALLBACK = 1        # the verbatim copy would differ from the reference writer's bytes
ENC_MALFORMED = 2       # the records region does not walk (the decoder would have refused it)



@njit(cache=_CACHE, inline="always")
def _skip_varint(src, p, end, max_bytes, last_max):
    """Walk a LEB128 varint at ``p``: returns (raw unsigned value as int64 bits, next p, canonical).
    next p = -1 when it is malformed (too long or past ``end``)."""
    raw = np.uint64(0)
    shift = np.uint64(0)
    for i in range(max_bytes):
        if p >= end:
            return np.int64(0), -1, False
        b = src[p]
        p += 1
        raw |= np.uint64(b & 0x7F) << shift
        if b < 0x80:
            canonical = (i == 0 or b != 0) and (i + 1 < max_bytes or b <= last_max)
            return np.int64(raw), p, canonical
        shift += np.uint64(7)
    return np.int64(0), -1, False


@njit(cache=_CACHE, inline="always")
def _zigzag32(raw):
    r = np.uint32(raw & 0xFFFFFFFF)
    return np.int64(np.int32(r >> np.uint32(1)) ^ -np.int32(r & np.uint32(1)))


@njit(cache=_CACHE, inline="always")
def _skip_nullable_bytes(src, c, rend):
    """Skip a key, value or header value (varint length, -1 for null, then the bytes) at ``c``.
    Returns (ENC_OK, next position) or (ENC_MALFORMED / ENC_FALLBACK, position)."""
    r, c, ok = _skip_varint(src, c, rend, 5, 0x0F)
    if c < 0:
        return ENC_MALFORMED, c
    n = _zigzag32(r)
    if not ok or n < -1:
        return ENC_FALLBACK, c
    if n > 0:
        c += n
        if c > rend:
            return ENC_MALFORMED, c
    return ENC_OK, c


@njit(cache=_CACHE, inline="always")
def _write_unsigned(out, q, raw):
    while raw >= np.uint64(0x80):
        out[q] = np.uint8((raw & np.uint64(0x7F)) | np.uint64(0x80))
        q += 1
        raw >>= np.uint64(7)
    out[q] = np.uint8(raw)
    return q + 1


@njit(cache=_CACHE, inline="always")
def _size_unsigned(raw):
    n = 1
    while raw >= np.uint64(0x80):
        raw >>= np.uint64(7)
        n += 1
    return n


@njit(cache=_CACHE, inline="always")
def varint_canonical(src, p, nxt):
    """Whether the varint (32-bit field) read from ``src[p:nxt)`` is in the form the reference
    writer would give it: shortest, and no bits beyond 32 in a fifth byte."""
    last = src[nxt - 1]
    n = nxt - p
    return n == 1 or (last != 0 and (n < 5 or last <= 0x0F))


@njit(cache=_CACHE, inline="always")
def write_kept_record(out, q, src, body, rend, delta):
    """Write one retained record at ``out[q]``: its new length varint, attributes 0, ``delta`` as
    its timestampDelta, then ``src[body:rend)`` (the source record from its offsetDelta on)
    verbatim. Returns the end position in ``out``."""
    zz = np.uint64((delta << 1) ^ (delta >> 63))
    tail = rend - body
    new_len = 1 + _size_unsigned(zz) + tail
    q = _write_unsigned(out, q, np.uint64(new_len << 1))
    out[q] = 0
    q += 1
    q = _write_unsigned(out, q, zz)
    copy_bytes(out, q, src, body, tail)
    return q + tail


@njit(cache=_CACHE, nogil=True)
def rewrite_records_kernel(src, start, end, count, keep, ts_delta, out, out_start):
    """Write the kept records of the records region ``src[start:end)`` (``count`` records; ``keep``:
    one 0/1 per record; ``ts_delta``: the new timestampDelta of each KEPT record, in order) to
    ``out`` from ``out_start``. Returns (status, end position in ``out``)."""
    p = start
    q = out_start
    k = 0
    for i in range(count):
        raw, p1, canon = _skip_varint(src, p, end, 5, 0x0F)
        if p1 < 0:
            return ENC_MALFORMED, q
        length = _zigzag32(raw)
        if length <= 0 or p1 + length > end:
            return ENC_MALFORMED, q
        rend = p1 + length
        if keep[i] == 0:
            p = rend
            continue
        # attributes (dropped: written as 0), timestampDelta (replaced)
        c = p1 + 1
        _r, c, _ok = _skip_varint(src, c, rend, 10, 0x01)
        if c < 0:
            return ENC_MALFORMED, q
        body = c
        # offsetDelta
        _r, c, ok = _skip_varint(src, c, rend, 5, 0x0F)
        if c < 0:
            return ENC_MALFORMED, q
        if not ok:
            return ENC_FALLBACK, q
        # key, value
        for _f in range(2):
            st, c = _skip_nullable_bytes(src, c, rend)
            if st != ENC_OK:
                return st, q
        r, c, ok = _skip_varint(src, c, rend, 5, 0x0F)
        if c < 0:
            return ENC_MALFORMED, q
        nh = _zigzag32(r)
        if not ok or nh < 0:
            return ENC_FALLBACK, q
        for _h in range(nh):
            r, c, ok = _skip_varint(src, c, rend, 5, 0x0F)
            if c < 0:
                return ENC_MALFORMED, q
            n = _zigzag32(r)
            if not ok or n < 0 or c + n > rend:
                return ENC_FALLBACK, q
            for j in range(c, c + n):
                if src[j] >= 0x80:          # non-ASCII header key: the reference re-encodes its text
                    return ENC_FALLBACK, q
            c += n
            st, c = _skip_nullable_bytes(src, c, rend)
            if st != ENC_OK:
                return st, q
        if c != rend:
            return ENC_MALFORMED, q
        q = write_kept_record(out, q, src, body, rend, ts_delta[k])
        k += 1
        p = rend
    return ENC_OK, q


@njit(cache=_CACHE, inline="always")
def delta_overflows(t, base, d):
    """Whether ``d = t - base`` overflowed int64 (the reference writer raises there)."""
    return ((t ^ base) & (t ^ d)) < 0


@njit(cache=_CACHE, nogil=True)
def timestamp_deltas_kernel(ts, base, deltas):
    """deltas = ts - base; returns (overflowed, max of ts) — an int64 overflow makes the reference
    writer raise, so the caller defers to it."""
    top = ts[0]
    for i in range(ts.shape[0]):
        t = ts[i]
        d = t - base
        if delta_overflows(t, base, d):
            return True, top
        deltas[i] = d
        if t > top:
            top = t
    return False, top


# header field positions (record_batch.HEADER)
_LENGTH_AT, _CRC_AT, _ATTRIBUTES_AT, _BASE_TS_AT, _MAX_TS_AT, _COUNT_AT = 8, 17, 21, 27, 35, 57
_HEADER_BYTES = rb.RECORDS_OFFSET
_LOG_OVERHEAD = rb.LOG_OVERHEAD
_KEEP_ATTRIBUTES = 0x3F                  # codec, timestamp type, transactional, control
_HORIZON_FLAG = rb.DELETE_HORIZON_FLAG_MASK
_OFFSET_LIMIT = (1 << 63) - (1 << 31)


@njit(cache=_CACHE, inline="always")
def _put_be(out, q, value, n):
    v = np.uint64(value)
    for i in range(n - 1, -1, -1):
        out[q + i] = np.uint8(v & np.uint64(0xFF))
        v >>= np.uint64(8)


@njit(cache=_CACHE, inline="always")
def _get_be64(buf, p):
    v = np.uint64(0)
    for i in range(8):
        v = (v << np.uint64(8)) | np.uint64(buf[p + i])
    return np.int64(v)


@njit(cache=_CACHE, nogil=True)
def write_kept_records_kernel(src, kept_body, kept_end, kept_ts, nk, base_ts, out, q):
    """Write ``nk`` retained records at ``out[q:]`` (``write_kept_record`` each): record j's source
    bytes from its offsetDelta on are ``src[kept_body[j]:kept_end[j])``, its absolute timestamp
    ``kept_ts[j]``, its new timestampDelta ``kept_ts[j] - base_ts``. The caller has checked that each
    is in the form the reference writer gives (``rewrite_records_kernel``'s checks) and that
    ``out`` has room (at most 16 bytes more per record than the source's). Returns (overflowed,
    end in ``out``, largest timestamp): an int64 overflow of a delta makes the reference writer
    raise, so the caller then defers to it."""
    top = kept_ts[0]
    for j in range(nk):
        t = kept_ts[j]
        d = t - base_ts
        if delta_overflows(t, base_ts, d):
            return True, q, top
        if t > top:
            top = t
        q = write_kept_record(out, q, src, kept_body[j], kept_end[j], d)
    return False, q, top


@njit(cache=_CACHE, nogil=True)
def seal_batch_kernel(buf, pos, records, rq, nk, base_ts, max_ts, has_horizon, out, q, lz4_fns, lz4_state, zstd_fns,
                      cctx, zstd_io, crc_fn):
    """Finish at ``out[q:]`` the rewrite (``rewrite_batch``) of the source batch whose header is at
    ``buf[pos]``, its ``nk`` kept records already written uncompressed (``rq`` bytes): for codec
    none by the caller straight at ``out[q + RECORDS_OFFSET:]`` (``records`` is then not read),
    else in ``records[0:rq)``, which the C codecs compress after the header. The header is the
    source's with length, attributes (horizon flag when ``has_horizon``), ``base_ts``, ``max_ts``
    and the count patched; then the CRC (C CRC-32C). Returns (status, end in ``out``):
    ENC_FALLBACK for whatever it cannot write as the reference writer does (another codec, an
    offset near the int64 limits, no C CRC), and nothing it wrote is to be used."""
    base_offset = _get_be64(buf, pos)
    if nk == 0 or base_offset < -_OFFSET_LIMIT or base_offset > _OFFSET_LIMIT or crc_fn == 0:
        return ENC_FALLBACK, q
    attributes = np.int64(buf[pos + _ATTRIBUTES_AT + 1]) & _KEEP_ATTRIBUTES
    codec = attributes & 7
    at = q + _HEADER_BYTES
    if codec == NONE:
        e = at + rq
        if e > out.shape[0]:
            return ENC_FALLBACK, q
    elif codec == LZ4:
        st, e = lz4_frame_compress(records, 0, rq, out, at, lz4_fns, lz4_state)
        if st != COMP_OK:
            return ENC_FALLBACK, q
    elif codec == ZSTD:
        st, e = zstd_frame_compress(records, 0, rq, out, at, zstd_fns, cctx, zstd_io)
        if st != COMP_OK:
            return ENC_FALLBACK, q
    else:
        return ENC_FALLBACK, q
    if has_horizon:
        attributes |= _HORIZON_FLAG
    copy_bytes(out, q, buf, pos, _HEADER_BYTES)
    _put_be(out, q + _LENGTH_AT, e - q - _LOG_OVERHEAD, 4)
    _put_be(out, q + _ATTRIBUTES_AT, attributes, 2)
    _put_be(out, q + _BASE_TS_AT, base_ts, 8)
    _put_be(out, q + _MAX_TS_AT, max_ts, 8)
    _put_be(out, q + _COUNT_AT, nk, 4)
    crc = crc32c_update(crc_fn, np.uint32(0xFFFFFFFF), np.uintp(out.ctypes.data + q + _ATTRIBUTES_AT),
                        np.uintp(e - q - _ATTRIBUTES_AT)) ^ np.uint32(0xFFFFFFFF)
    _put_be(out, q + _CRC_AT, crc, 4)
    return ENC_OK, e


@functools.lru_cache(maxsize=256)
def _attributes(codec: int, timestamp_type: int, transactional: bool, control: bool, horizon: bool) -> int:
    return rb.compute_attributes(codec=codec, timestamp_type=timestamp_type, transactional=transactional,
                                 control=control, delete_horizon=horizon)


def _fits_int64(*values) -> bool:
    return all(INT64_MIN <= v <= INT64_MAX for v in values)


def rewrite_batch(src: np.ndarray, start: int, end: int, count: int, keep: np.ndarray, timestamps: np.ndarray, *,
                  base_offset: int, last_offset_delta: int, codec: int, timestamp_type: int, transactional: bool,
                  control: bool, delete_horizon_ms: Optional[int], producer_id: int, producer_epoch: int,
                  base_sequence: int, partition_leader_epoch: int, max_timestamp: Optional[int]) -> Optional[bytes]:
    """The bytes ``encode_batch`` writes for the kept records (``keep``) of the batch whose records
    region (decompressed) is ``src[start:end)``, with the kept records' absolute ``timestamps``
    (int64, in order) and the header fields as ``encode_batch`` takes them; ``max_timestamp`` None
    = max kept timestamp. Returns None where only the reference writer can give the exact bytes
    (non-canonical source encodings, values outside Java's ranges): the caller must then use it."""
    from kafkalog.format.compression import compress

    nk = len(timestamps)
    if nk == 0 or not INT64_MIN + (1 << 31) <= base_offset <= INT64_MAX - (1 << 31):
        return None         # (near the limits an offset wraps and the reference re-derives its delta)
    ts = timestamps.astype(np.int64, copy=False)
    base_ts = delete_horizon_ms if delete_horizon_ms is not None else int(ts[0])
    if not _fits_int64(base_ts) or (max_timestamp is not None and not _fits_int64(max_timestamp)):
        return None
    deltas = np.empty(nk, np.int64)
    overflow, top = timestamp_deltas_kernel(ts, np.int64(base_ts), deltas)
    if overflow:                                        # int64 overflow: the reference raises
        return None
    max_ts = int(top) if max_timestamp is None else max_timestamp
    cap = rb.RECORD_BATCH_OVERHEAD + (end - start) + 16 * nk
    out = np.empty(cap, dtype=np.uint8)
    status, q = rewrite_records_kernel(src, start, end, count, keep.view(np.uint8) if keep.dtype == np.bool_ else keep,
                                       deltas, out, rb.RECORDS_OFFSET)
    if status != ENC_OK:
        return None
    attributes = _attributes(codec, timestamp_type, bool(transactional), bool(control), delete_horizon_ms is not None)
    records = memoryview(out)[rb.RECORDS_OFFSET:q]  # type: ignore[arg-type, unused-ignore]  # ndarray is a Buffer (typed so from 3.12)
    payload = records if codec == 0 else compress(codec, records, magic=rb.MAGIC_VALUE_V2, level=None)  # type: ignore[arg-type]  # compress reads any bytes-like
    header = bytearray(rb.RECORDS_OFFSET)
    rb.HEADER.pack_into(header, 0, base_offset, rb.RECORD_BATCH_OVERHEAD + len(payload) - rb.LOG_OVERHEAD,
                        partition_leader_epoch, rb.MAGIC_VALUE_V2, 0, attributes, last_offset_delta, base_ts, max_ts,
                        producer_id, producer_epoch, base_sequence, nk)
    crc = rb.crc32c_update(payload, rb.crc32c(memoryview(header)[rb.ATTRIBUTES_OFFSET:]))
    rb.CRC_FIELD.pack_into(header, rb.CRC_OFFSET, crc)
    return bytes(header) + bytes(payload)


__all__ = ["ENC_FALLBACK", "ENC_MALFORMED", "ENC_OK", "rewrite_batch", "rewrite_records_kernel",
           "delta_overflows", "seal_batch_kernel", "timestamp_deltas_kernel", "varint_canonical", "write_kept_record",
           "write_kept_records_kernel"]
