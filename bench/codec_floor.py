"""The codec-and-write floor of one compaction (issue 15): the work any exact cleaner must do on the
bytes ``bench/compact.py`` cleans, whatever its walks cost, timed bare on one thread.

Given the source log dir and the single-process cleaner's output of the same round:

- **decompress**: every compressed batch of the replaced source segments, once
  (``decoder.decompress_batches``, the decoder's own window kernel);
- **compress**: every rewritten compressed batch of the output, its records recompressed with its codec
  through the same C contexts the cleaner uses (``compression_accel``: zstd level 3 without content
  size, Kafka's LZ4 frame), and the CRC-32C of every rewritten batch; batches copied verbatim cost
  nothing here (an output batch whose CRC equals the source batch's at the same base offset);
- **write**: the output ``.log`` bytes written to a new file and fsynced, as the round's sink does.

The sum is a lower bound for ``clean_partition`` on these bytes: its key walk, keep/drop decisions,
record copying, planning, indexes and swap come on top. ``decode ÷ floor`` is therefore the most
``single ÷ decode`` can reach on this data with these codecs on one core.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
from numba import njit

from kafkalog.format import record_batch as rb
from kafkalog.format.compression import LZ4, NONE, ZSTD_LEVEL, OutputBuffer
from kafkalog.format.compression_accel import (COMP_OK, lz4_frame_bound, lz4_frame_compress, zstd_bound,
                                               zstd_compressor, zstd_frame_compress)
from kafkalog.format.decoder import decompress_batches
from kafkalog.format.file_records import scan_batches
from kafkalog.fs.filesystem import MappedFile
from kafkalog.format.native import LZ4_STREAM_BYTES, crc32c_update, native_functions
from kafkalog.cleaner.key_walk import WINDOW_BATCHES, WINDOW_BYTES     # windows as the map pass cuts them

# the thread CPU seconds of each timed part (beside the wall seconds): on a loaded machine the wall
# time is mostly waiting for a core, the CPU time is the work
_cpu_decompress = _cpu_compress = _cpu_write = 0.0


@njit(cache=True, nogil=True)
def compress_all_kernel(src, starts, ends, codecs, out, lz4_fns, lz4_state, zstd_fns, cctx, zstd_io, crc_fn):
    """Compress src[starts[i]:ends[i]] with codecs[i] into ``out`` (one after the other), CRC-32C of
    each result; returns (bytes written, failures)."""
    q = 0
    failed = 0
    for i in range(starts.shape[0]):
        s, n, codec = starts[i], ends[i] - starts[i], codecs[i]
        if codec == LZ4:
            st, e = lz4_frame_compress(src, s, n, out, q, lz4_fns, lz4_state)
        else:
            st, e = zstd_frame_compress(src, s, n, out, q, zstd_fns, cctx, zstd_io)
        if st != COMP_OK:
            failed += 1
            continue
        crc32c_update(crc_fn, np.uint32(0xFFFFFFFF), np.uintp(out.ctypes.data + q), np.uintp(e - q))
        q = e
    return q, failed


def _headers(path: Path):
    return scan_batches(path, verify_crc=False).headers


def _replaced(source: Path, cleaned: Path) -> Tuple[List[Path], List[Path]]:
    """(source .log files the round replaced, output .log files it wrote): those whose bytes differ
    between the two trees (the active segment is the same in both)."""
    src, out = [], []
    for part in sorted(p for p in source.iterdir() if p.is_dir()):
        before = {p.name: p for p in part.glob("*.log")}
        after = {p.name: p for p in (cleaned / part.name).glob("*.log")}
        same = {n for n in before.keys() & after.keys()
                if before[n].stat().st_size == after[n].stat().st_size and before[n].read_bytes() == after[n].read_bytes()}
        src += [before[n] for n in sorted(before.keys() - same)]
        out += [after[n] for n in sorted(after.keys() - same)]
    return src, out


def time_decompress(paths: List[Path]) -> Tuple[float, int]:
    """Seconds to decompress every compressed batch of ``paths`` once, and the batches."""
    buf_out = OutputBuffer(1 << 20)
    total = 0.0
    batches = 0
    global _cpu_decompress
    _cpu_decompress = 0.0
    for path in paths:
        h = _headers(path)
        compressed = np.flatnonzero((h.attributes & rb.COMPRESSION_CODEC_MASK) != 0)
        hc = h.take(compressed)
        with MappedFile(path) as f:
            buf = f.array
            t0, c0 = time.perf_counter(), time.thread_time()
            i = 0
            while i < len(hc):
                nb, *_ = decompress_batches(buf, hc.slice(i, min(len(hc), i + WINDOW_BATCHES)), buf_out,
                                            path=path, budget=WINDOW_BYTES)
                i += max(int(nb), 1)
            total += time.perf_counter() - t0
            _cpu_decompress += time.thread_time() - c0
        batches += len(hc)
    return total, batches


def _rewritten_compressed(out_path: Path, source_crcs: Dict[int, int]):
    """The output batches of ``out_path`` that were rewritten and are compressed: their headers."""
    h = _headers(out_path)
    codec = h.attributes & rb.COMPRESSION_CODEC_MASK
    copied = np.fromiter((source_crcs.get(int(b)) == int(c) for b, c in zip(h.baseOffset, h.crc)), bool, len(h))
    return h.take(np.flatnonzero((codec != NONE) & ~copied))


def time_compress(source_paths: List[Path], out_paths: List[Path]) -> Tuple[float, int, int]:
    """Seconds to recompress (and CRC) the rewritten compressed batches of ``out_paths``, their count
    and their records' bytes. Their records are decompressed first, untimed."""
    native = native_functions()
    z = zstd_compressor(ZSTD_LEVEL)
    if not native.enabled or z is None:
        raise SystemExit("codec floor: the native lz4/zstd/CRC functions are missing")
    source_crcs: Dict[int, int] = {}
    for p in source_paths:
        h = _headers(p)
        source_crcs.update(zip(h.baseOffset.tolist(), h.crc.tolist()))
    regions, codecs = [], []
    for p in out_paths:
        h = _rewritten_compressed(p, source_crcs)
        with MappedFile(p) as f:
            i = 0
            while i < len(h):
                part = h.slice(i, min(len(h), i + WINDOW_BATCHES))
                nb, b_src, b_start, b_end, dbuf = decompress_batches(f.array, part, OutputBuffer(1 << 20), path=p,
                                                                     budget=WINDOW_BYTES)
                nb = max(int(nb), 1)
                for b in range(nb):
                    regions.append(bytes(dbuf[int(b_start[b]):int(b_end[b])]))
                codecs.extend(int(c) for c in (part.attributes[:nb] & rb.COMPRESSION_CODEC_MASK))
                i += nb
    sizes = np.fromiter((len(r) for r in regions), np.int64, len(regions))
    ends = np.cumsum(sizes)
    src = np.frombuffer(b"".join(regions), np.uint8)
    codec_arr = np.array(codecs, np.int64)
    room = int(sum(max(lz4_frame_bound(int(n)), zstd_bound(int(n))) for n in sizes)) + 64
    out = np.empty(room, np.uint8)
    out[:] = 0                                       # pages touched before timing
    lz4_fns = np.array([native.lz4_reset_stream, native.lz4_compress_fast_continue], np.uintp)
    state = np.zeros(LZ4_STREAM_BYTES, np.uint8)
    starts = ends - sizes
    rest = (out, lz4_fns, state, z.fns, np.uintp(z.cctx), z.io, np.uintp(native.crc32c_update))
    compress_all_kernel(src, starts[:1], ends[:1], codec_arr[:1], *rest)     # compiled / loaded untimed
    global _cpu_compress
    t0, c0 = time.perf_counter(), time.thread_time()
    _written, failed = compress_all_kernel(src, starts, ends, codec_arr, *rest)
    wall = time.perf_counter() - t0
    _cpu_compress = time.thread_time() - c0
    if failed:
        raise SystemExit(f"codec floor: {failed} batches did not compress natively")
    return wall, len(sizes), int(sizes.sum())


