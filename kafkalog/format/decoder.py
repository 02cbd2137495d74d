"""Record batches → Arrow: decode a window of walked batches into one ``pyarrow.RecordBatch`` of
RECORD_SCHEMA, with the reference engine or the accelerated one (same result, tests compare).

Windows keep memory bounded: a 1 GB segment is decoded as a stream of RecordBatches of at most
``window_bytes`` of (decompressed) record data each. The output columns are built in
``format.record_columns``; a single batch too large for one window is ``format.batch_slices``' job.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import List, Optional

import numpy as np
import pyarrow as pa

from kafkalog.engine import REFERENCE, resolve as resolve_engine
from kafkalog.errors import InvalidRecordError, KafkalogError
from kafkalog.format import record_batch as rb
from kafkalog.format import records_reference as ref
from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES, OutputBuffer, decompress_into
from kafkalog.format.file_records import HeaderArrays
from kafkalog.format.record_columns import (EMPTY, BatchColumnPlan, assemble, batch_columns, batch_columns_accel,
                                           binary_array, carve, no_headers, pool_empty, readonly, values_then_keys)
from kafkalog.format.schema import HEADER_TYPE, HEADERS_TYPE
from kafkalog.topic_partition import UNKNOWN_PARTITION, TopicPartition

_INT32_MAX = (1 << 31) - 1
MIN_RECORD_SIZE = rb.MIN_RECORD_SIZE
# Record data decoded by one call, at most: Arrow binary offsets are int32, so one RecordBatch must
# stay well below 2 GiB of keys (or values); a single larger batch cannot be split and is refused.
MAX_DECODE_BYTES = 1 << 30


# --- scratch memory of a decode call -------------------------------------------------------

class Workspace:
    """What one decode call works in: the decompression buffer, the key bytes before they join the
    values, and per-record scratch (key/value validity, header counts and positions). Nothing in it
    outlives the call: the kernels copy out.

    Kept buffers matter more than they seem: on VMs whose host reclaims freed guest memory (free
    page reporting), a freshly faulted MiB costs ~2.5 ms against ~0.1 ms for a warm one."""

    MAX_KEPT = 64 << 20      # a buffer grown past this by one huge batch is not kept for the next call
    MAX_KEPT_RECORDS = 8 << 20

    def __init__(self):
        self.out = OutputBuffer(16 << 20)
        self.keys = OutputBuffer(4 << 20)
        self._scratch = None

    def scratch(self, n: int):
        if self._scratch is None or len(self._scratch[0]) < n:
            size = max(n, 1 << 16)
            self._scratch = (np.empty(size, np.uint8), np.empty(size, np.uint8), np.empty(size, np.int32),
                             np.empty(size, np.int64))
        return tuple(a[:n] for a in self._scratch)

    def worth_keeping(self) -> bool:
        return (len(self.out.array) <= self.MAX_KEPT and len(self.keys.array) <= self.MAX_KEPT
                and (self._scratch is None or len(self._scratch[0]) <= self.MAX_KEPT_RECORDS))


class WorkspacePool:
    """Workspaces shared by every thread of the process. The reader's worker threads end with each
    call; per-thread buffers were allocated and first touched again every time (~40 MB per call)."""

    def __init__(self):
        self._free: List[Workspace] = []
        self._lock = threading.Lock()

    def acquire(self) -> Workspace:
        with self._lock:
            if self._free:
                return self._free.pop()
        return Workspace()

    def release(self, ws: Workspace) -> None:
        if not ws.worth_keeping():
            return
        with self._lock:
            if len(self._free) < 8:
                self._free.append(ws)


WORKSPACES = WorkspacePool()


# --- reference engine ----------------------------------------------------------------------

def decode_reference(buf, h: HeaderArrays, pid: TopicPartition, *, path=None, verify_crc: bool = True,
                     max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, budget: Optional[int] = None):
    """Decode a prefix of ``h`` holding at most ``budget`` bytes of keys and values (at least one
    batch). Returns (RecordBatch, number of batches consumed)."""
    budget = MAX_DECODE_BYTES if budget is None else min(budget, MAX_DECODE_BYTES)
    max_batch_bytes = min(max_batch_bytes, MAX_DECODE_BYTES)
    rows: List[ref.RecordRow] = []
    nb = len(h)
    counts = np.zeros(nb, dtype=np.int64)
    base_offsets = h.baseOffset.copy()
    total = 0
    for b in range(nb):
        pos = int(h.position[b])
        if h.magic[b] == 2:
            _, batch_rows = ref.decode_v2_batch(buf, pos, path=path, max_batch_bytes=max_batch_bytes)
        else:
            wrapper, inner = ref.decode_legacy_entry(buf, pos, path=path, verify_crc=verify_crc,
                                                     max_batch_bytes=max_batch_bytes)
            batch_rows = ref.legacy_rows(wrapper, inner)
            base_offsets[b] = batch_rows[0].offset   # a wrapper's base offset is its first inner offset
        size = sum(len(r.key or b"") + len(r.value or b"") for r in batch_rows)
        if b > 0 and total + size > budget:
            nb = b
            break
        total += size
        rows.extend(batch_rows)
        counts[b] = len(batch_rows)
    return rows_batch(rows, h.head(nb), counts[:nb], base_offsets[:nb], pid), nb


def rows_batch(rows: List[ref.RecordRow], h: HeaderArrays, counts: np.ndarray, base_offsets: np.ndarray,
                pid: TopicPartition) -> pa.RecordBatch:
    """The reference engine's rows as a RecordBatch: ``counts[b]`` rows come from batch b of ``h``."""
    n = len(rows)
    header_rows = [[{"key": k, "value": v} for k, v in r.headers] for r in rows]
    batch_cols = batch_columns(dataclasses.replace(h, baseOffset=base_offsets), counts)
    return assemble(
        n, pid,
        pa.array([r.key for r in rows], pa.binary()),
        pa.array([r.value for r in rows], pa.binary()),
        np.array([r.offset for r in rows], dtype=np.int64),
        np.array([r.timestamp for r in rows], dtype=np.int64),
        pa.array([r.timestamp_type for r in rows], pa.int32()),
        pa.array(header_rows, HEADERS_TYPE),
        batch_cols,
    )


