"""The accelerated twin of ``compression``'s decompression: a whole window of v2 batch payloads
decompressed in one numba call, without the GIL and without a Python call per batch.

lz4 blocks and zstd frames go to the C libraries that the lz4 and zstandard packages already ship
(called through function pointers); snappy blocks are decoded here in numba. Only the framings
Kafka's producers write take this path: Kafka's own LZ4 frame header (FLG 0x60, BD 0x40), xerial or
raw snappy, zstd frames. Anything else — another LZ4 frame descriptor, a concatenated xerial stream,
and every error — hands the batch back to ``compression.decompress_into``, so edge cases and error
messages stay the reference path's. Without the C functions (see native.py) this path is off.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from kafkalog.format.compression import (KAFKA_LZ4_HEADER, LZ4, LZ4_BLOCK_SIZES, LZ4_BLOCK_UNCOMPRESSED, NONE, SNAPPY,
                                         XERIAL_HEADER_SIZE, XERIAL_MAGIC, XERIAL_MAGIC_AS_LENGTH, ZSTD)
from kafkalog.format.native import ZSTD_RESET_SESSION_ONLY, lz4_decompress_safe, zstd_dctx_reset, zstd_decompress_stream, zstd_is_error
from kafkalog.format.records_accel import be32 as _be32, copy_bytes
from kafkalog.format.native import lz4_compress_fast_continue, lz4_reset_stream, zstd_compress_stream2

_CACHE = os.path.isfile(__file__)

# what decompress_window_kernel returns
WIN_DONE = 0        # every batch handled
WIN_BUDGET = 1      # batch b would take the window past its budget: the window ends before b
WIN_FALLBACK = 2    # batch b needs the reference path (unusual framing, or an error to report)
WIN_SPACE = 3       # batch b needs ``need`` more bytes of output buffer than are left

# Kafka's LZ4 frame as its producers write it (compression.KAFKA_LZ4_HEADER: FLG 0x60, BD 0x40 for
# 64 KiB blocks, no checksums, no content size), then blocks (uint32 LE size, bit 31 set when stored
# uncompressed) up to a zero end mark.
KAFKA_LZ4_HEADER_BYTES = np.frombuffer(KAFKA_LZ4_HEADER, dtype=np.uint8)
LZ4_HEADER_SIZE = len(KAFKA_LZ4_HEADER)
LZ4_BLOCK_MAX = LZ4_BLOCK_SIZES[4]

XERIAL = np.frombuffer(XERIAL_MAGIC, dtype=np.uint8)

# snappy tags (low two bits of a tag byte)
_SNAPPY_LITERAL, _SNAPPY_COPY1, _SNAPPY_COPY2, _SNAPPY_COPY4 = 0, 1, 2, 3


# copy_bytes with a constant 8 is one unaligned 8-byte move once LLVM sees the constant; the snappy
# decoder copies short literals and matches with such "wild" moves (which may write up to 15 bytes
# past the end of a copy, into buffer space that the next copy overwrites). A 16-byte move:
@intrinsic
def _copy16_at(typingctx, dst_address, src_address):
    """16 bytes from one address to another (one unaligned 128-bit load and store)."""
    sig = types.void(types.uintp, types.uintp)

    def codegen(context, builder, signature, args):
        d, s = args
        word = ir.IntType(128)
        value = builder.load(builder.inttoptr(s, word.as_pointer()), align=1)
        builder.store(value, builder.inttoptr(d, word.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


# --- per-codec decoders (inlined into the window kernel) ---------------------------------------
# Each returns (status, end of output); status is WIN_DONE, WIN_FALLBACK or WIN_SPACE (then the
# second value is the number of output bytes needed from ``at``).

@njit(cache=_CACHE, inline="always")
def _le32(src, p):
    return (np.uint32(src[p]) | (np.uint32(src[p + 1]) << 8) | (np.uint32(src[p + 2]) << 16)
            | (np.uint32(src[p + 3]) << 24))


@njit(cache=_CACHE, nogil=True)
def _lz4_frame(src, s, e, dst, at, limit, lz4_fn):
    """Kafka's LZ4 frame [s, e) → dst[at:]; ``limit`` bounds the output (max batch bytes)."""
    if e - s < LZ4_HEADER_SIZE:
        return WIN_FALLBACK, 0
    for k in range(LZ4_HEADER_SIZE):
        if src[s + k] != KAFKA_LZ4_HEADER_BYTES[k]:
            return WIN_FALLBACK, 0
    p = s + LZ4_HEADER_SIZE
    d = at
    cap = dst.shape[0]
    src_base = src.ctypes.data
    dst_base = dst.ctypes.data
    while True:
        if p + 4 > e:
            return WIN_FALLBACK, 0                      # no end mark
        word = _le32(src, p)
        p += 4
        size = np.int64(word & np.uint32(0x7FFFFFFF))
        if size == 0:
            return WIN_DONE, d                          # the end mark, with or without bit 31 (as Kafka reads it)
        if size > LZ4_BLOCK_MAX or p + size > e:
            return WIN_FALLBACK, 0
        if word & np.uint32(LZ4_BLOCK_UNCOMPRESSED):
            if d + size > cap:
                return WIN_SPACE, d + size - at
            copy_bytes(dst, d, src, p, size)
            d += size
        else:
            if d + LZ4_BLOCK_MAX > cap:
                return WIN_SPACE, d + LZ4_BLOCK_MAX - at
            r = lz4_decompress_safe(lz4_fn, np.uintp(src_base + p), np.uintp(dst_base + d), np.int32(size),
                          np.int32(LZ4_BLOCK_MAX))
            if r < 0:
                return WIN_FALLBACK, 0                  # corrupt block: the reference path says so
            d += r
        if d - at > limit:
            return WIN_FALLBACK, 0                      # too big: the reference path raises
        p += size