def time_write(out_paths: List[Path], scratch: Path) -> Tuple[float, int]:
    """Seconds to write the output .log bytes to new files and fsync them (bytes in memory first)."""
    global _cpu_write
    total, written = 0.0, 0
    _cpu_write = 0.0
    for i, p in enumerate(out_paths):
        data = p.read_bytes()
        target = scratch / f"floor-{i}.log"
        t0, c0 = time.perf_counter(), time.thread_time()
        with open(target, "wb", buffering=0) as f:
            view = memoryview(data)
            for at in range(0, len(view), 1 << 20):
                f.write(view[at:at + (1 << 20)])
            os.fsync(f.fileno())
        total += time.perf_counter() - t0
        _cpu_write += time.thread_time() - c0
        written += len(data)
        target.unlink()
    return total, written


def measure_floor(source: Path, cleaned: Path, scratch: Path) -> dict:
    """The three parts of the floor for the round that turned ``source`` into ``cleaned``."""
    src, out = _replaced(source, cleaned)
    os.sync()
    d, d_batches = time_decompress(src)
    c, c_batches, c_bytes = time_compress(src, out)
    w, w_bytes = time_write(out, scratch)
    return dict(decompress_s=d, decompressed_batches=d_batches, compress_s=c, compressed_batches=c_batches,
                compressed_input_bytes=c_bytes, write_s=w, written_bytes=w_bytes, floor_s=d + c + w,
                floor_cpu_s=_cpu_decompress + _cpu_compress + _cpu_write)


__all__ = ["measure_floor"]