# --- accelerated engine --------------------------------------------------------------------

REC_MESSAGES = {
    1: "malformed varint", 2: "record length runs past the batch", 3: "invalid key length",
    4: "invalid value length", 5: "invalid header count", 6: "invalid header key length",
    7: "invalid header value length", 8: "invalid record size (body length differs from its length field)",
    9: "incorrect declared batch size, records still remaining", 10: "batch holds fewer records than it declares",
    11: "more than 2 GiB of keys or values in one decode window",
}


def _records_regions(h: HeaderArrays):
    """(codec, b_src, b_start, b_end) of the batches as they lie in the file, before decompression."""
    codec = (h.attributes & rb.COMPRESSION_CODEC_MASK).astype(np.int8)
    b_src = np.zeros(len(h), dtype=np.int8)
    b_start = h.position + rb.RECORDS_OFFSET
    b_end = h.position + h.size.astype(np.int64)
    return codec, b_src, b_start, b_end


def decode_accel(buf: np.ndarray, h: HeaderArrays, pid: TopicPartition, *, path=None, verify_crc: bool = True,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, budget: Optional[int] = None):
    """Decode a prefix of the batches ``h`` whose record data (decompressed) stays within ``budget``
    bytes (at least one batch). Returns (RecordBatch, number of batches consumed)."""
    if len(h) and (h.magic != 2).any():        # legacy data takes the reference path
        return decode_reference(buf, h, pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes,
                                budget=budget)
    budget = MAX_DECODE_BYTES if budget is None else min(budget, MAX_DECODE_BYTES)
    max_batch_bytes = min(max_batch_bytes, MAX_DECODE_BYTES)
    nb = len(h)
    codec, b_src, b_start, b_end = _records_regions(h)
    ws = WORKSPACES.acquire()
    try:
        return _decode_accel(buf, h, pid, ws, nb, codec, b_src, b_start, b_end, path=path, verify_crc=verify_crc,
                             max_batch_bytes=max_batch_bytes, budget=budget)
    finally:
        WORKSPACES.release(ws)