def _snappy_tag_table() -> np.ndarray:
    """snappy's tag table (snappy.cc char_table): per tag byte, length | offset high bits << 8 |
    number of trailer bytes << 11. A literal's length is entry length + trailer (the trailer holds
    length - 1 for literals of 61+ bytes), a copy's offset is (entry & 0x700) + trailer."""
    table = np.zeros(256, dtype=np.int64)
    for tag in range(256):
        kind = tag & 3
        if kind == _SNAPPY_LITERAL:
            ln = tag >> 2
            table[tag] = (ln + 1) if ln < 60 else (1 | ((ln - 59) << 11))
        elif kind == _SNAPPY_COPY1:
            table[tag] = (((tag >> 2) & 7) + 4) | ((tag >> 5) << 8) | (1 << 11)
        elif kind == _SNAPPY_COPY2:
            table[tag] = ((tag >> 2) + 1) | (2 << 11)
        else:
            table[tag] = ((tag >> 2) + 1) | (4 << 11)
    return table


SNAPPY_TAGS = _snappy_tag_table()
SNAPPY_TRAILER_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.int64)


@njit(cache=_CACHE, inline="always")
def _snappy_block(src, s, e, dst, d, cap, room):
    """One raw snappy block [s, e) → dst[d:]; at most ``room`` bytes. Returns (status, end or need)."""
    # preamble: the uncompressed length, a varint of at most 5 bytes (32 bits)
    n = np.int64(0)
    shift = 0
    while True:
        if s >= e or shift > 28:
            return WIN_FALLBACK, 0
        c = np.int64(src[s])
        s += 1
        n |= (c & 0x7F) << shift
        if c < 0x80:
            break
        shift += 7
    if n > 0xFFFFFFFF or n > room:
        return WIN_FALLBACK, 0
    if d + n > cap:
        return WIN_SPACE, d + n
    d0 = d
    dend = d + n
    src_len = src.shape[0]
    src_base = src.ctypes.data
    dst_base = dst.ctypes.data
    while s < e:
        if s + 80 <= e and d + 80 <= dend:
            # Far from both ends, a literal of up to 60 bytes (tag only) or a copy of up to 64 bytes
            # from at least 16 back needs no bounds check but the copy offset's, and moves in 16-byte
            # steps (writing up to 15 bytes past its end, which the next one overwrites).
            tag = src[s]
            if (tag & 3) == _SNAPPY_LITERAL:
                if tag < 240:
                    ln = np.int64(tag >> 2) + 1
                    _copy16_at(np.uintp(dst_base + d), np.uintp(src_base + s + 1))
                    for k in range(16, ln, 16):
                        _copy16_at(np.uintp(dst_base + d + k), np.uintp(src_base + s + 1 + k))
                    s += 1 + ln
                    d += ln
                    continue
            else:
                entry = SNAPPY_TAGS[tag]
                extra = entry >> 11
                off = (entry & 0x700) + (np.int64(_le32(src, s + 1)) & SNAPPY_TRAILER_MASK[extra])
                if off >= 16 and off <= d - d0:
                    ln = entry & 0xFF
                    _copy16_at(np.uintp(dst_base + d), np.uintp(dst_base + d - off))
                    for k in range(16, ln, 16):
                        _copy16_at(np.uintp(dst_base + d + k), np.uintp(dst_base + d - off + k))
                    s += 1 + extra
                    d += ln
                    continue
        tag = src[s]
        s += 1
        entry = SNAPPY_TAGS[tag]
        extra = entry >> 11
        if s + 4 <= src_len:
            trailer = np.int64(_le32(src, s)) & SNAPPY_TRAILER_MASK[extra]
        else:
            trailer = np.int64(0)
            for k in range(min(extra, src_len - s)):
                trailer |= np.int64(src[s + k]) << (8 * k)
        s += extra
        literal = (tag & 3) == _SNAPPY_LITERAL
        # Branches kept few and predictable (tags alternate at random between literals and copies).
        ln = (entry & 0xFF) + (trailer if literal else 0)
        off = (entry & 0x700) + trailer
        if literal:
            if s + ln > e:
                return WIN_FALLBACK, 0
        elif s > e or off == 0 or off > d - d0:
            return WIN_FALLBACK, 0
        if d + ln > dend:
            return WIN_FALLBACK, 0
        if ln <= 16 and d + 16 <= cap and ((literal and s + 16 <= src_len) or off >= 16):
            _copy16_at(np.uintp(dst_base + d), np.uintp((src_base + s) if literal else (dst_base + d - off)))
        elif literal:
            copy_bytes(dst, d, src, s, ln)
        elif off >= 8 and d + ln + 8 <= cap:
            # each 8-byte read ends at or before the write position: correct even when overlapping
            k = 0
            while k < ln:
                copy_bytes(dst, d + k, dst, d - off + k, 8)
                k += 8
        else:                                           # a pattern shorter than 8 bytes repeats
            for k in range(ln):
                dst[d + k] = dst[d - off + k]
        s += ln if literal else 0
        d += ln
    if d != dend:
        return WIN_FALLBACK, 0
    return WIN_DONE, d


