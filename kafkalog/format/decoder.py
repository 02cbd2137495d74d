"""Record batches → Arrow: decode a window of walked batches into one ``pyarrow.RecordBatch`` of
RECORD_SCHEMA, with the reference engine or the accelerated one (same result, tests compare); the
columns are built in ``arrow_columns``.

Windows keep memory bounded: a 1 GB segment is decoded as a stream of RecordBatches of at most
``window_bytes`` of (decompressed) record data each.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, List, Optional

import numpy as np
import pyarrow as pa

from kafkalog.errors import InvalidRecordError, KafkalogError
from kafkalog.format import record_batch as rb
from kafkalog.format import records_reference as ref
from kafkalog.format.arrow_columns import (EMPTY_BYTES, REPEATS, WORKSPACES, PartitionId, Workspace, assemble_batch,
                                           batch_columns, binary_array, carve, no_headers_column, null_int64_column,
                                           pool_empty, readonly, repeated_bits, repeated_column, values_then_keys)
from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES, OutputBuffer, decompress_into
from kafkalog.format.file_records import HeaderArrays
from kafkalog.format.schema import HEADER_TYPE, HEADERS_TYPE
from kafkalog.format.varint import INT32_MAX

MIN_RECORD_SIZE = rb.MIN_RECORD_SIZE
# Record data decoded by one call, at most: Arrow binary offsets are int32, so one RecordBatch must
# stay well below 2 GiB of keys (or values); a single larger batch cannot be split and is refused.
MAX_DECODE_BYTES = 1 << 30


# --- reference engine ----------------------------------------------------------------------

def decode_reference(buf, h: HeaderArrays, pid: PartitionId, *, path=None, verify_crc: bool = True,
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
    return _rows_batch(rows, h.head(nb), counts[:nb], base_offsets[:nb], pid), nb


def _rows_batch(rows: List[ref.RecordRow], h: HeaderArrays, counts: np.ndarray, base_offsets: np.ndarray,
                pid: PartitionId) -> pa.RecordBatch:
    """The reference engine's rows as a RecordBatch: ``counts[b]`` rows come from batch b of ``h``."""
    n = len(rows)
    header_rows = [[{"key": k, "value": v} for k, v in r.headers] for r in rows]
    batch_cols = batch_columns(dataclasses.replace(h, baseOffset=base_offsets), counts)
    return assemble_batch(
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

_REC_MESSAGES = {
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


def decode_accel(buf: np.ndarray, h: HeaderArrays, pid: PartitionId, *, path=None, verify_crc: bool = True,
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


def _decode_accel(buf, h: HeaderArrays, pid: PartitionId, ws: Workspace, nb: int, codec, b_src, b_start, b_end, *,
                  path, verify_crc, max_batch_bytes, budget):
    dbuf = EMPTY_BYTES
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
        return _checked_records(buf, dbuf, h, PartitionId(None, None), ws, b_src, b_start, b_end, path=path,
                                verify_crc=False, max_batch_bytes=max_batch_bytes)
    finally:
        WORKSPACES.release(ws)


def _checked_records(buf, dbuf, h: HeaderArrays, pid: PartitionId, ws: Workspace, b_src, b_start, b_end, *, path,
                     verify_crc, max_batch_bytes) -> pa.RecordBatch:
    """The records of the batches ``h`` (see _decode_records), once every batch's record count has been
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
    return _decode_records(buf, dbuf, h, pid, ws, b_src, b_start, b_end, counts, path=path)


def _decode_records(buf, dbuf, h: HeaderArrays, pid: PartitionId, ws: Workspace, b_src, b_start, b_end, counts, *,
                    path, origin=None) -> pa.RecordBatch:
    """Walk ``counts[b]`` records of each batch b from [b_start[b], b_end[b]) of ``buf`` or ``dbuf``
    (``b_src``) into one RecordBatch. ``origin`` (default b_start) is where a batch's decompressed
    records begin, for error positions."""
    from kafkalog.format import records_accel as acc

    origin = b_start if origin is None else origin
    n = int(counts.sum())
    cap = int((b_end - b_start).sum())
    if cap > INT32_MAX:   # only a single uncompressed batch near 2 GiB gets here
        raise InvalidRecordError(f"batch at offset {int(h.baseOffset[0])} holds {cap} bytes of records, more than "
                                 "one Arrow record batch can carry", path=path, position=int(h.position[0]),
                                 hint="split the segment with Kafka tools, or read it with a JVM reader")
    log_append = (h.attributes & rb.TIMESTAMP_TYPE_MASK) != 0
    plan = _BatchColumnPlan.of(h, log_append)
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
        msg = _REC_MESSAGES.get(status, f"record walk status {status}")
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
    ts_type, batch_cols = _batch_columns_accel(plan, counts, n, columns[4:])
    return assemble_batch(n, pid, key, value, out_offset, out_ts, ts_type, headers, batch_cols, ts_nulls=ts_nulls)


def _flag_column(flags: np.ndarray, counts: np.ndarray, n: int) -> pa.Array:
    """A bool column repeating a per-batch flag: a shared constant bitmap when every batch agrees."""
    every = bool(len(flags)) and bool(flags.all())
    if every or not flags.any():
        return REPEATS.column(("bool", every), n,
                               lambda m: pa.Array.from_buffers(pa.bool_(), m, [None, repeated_bits(every, m)]))
    return pa.array(np.repeat(flags, counts))


@dataclass
class _BatchColumnPlan:
    """Which batch-level columns a window repeats per record (``fill``, in batch_columns_kernel's
    argument order) and which hold one value for the whole window: those share a constant buffer
    instead of writing 1–8 bytes per record. Most windows have one magic, codec, producer (or none),
    leader epoch and timestamp type, and no delete horizon."""
    sources: list                 # per-batch arrays, kernel order
    fill: List[bool]
    attrs: np.ndarray             # per batch
    has_horizon: np.ndarray       # per batch

    # kernel order: 5 × int64, 3 × int32, int16, 2 × int8
    NAMES = ("baseOffset", "lastOffset", "batchPosition", "deleteHorizonMs", "producerId", "baseSequence",
             "partitionLeaderEpoch", "timestampType", "producerEpoch", "magic", "codec")
    DTYPES = (np.int64,) * 5 + (np.int32,) * 3 + (np.int16, np.int8, np.int8)

    @classmethod
    def of(cls, h: HeaderArrays, log_append: np.ndarray) -> "_BatchColumnPlan":
        attrs = h.attributes.astype(np.int16)
        has_horizon = (attrs & rb.DELETE_HORIZON_FLAG_MASK) != 0      # every batch here is v2
        sources = [h.baseOffset, h.lastOffset, h.position, h.baseTimestamp, h.producerId, h.baseSequence,
                   h.partitionLeaderEpoch, log_append.astype(np.int32), h.producerEpoch, h.magic,
                   (attrs & rb.COMPRESSION_CODEC_MASK).astype(np.int8)]
        # Offsets and positions are each batch's own: a shared buffer would never be reused.
        fill = [i < 3 or (len(a) > 1 and bool(a.min() != a.max())) for i, a in enumerate(sources)]
        fill[3] = fill[3] and bool(has_horizon.any())     # no horizon anywhere: a null column
        return cls(sources, fill, attrs, has_horizon)

    def shapes(self, n: int) -> list:
        """What batch_columns_kernel fills, for carve."""
        return [(n, d) for d, f in zip(self.DTYPES, self.fill) if f]


def _batch_columns_accel(plan: _BatchColumnPlan, counts: np.ndarray, n: int, carved: list):
    """The accelerated twin of batch_columns (plus timestampType): one kernel fills the columns the
    plan repeats per record, into ``carved`` (shaped by plan.shapes); the others share a constant."""
    from kafkalog.format import records_accel as acc

    carved = iter(carved)
    outs = [next(carved) if f else np.empty(0, d) for d, f in zip(plan.DTYPES, plan.fill)]
    if any(plan.fill):
        acc.batch_columns_kernel(counts, *plan.sources, *outs)
    cols = {}
    for name, dtype, src, f, out in zip(plan.NAMES, plan.DTYPES, plan.sources, plan.fill, outs):
        cols[name] = pa.array(out) if f else repeated_column(src[0] if len(src) else 0, dtype, n)
    if not plan.has_horizon.any():
        cols["deleteHorizonMs"] = null_int64_column(n)
    elif not plan.has_horizon.all():
        cols["deleteHorizonMs"] = pa.array(cols["deleteHorizonMs"].to_numpy(zero_copy_only=True),
                                           mask=~np.repeat(plan.has_horizon, counts), type=pa.int64())
    cols["isTransactional"] = _flag_column((plan.attrs & rb.TRANSACTIONAL_FLAG_MASK) != 0, counts, n)
    cols["isControl"] = _flag_column((plan.attrs & rb.CONTROL_FLAG_MASK) != 0, counts, n)
    return cols.pop("timestampType"), cols


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
    nb, at = _decompress_window(buf, h, codec, b_src, b_start, b_end, out, PartitionId(None, None), path=path,
                                verify_crc=False, max_batch_bytes=max_batch_bytes, budget=budget)
    dbuf = readonly(out.array[:at]) if at else EMPTY_BYTES
    return nb, b_src[:nb], b_start[:nb], b_end[:nb], dbuf


def _headers_accel(buf, dbuf, b_src, counts, hdr_count, hdr_pos, nh: int, cap: int, n: int) -> pa.Array:
    from kafkalog.format import records_accel as acc

    if nh == 0:
        return no_headers_column(n)
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


def decode_window(buf, h: HeaderArrays, pid: PartitionId, *, engine: str, path=None, verify_crc: bool = True,
                  max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, budget: Optional[int] = None):
    """Decode (a prefix of) ``h``: returns (RecordBatch, number of batches consumed)."""
    if engine == "python":
        return decode_reference(buf, h, pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes,
                                budget=budget)
    return decode_accel(buf, h, pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes, budget=budget)


# --- one huge batch, in slices ----------------------------------------------------------------

# A v2 batch declaring more records than this is decoded in slices of at most this many rows, so
# the output of one batch is bounded whatever its record count (a 250 MiB zstd payload can hold 37
# million minimal records: ~2 GB of Arrow columns as one RecordBatch).
SLICE_RECORDS = 1 << 20


def needs_slicing(h: HeaderArrays, rows: int = SLICE_RECORDS) -> np.ndarray:
    """Indexes of the batches of ``h`` decoded in slices (v2, more than ``rows`` records)."""
    return np.flatnonzero((h.magic == 2) & (h.recordsCount > rows))


class BatchSlices:
    """One v2 batch (``h1``, a single row) decoded as RecordBatches of at most ``rows`` rows each.

    Construction decompresses the payload once (bounded by max_batch_bytes) and walks the record
    lengths; :meth:`validate` decodes every slice and drops it, so an error anywhere in the batch is
    raised before any row of it is delivered (a batch is all or nothing, as in a window); iterating
    then yields the slices. Memory: the payload plus one slice. :meth:`close` frees the payload."""

    def __init__(self, buf, h1: HeaderArrays, pid: PartitionId, *, engine: str, path=None,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, rows: int = SLICE_RECORDS):
        self.h1, self.pid, self.engine, self.path, self.rows = h1, pid, engine, path, rows
        self.buf = buf
        self.count = int(h1.recordsCount[0])
        self.position = int(h1.position[0])
        codec = int(h1.attributes[0]) & rb.COMPRESSION_CODEC_MASK
        start = self.position + rb.RECORDS_OFFSET
        end = self.position + int(h1.size[0])
        ref.check_codec(codec, 2, path=path, position=self.position)
        self._out = OutputBuffer(1 << 20)
        if codec == 0:
            self.src, self.start, self.end, self.compressed = buf, start, end, False
        else:
            try:
                used = decompress_into(codec, memoryview(buf)[start:end], self._out, 0, magic=2,
                                       max_bytes=min(max_batch_bytes, MAX_DECODE_BYTES))
            except KafkalogError as e:
                raise e.with_location(path=path, position=self.position)
            self.src, self.start, self.end, self.compressed = readonly(self._out.array[:used]), 0, used, True
        if self.count > (self.end - self.start) // MIN_RECORD_SIZE:
            raise InvalidRecordError(f"batch at offset {int(h1.baseOffset[0])} declares {self.count} records but its "
                                     f"{self.end - self.start} bytes of records can hold at most "
                                     f"{(self.end - self.start) // MIN_RECORD_SIZE}", path=path,
                                     position=self.position)
        self.bounds = self._bounds()

    def _bounds(self) -> np.ndarray:
        from kafkalog.format import records_accel as acc

        bounds = np.empty(self.count // self.rows + 2, np.int64)
        status, pos, k = acc.record_bounds_kernel(self.src, self.start, self.end, self.count, self.rows, bounds)
        if status != acc.REC_OK:
            msg = _REC_MESSAGES.get(status, f"record walk status {status}")
            if self.compressed:
                raise InvalidRecordError(f"{msg} (byte {int(pos)} of the decompressed records of the batch)",
                                         path=self.path, position=self.position)
            raise InvalidRecordError(f"{msg} (batch at offset {int(self.h1.baseOffset[0])} starting at byte "
                                     f"{self.position})", path=self.path, position=int(pos))
        return bounds[:k]

    def _slice(self, j: int) -> pa.RecordBatch:
        lo, hi = int(self.bounds[j]), int(self.bounds[j + 1])
        m = min(self.rows, self.count - j * self.rows)
        if self.engine == "python":
            header = rb.parse_header(self.buf, self.position)
            try:
                rows = ref.v2_records(memoryview(self.src)[lo:hi], dataclasses.replace(header, records_count=m))
            except InvalidRecordError as e:
                e.message += f" (byte {e.position + lo - self.start} of the records of the batch)"
                e.position = None
                raise e.with_location(path=self.path, position=self.position)
            return _rows_batch(rows, self.h1, np.array([m], np.int64), self.h1.baseOffset, self.pid)
        ws = WORKSPACES.acquire()
        try:
            src = np.array([1 if self.compressed else 0], np.int8)
            return _decode_records(self.buf, self.src if self.compressed else EMPTY_BYTES, self.h1, self.pid, ws, src,
                                   np.array([lo], np.int64), np.array([hi], np.int64), np.array([m], np.int64),
                                   path=self.path, origin=np.array([self.start], np.int64))
        finally:
            WORKSPACES.release(ws)

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def validate(self) -> None:
        for j in range(len(self)):
            self._slice(j)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            for j in range(len(self)):
                yield self._slice(j)
        finally:
            self.close()

    def close(self) -> None:
        self._out.release()
        self.src = EMPTY_BYTES