def _decode_accel(buf, h: HeaderArrays, pid: TopicPartition, ws: Workspace, nb: int, codec, b_src, b_start, b_end, *,
                  path, verify_crc, max_batch_bytes, budget):
    dbuf = EMPTY
    out = ws.out
    nb, at = _decompress_window(buf, h, codec, b_src, b_start, b_end, out, pid, path=path, verify_crc=verify_crc,
                                max_batch_bytes=max_batch_bytes, budget=budget)
    if nb < len(h):
        h = h.head(nb)
        codec, b_src, b_start, b_end = codec[:nb], b_src[:nb], b_start[:nb], b_end[:nb]
    if at:
        dbuf = readonly(out.array[:at])
    return _checked_records(buf, dbuf, h, pid, ws, b_src, b_start, b_end, path=path, verify_crc=verify_crc,
                            max_batch_bytes=max_batch_bytes), nb


def decode_decompressed(buf: np.ndarray, dbuf: np.ndarray, h: HeaderArrays, b_src, b_start, b_end, *, path=None,
                        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> pa.RecordBatch:
    """The records of the v2 batches ``h`` whose records regions ``decompress_batches`` located
    (``buf``/``dbuf``, b_src, b_start, b_end), as a RecordBatch: for a caller that keeps the
    decompressed bytes (the cleaner rewrites batches from them) and so decompresses once."""
    ws = WORKSPACES.acquire()
    try:
        return _checked_records(buf, dbuf, h, UNKNOWN_PARTITION, ws, b_src, b_start, b_end, path=path,
                                verify_crc=False, max_batch_bytes=max_batch_bytes)
    finally:
        WORKSPACES.release(ws)


def _checked_records(buf, dbuf, h: HeaderArrays, pid: TopicPartition, ws: Workspace, b_src, b_start, b_end, *, path,
                     verify_crc, max_batch_bytes) -> pa.RecordBatch:
    """The records of the batches ``h`` (see decode_records), once every batch's record count has been
    checked against the bytes that hold its records."""
    counts = h.recordsCount.astype(np.int64)
    # A v2 record takes at least MIN_RECORD_SIZE bytes: a larger count is a lie, and believing it
    # would allocate without bound.
    too_many = np.flatnonzero(counts > (b_end - b_start) // MIN_RECORD_SIZE)
    if len(too_many):
        b = int(too_many[0])
        if b > 0:   # an error in an earlier batch comes first, in file order
            decode_accel(buf, h.head(b), pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes)
        raise InvalidRecordError(f"batch at offset {int(h.baseOffset[b])} declares {int(counts[b])} records but its "
                                 f"{int(b_end[b] - b_start[b])} bytes of records can hold at most "
                                 f"{int((b_end[b] - b_start[b]) // MIN_RECORD_SIZE)}", path=path,
                                 position=int(h.position[b]))
    return decode_records(buf, dbuf, h, pid, ws, b_src, b_start, b_end, counts, path=path)


def decode_records(buf, dbuf, h: HeaderArrays, pid: TopicPartition, ws: Workspace, b_src, b_start, b_end, counts, *,
                    path, origin=None) -> pa.RecordBatch:
    """Walk ``counts[b]`` records of each batch b from [b_start[b], b_end[b]) of ``buf`` or ``dbuf``
    (``b_src``) into one RecordBatch. ``origin`` (default b_start) is where a batch's decompressed
    records begin, for error positions."""
    from kafkalog.format import records_accel as acc

    origin = b_start if origin is None else origin
    n = int(counts.sum())
    cap = int((b_end - b_start).sum())
    if cap > _INT32_MAX:   # only a single uncompressed batch near 2 GiB gets here
        raise InvalidRecordError(f"batch at offset {int(h.baseOffset[0])} holds {cap} bytes of records, more than "
                                 "one Arrow record batch can carry", path=path, position=int(h.position[0]),
                                 hint="split the segment with Kafka tools, or read it with a JVM reader")
    log_append = (h.attributes & rb.TIMESTAMP_TYPE_MASK) != 0
    plan = BatchColumnPlan.of(h, log_append)
    columns = carve([(n, np.int64), (n, np.int64), (n + 1, np.int32), (n + 1, np.int32)] + plan.shapes(n))
    out_offset, out_ts, key_off, val_off = columns[:4]
    key_valid, val_valid, hdr_count, hdr_pos = ws.scratch(n)
    key_data = ws.keys.reserve(cap, 0)[:cap]
    val_data = pool_empty(cap, np.uint8)
    nulls = np.zeros(3, np.int64)
    status, bad_b, bad_pos, written, nh = acc.decode_v2_kernel(
        readonly(buf), dbuf, b_src, b_start, b_end, counts, h.baseOffset, h.baseTimestamp, h.maxTimestamp,
        log_append, out_offset, out_ts, key_off, key_data, key_valid, val_off, val_data, val_valid, hdr_count, hdr_pos,
        nulls)
    if status != acc.REC_OK:
        batch_pos = int(h.position[bad_b])
        msg = REC_MESSAGES.get(status, f"record walk status {status}")
        if b_src[bad_b] == 0:
            raise InvalidRecordError(f"{msg} (batch at offset {int(h.baseOffset[bad_b])} starting at byte {batch_pos})",
                                     path=path, position=int(bad_pos))
        raise InvalidRecordError(f"{msg} (byte {int(bad_pos - origin[bad_b])} of the decompressed records of the batch)",
                                 path=path, position=batch_pos)
    kd, vd = int(key_off[n]) if n else 0, int(val_off[n]) if n else 0
    key_nulls, val_nulls, ts_nulls = (int(x) for x in nulls)
    values, keys = values_then_keys(val_data, vd, key_data, kd)
    key = binary_array(n, key_off, keys, key_valid, nulls=key_nulls)
    value = binary_array(n, val_off, values, val_valid, nulls=val_nulls)
    headers = _headers_accel(buf, dbuf, b_src, counts, hdr_count, hdr_pos, nh, cap, n)
    ts_type, batch_cols = batch_columns_accel(plan, counts, n, columns[4:])
    return assemble(n, pid, key, value, out_offset, out_ts, ts_type, headers, batch_cols, ts_nulls=ts_nulls)


def _decompress_window(buf, h: HeaderArrays, codec, b_src, b_start, b_end, out: OutputBuffer, pid, *, path,
                       verify_crc, max_batch_bytes, budget):
    """Decompress the window's compressed batches into ``out`` (uncompressed ones stay in place) up to
    ``budget`` bytes of records: one native call for runs of batches (compression_accel), the
    reference codecs for a batch it hands back. Returns (batches consumed, bytes used in out)."""
    from kafkalog.format import compression_accel as ca
    from kafkalog.format.native import ZSTD_CONTEXTS, native_functions

    native = native_functions()
    nb = len(h)
    counts = h.recordsCount
    dctx = ZSTD_CONTEXTS.acquire(native) if native.zstd_decompress_stream and (codec == ca.ZSTD).any() else 0
    zstd_fns = np.array([native.zstd_decompress_stream, native.zstd_dctx_reset, native.zstd_is_error], np.uintp)
    io = np.zeros(6, np.uint64)
    mv = memoryview(buf)
    at = total = b = 0
    try:
        while b < nb:
            status, b, at, total, need = ca.decompress_window_kernel(
                buf, codec, counts, b_start, b_end, b, budget, total, out.array, at, b_src, b_start, b_end,
                max_batch_bytes, np.uintp(native.lz4_decompress_safe), zstd_fns, np.uintp(dctx), io, native.enabled)
            if status == ca.WIN_DONE:
                break
            if status == ca.WIN_BUDGET:
                return b, at
            if status == ca.WIN_SPACE:
                out.reserve(at + need, at)
                continue
            # WIN_FALLBACK: the reference codecs decompress this batch, or raise the error that names it
            try:
                ref.check_codec(int(codec[b]), 2)
                end = decompress_into(int(codec[b]), mv[int(b_start[b]):int(b_end[b])], out, at, magic=2,
                                      max_bytes=max_batch_bytes)
            except KafkalogError as e:
                if b > 0:   # an error in an earlier batch comes first, in file order
                    decode_accel(buf, h.head(b), pid, path=path, verify_crc=verify_crc,
                                 max_batch_bytes=max_batch_bytes)
                raise e.with_location(path=path, position=int(h.position[b]))
            if b > 0 and total + end - at > budget:
                return b, at
            b_src[b], b_start[b], b_end[b] = 1, at, end
            total += end - at
            at = end
            b += 1
    finally:
        ZSTD_CONTEXTS.release(native, dctx)
    return nb, at


def decompress_batches(buf: np.ndarray, h: HeaderArrays, out: OutputBuffer, *, path=None,
                       max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, budget: Optional[int] = None):
    """The records regions of (a prefix of) the v2 batches ``h`` of ``buf``, decompressed where
    compressed into ``out``, up to ``budget`` bytes of records (at least one batch): what the
    record walks read. Returns (batches consumed, b_src, b_start, b_end, dbuf): batch b's records
    lie in ``buf`` (b_src 0) or ``dbuf`` (1) at [b_start, b_end); both arrays are read-only views."""
    budget = MAX_DECODE_BYTES if budget is None else min(budget, MAX_DECODE_BYTES)
    max_batch_bytes = min(max_batch_bytes, MAX_DECODE_BYTES)
    codec, b_src, b_start, b_end = _records_regions(h)
    nb, at = _decompress_window(buf, h, codec, b_src, b_start, b_end, out, UNKNOWN_PARTITION, path=path,
                                verify_crc=False, max_batch_bytes=max_batch_bytes, budget=budget)
    dbuf = readonly(out.array[:at]) if at else EMPTY
    return nb, b_src[:nb], b_start[:nb], b_end[:nb], dbuf


def _headers_accel(buf, dbuf, b_src, counts, hdr_count, hdr_pos, nh: int, cap: int, n: int) -> pa.Array:
    from kafkalog.format import records_accel as acc

    if nh == 0:
        return no_headers(n)
    rec_src = np.repeat(b_src, counts)
    list_off = np.empty(n + 1, np.int32)
    hk_off = np.empty(nh + 1, np.int32)
    hv_off = np.empty(nh + 1, np.int32)
    hv_valid = np.empty(nh, np.uint8)
    hk_data = np.empty(cap, np.uint8)
    hv_data = np.empty(cap, np.uint8)
    kd, vd = acc.headers_kernel(readonly(buf), dbuf, rec_src, hdr_count, hdr_pos, list_off, hk_off, hk_data,
                                hv_off, hv_data, hv_valid)
    hkeys = binary_array(nh, hk_off, hk_data[:kd], np.ones(nh, np.uint8), typ=pa.string())
    try:
        hkeys.validate(full=True)
    except pa.ArrowInvalid:
        # Kafka decodes header keys leniently (malformed UTF-8 becomes U+FFFD); so do we.
        raw = binary_array(nh, hk_off, hk_data[:kd], np.ones(nh, np.uint8))
        hkeys = pa.array([b.decode("utf-8", errors="replace") for b in raw.to_pylist()], pa.string())
    hvals = binary_array(nh, hv_off, hv_data[:vd], hv_valid)
    structs = pa.StructArray.from_arrays([hkeys, hvals], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(list_off), structs, type=HEADERS_TYPE)


def decode_window(buf, h: HeaderArrays, pid: TopicPartition, *, engine: Optional[str] = None, path=None, verify_crc: bool = True,
                  max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, budget: Optional[int] = None):
    """Decode (a prefix of) ``h``: returns (RecordBatch, number of batches consumed). ``engine``:
    ``kafkalog.engine``'s name, None for ``$KAFKALOG_ENGINE``."""
    if resolve_engine(engine) == REFERENCE:
        return decode_reference(buf, h, pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes,
                                budget=budget)
    return decode_accel(buf, h, pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes, budget=budget)