@njit(cache=_CACHE, nogil=True)
def _snappy(src, s, e, dst, at, limit):
    """snappy-java's xerial framing (or a raw block, as some producers wrote) [s, e) → dst[at:]."""
    cap = dst.shape[0]
    xerial = e - s >= XERIAL_HEADER_SIZE
    if xerial:
        for k in range(8):
            if src[s + k] != XERIAL[k]:
                xerial = False
                break
    if not xerial:
        st, r = _snappy_block(src, s, e, dst, at, cap, limit)
        if st == WIN_SPACE:
            return st, r - at
        return st, r
    if _be32(src, s + 8) < 1:
        return WIN_FALLBACK, 0                          # snappy-java refuses versions below 1
    p = s + XERIAL_HEADER_SIZE
    d = at
    while p + 4 <= e:
        length = _be32(src, p)
        if length < 0 or length == XERIAL_MAGIC_AS_LENGTH:
            return WIN_FALLBACK, 0                      # concatenated streams, or an error: reference path
        p += 4
        if p + length > e:
            return WIN_FALLBACK, 0
        st, r = _snappy_block(src, p, p + length, dst, d, cap, limit - (d - at))
        if st == WIN_SPACE:
            return st, r - at
        if st != WIN_DONE:
            return st, 0
        d = r
        p += length
    return WIN_DONE, d


@njit(cache=_CACHE, inline="always")
def _zstd_buffers(io, src, s, n, dst, cap, at):
    """Fill ``io`` as ZSTD_inBuffer {src + s, n, 0} and ZSTD_outBuffer {dst, cap, at}; returns their
    addresses (in, out)."""
    io[0] = np.uint64(src.ctypes.data + s)
    io[1] = np.uint64(n)
    io[2] = 0
    io[3] = np.uint64(dst.ctypes.data)
    io[4] = np.uint64(cap)
    io[5] = np.uint64(at)
    return np.uintp(io.ctypes.data), np.uintp(io.ctypes.data + 24)


@njit(cache=_CACHE, nogil=True)
def _zstd(src, s, e, dst, at, limit, fns, dctx, io):
    """zstd frames [s, e) → dst[at:], through ZSTD_decompressStream (Java's frames carry no content
    size). ``io`` is scratch for ZSTD_inBuffer {src, size, pos} and ZSTD_outBuffer {dst, size, pos}."""
    stream_fn, reset_fn, is_error_fn = fns[0], fns[1], fns[2]
    if e == s or limit < 0:
        return WIN_FALLBACK, 0
    cap = dst.shape[0]
    out_cap = min(cap, at + limit + 1)                  # one byte past the limit tells "too big"
    zstd_is_error(is_error_fn, zstd_dctx_reset(reset_fn, dctx, np.int32(ZSTD_RESET_SESSION_ONLY)))
    in_ptr, out_ptr = _zstd_buffers(io, src, s, e - s, dst, out_cap, at)
    while True:
        in_before = io[2]
        out_before = io[5]
        r = zstd_decompress_stream(stream_fn, dctx, out_ptr, in_ptr)
        if zstd_is_error(is_error_fn, r) != 0:
            return WIN_FALLBACK, 0
        d = np.int64(io[5])
        if d - at > limit:
            return WIN_FALLBACK, 0                      # too big: the reference path raises
        if r == 0 and io[2] == io[1]:
            if d == at:
                return WIN_FALLBACK, 0                  # no output at all: the reference path says why
            return WIN_DONE, d                          # every frame read and flushed
        if d == out_cap:
            if out_cap < cap:
                return WIN_FALLBACK, 0
            return WIN_SPACE, 2 * (d - at) + (1 << 20)
        if io[2] == in_before and io[5] == out_before:
            return WIN_FALLBACK, 0                      # truncated frame: no progress


@njit(cache=_CACHE, nogil=True)
def decompress_window_kernel(buf, codec, counts, starts, ends, b, budget, total, dbuf, at, b_src, b_start,
                             b_end, max_batch_bytes, lz4_fn, zstd_fns, dctx, io, snappy_on):
    """Batches b.. of a window: uncompressed ones are used in place, compressed ones decompressed into
    ``dbuf`` from ``at`` (b_src 1, [b_start, b_end) set). Stops at the window's ``budget`` of record
    bytes (the first batch always fits) or at a batch it cannot do.
    A codec whose function address is 0 (or snappy, when ``snappy_on`` is false) falls back.
    Returns (status, batch index, at, total, need)."""
    nb = codec.shape[0]
    while b < nb:
        c = codec[b]
        if counts[b] == 0:
            # Kafka never reads the payload of a batch that declares no records
            b_start[b] = 0
            b_end[b] = 0
            b += 1
            continue
        s = starts[b]
        e = ends[b]
        if c == NONE:
            if b > 0 and total + e - s > budget:
                return WIN_BUDGET, b, at, total, 0
            total += e - s
            b += 1
            continue
        if c == LZ4 and lz4_fn != 0:
            st, r = _lz4_frame(buf, s, e, dbuf, at, max_batch_bytes, lz4_fn)
        elif c == SNAPPY and snappy_on:
            st, r = _snappy(buf, s, e, dbuf, at, max_batch_bytes)
        elif c == ZSTD and dctx != 0:
            st, r = _zstd(buf, s, e, dbuf, at, max_batch_bytes, zstd_fns, dctx, io)
        else:
            st, r = WIN_FALLBACK, 0
        if st != WIN_DONE:
            return st, b, at, total, r
        if b > 0 and total + r - at > budget:
            return WIN_BUDGET, b, at, total, 0
        b_src[b] = 1
        b_start[b] = at
        b_end[b] = r
        total += r - at
        at = r
        b += 1
    return WIN_DONE, b, at, total, 0


# --- compression (the cleaner's write-back) -----------------------------------------------------
# The bytes must equal ``compression.compress``'s: Kafka's LZ4 frame with blocks from a fresh
# LZ4 stream each (what lz4.block.compress calls), and a zstd frame from one
# ZSTD_compressStream2 continue call then end calls on a context with zstandard's parameters and an
# unknown source size (what zstandard's compressobj does); ``zstd_compressor`` checks its context
# against zstandard's bytes before handing it out.

ZSTD_C_COMPRESSION_LEVEL = 100          # ZSTD_cParameter values
ZSTD_C_CONTENT_SIZE_FLAG = 200
ZSTD_C_CHECKSUM_FLAG = 201
ZSTD_E_CONTINUE, ZSTD_E_END = 0, 2      # ZSTD_EndDirective

# what the compress kernels return
COMP_OK = 0
COMP_FALLBACK = 1   # no native function, or the output did not fit: the reference path compresses



@njit(cache=_CACHE, inline="always")
def lz4_frame_bound(n):
    """Bytes Kafka's LZ4 frame of ``n`` bytes takes at most (header, blocks with their sizes, end mark)."""
    blocks = (n + LZ4_BLOCK_MAX - 1) // LZ4_BLOCK_MAX
    return LZ4_HEADER_SIZE + blocks * 4 + n + n // 255 + 16 * blocks + 4


@njit(cache=_CACHE, nogil=True)
def lz4_frame_compress(src, s, n, dst, at, fns, state):
    """``compression.compress(LZ4, src[s:s+n])`` into dst[at:] (room: lz4_frame_bound(n)); ``fns``:
    LZ4_resetStream, LZ4_compress_fast_continue; ``state``: LZ4_STREAM_BYTES of scratch. Returns
    (status, end)."""
    reset_fn, compress_fn = fns[0], fns[1]
    if compress_fn == 0 or at + lz4_frame_bound(n) > dst.shape[0]:
        return COMP_FALLBACK, at
    state_ptr = np.uintp(state.ctypes.data)
    copy_bytes(dst, at, KAFKA_LZ4_HEADER_BYTES, 0, LZ4_HEADER_SIZE)
    d = at + LZ4_HEADER_SIZE
    src_base = src.ctypes.data
    dst_base = dst.ctypes.data
    i = 0
    while i < n:
        size = min(LZ4_BLOCK_MAX, n - i)
        bound = size + size // 255 + 16
        lz4_reset_stream(reset_fn, state_ptr)
        r = np.int64(lz4_compress_fast_continue(compress_fn, state_ptr, np.uintp(src_base + s + i),
                                                np.uintp(dst_base + d + 4), np.int32(size), np.int32(bound), np.int32(1)))
        if r <= 0:
            return COMP_FALLBACK, at
        if r >= size:
            word = np.uint32(size) | np.uint32(LZ4_BLOCK_UNCOMPRESSED)
            copy_bytes(dst, d + 4, src, s + i, size)
            r = size
        else:
            word = np.uint32(r)
        dst[d] = np.uint8(word & np.uint32(0xFF))
        dst[d + 1] = np.uint8((word >> np.uint32(8)) & np.uint32(0xFF))
        dst[d + 2] = np.uint8((word >> np.uint32(16)) & np.uint32(0xFF))
        dst[d + 3] = np.uint8(word >> np.uint32(24))
        d += 4 + r
        i += size
    dst[d] = 0
    dst[d + 1] = 0
    dst[d + 2] = 0
    dst[d + 3] = 0
    return COMP_OK, d + 4


@njit(cache=_CACHE, inline="always")
def zstd_bound(n):
    """ZSTD_COMPRESSBOUND(n), with room for the frame header."""
    small = ((128 << 10) - n) >> 11 if n < (128 << 10) else 0
    return n + (n >> 8) + small + 32


@njit(cache=_CACHE, nogil=True)
def zstd_frame_compress(src, s, n, dst, at, fns, cctx, io):
    """``compression.compress(ZSTD, src[s:s+n])`` into dst[at:] (room: zstd_bound(n)) with the
    context ``cctx`` (fns: compressStream2, CCtx_reset, isError). Returns (status, end)."""
    stream_fn, reset_fn, is_error_fn = fns[0], fns[1], fns[2]
    cap = min(dst.shape[0], at + zstd_bound(n))
    if cctx == 0 or stream_fn == 0:
        return COMP_FALLBACK, at
    if zstd_is_error(is_error_fn, zstd_dctx_reset(reset_fn, cctx, np.int32(ZSTD_RESET_SESSION_ONLY))) != 0:
        return COMP_FALLBACK, at
    in_ptr, out_ptr = _zstd_buffers(io, src, s, n, dst, cap, at)
    while io[2] < io[1]:
        before = io[2]
        r = zstd_compress_stream2(stream_fn, cctx, out_ptr, in_ptr, np.int32(ZSTD_E_CONTINUE))
        if zstd_is_error(is_error_fn, r) != 0 or (io[2] == before and io[5] == io[4]):
            return COMP_FALLBACK, at
    while True:
        r = zstd_compress_stream2(stream_fn, cctx, out_ptr, in_ptr, np.int32(ZSTD_E_END))
        if zstd_is_error(is_error_fn, r) != 0:
            return COMP_FALLBACK, at
        if r == 0:
            return COMP_OK, np.int64(io[5])
        if io[5] == io[4]:
            return COMP_FALLBACK, at


class ZstdCompressor:
    """One zstd compression context with ``compression.compress``'s parameters (level, no content
    size, no checksum), owned by one thread; ``fns`` and ``cctx`` are what the kernels take."""

    def __init__(self, native, level: int):
        self.cctx = 0
        self.fns = np.array([native.zstd_compress_stream2, native.zstd_cctx_reset, native.zstd_is_error], np.uintp)
        self.io = np.zeros(6, np.uint64)
        self._free = native.zstd_free_cctx
        if not (native.zstd_create_cctx and native.zstd_cctx_set_parameter and native.zstd_compress_stream2):
            return
        cctx = ctypes.CFUNCTYPE(ctypes.c_void_p)(native.zstd_create_cctx)() or 0
        setp = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)(
            native.zstd_cctx_set_parameter)
        is_error = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_size_t)(native.zstd_is_error)
        if not cctx:
            return
        self.cctx = cctx
        for param, value in ((ZSTD_C_COMPRESSION_LEVEL, level), (ZSTD_C_CONTENT_SIZE_FLAG, 0),
                             (ZSTD_C_CHECKSUM_FLAG, 0)):
            if is_error(setp(cctx, param, value)):
                self.close()
                return

    def close(self) -> None:
        if self.cctx and self._free:
            ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p)(self._free)(self.cctx)
        self.cctx = 0

    def __del__(self):
        self.close()


_ZSTD_LOCAL = None


def zstd_compressor(level: int):
    """This thread's context for ``level`` (None when the native encoder is missing or its bytes
    differ from zstandard's on a sample)."""
    import threading

    from kafkalog.format.compression import compress
    from kafkalog.format.native import native_functions

    global _ZSTD_LOCAL
    if _ZSTD_LOCAL is None:
        _ZSTD_LOCAL = threading.local()
    cache = getattr(_ZSTD_LOCAL, "contexts", None)
    if cache is None:
        cache = _ZSTD_LOCAL.contexts = {}
    if level not in cache:
        native = native_functions()
        c = ZstdCompressor(native, level) if native.enabled else None
        if c is not None and c.cctx:
            sample = np.frombuffer(b"kafkalog compaction " * 500 + bytes(range(256)), np.uint8)
            out = np.empty(zstd_bound(len(sample)), np.uint8)
            st, end = zstd_frame_compress(sample, 0, len(sample), out, 0, c.fns, np.uintp(c.cctx), c.io)
            if st != COMP_OK or bytes(out[:end]) != compress(ZSTD, sample.tobytes(), level=level):
                c.close()
                c = None
        else:
            c = None
        cache[level] = c
    return cache[level]
