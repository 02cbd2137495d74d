"""Record batches → Arrow: decode a window of walked batches into one ``pyarrow.RecordBatch`` of
RECORD_SCHEMA, with the reference engine or the accelerated one (same result, tests compare).

Windows keep memory bounded: a 1 GB segment is decoded as a stream of RecordBatches of at most
``window_bytes`` of (decompressed) record data each.
"""
from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import pyarrow as pa

from ..errors import InvalidRecordError, KafkalogError
from . import record_batch as rb
from . import records_reference as ref
from .compression import DEFAULT_MAX_BATCH_BYTES, OutputBuffer, decompress_into
from .file_records import HeaderArrays
from .schema import HEADER_TYPE, HEADERS_TYPE, RECORD_SCHEMA, TIMESTAMP_TYPE

_INT32_MAX = (1 << 31) - 1
MIN_RECORD_SIZE = rb.MIN_RECORD_SIZE
# Record data decoded by one call, at most: Arrow binary offsets are int32, so one RecordBatch must
# stay well below 2 GiB of keys (or values); a single larger batch cannot be split and is refused.
MAX_DECODE_BYTES = 1 << 30


@dataclass(frozen=True)
class PartitionId:
    topic: Optional[str]
    partition: Optional[int]


def _readonly(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


_EMPTY = _readonly(np.zeros(1, dtype=np.uint8))
_LOCAL = threading.local()


def _pool_empty(n: int, dtype) -> np.ndarray:
    """An uninitialised array in Arrow's memory pool (mimalloc/jemalloc): freed tables' memory is
    reused across calls and threads, where fresh numpy allocations page-fault on first touch."""
    dtype = np.dtype(dtype)
    return np.frombuffer(pa.allocate_buffer(max(n, 1) * dtype.itemsize), dtype=dtype, count=n)


def _fit(data: np.ndarray, used: int) -> np.ndarray:
    """The first ``used`` bytes, copied to a buffer of their own when they fill less than half of it:
    an Arrow slice would keep the whole upper-bound allocation alive for the table's lifetime."""
    if used >= len(data) // 2:
        return data[:used]
    fitted = _pool_empty(used, np.uint8)
    fitted[:] = data[:used]
    return fitted


def _thread_buffer() -> OutputBuffer:
    """This thread's decompression buffer, reused window after window (the kernel copies out of it)."""
    out = getattr(_LOCAL, "out", None)
    if out is None:
        out = _LOCAL.out = OutputBuffer(16 << 20)
    return out


# --- shared assembly -----------------------------------------------------------------------

def _validity(mask: np.ndarray):
    """Arrow validity bitmap from a 0/1 byte mask; None when nothing is null."""
    if mask.all():
        return None, 0
    return pa.py_buffer(np.packbits(mask.astype(np.bool_), bitorder="little")), int(len(mask) - np.count_nonzero(mask))


def _binary(n: int, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray, typ=pa.binary()) -> pa.Array:
    bitmap, nulls = _validity(valid)
    return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def _repeated_string(text: Optional[str], n: int) -> pa.Array:
    """A string column holding ``text`` n times (null when text is None), built from buffers."""
    if text is None:
        return pa.nulls(n, pa.string())
    raw = text.encode("utf-8")
    offsets = np.arange(0, (n + 1) * len(raw), len(raw) or 1, dtype=np.int32)[:n + 1] if raw else np.zeros(n + 1, np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _batch_columns(h: HeaderArrays, counts: np.ndarray) -> dict:
    """Batch-level columns repeated onto each record."""
    attrs = h.attributes.astype(np.int16)
    is_v2 = h.magic == 2
    rep = lambda a: np.repeat(a, counts)  # noqa: E731
    has_horizon = rep(is_v2 & ((attrs & rb.DELETE_HORIZON_FLAG_MASK) != 0))
    base_offset = h.baseOffset
    return {
        "lastOffset": pa.array(rep(h.lastOffset)),
        "batchPosition": pa.array(rep(h.position)),
        "magic": pa.array(rep(h.magic)),
        "codec": pa.array(rep((attrs & rb.COMPRESSION_CODEC_MASK).astype(np.int8))),
        "producerId": pa.array(rep(h.producerId)),
        "producerEpoch": pa.array(rep(h.producerEpoch)),
        "baseSequence": pa.array(rep(h.baseSequence)),
        "isTransactional": pa.array(rep(is_v2 & ((attrs & rb.TRANSACTIONAL_FLAG_MASK) != 0))),
        "isControl": pa.array(rep(is_v2 & ((attrs & rb.CONTROL_FLAG_MASK) != 0))),
        "partitionLeaderEpoch": pa.array(rep(h.partitionLeaderEpoch)),
        "deleteHorizonMs": pa.array(rep(h.baseTimestamp), mask=~has_horizon, type=pa.int64()),
        "baseOffset": pa.array(rep(base_offset)),
    }


def _assemble(n: int, pid: PartitionId, key: pa.Array, value: pa.Array, offsets: np.ndarray, ts: np.ndarray,
              ts_type: np.ndarray, headers: pa.Array, batch_cols: dict) -> pa.RecordBatch:
    ts_bitmap, ts_nulls = _validity(ts != rb.NO_TIMESTAMP)
    cols = {
        "key": key,
        "value": value,
        "topic": _repeated_string(pid.topic, n),
        "partition": (pa.array(np.full(n, pid.partition, dtype=np.int32)) if pid.partition is not None
                      else pa.nulls(n, pa.int32())),
        "offset": pa.array(offsets),
        "timestamp": pa.Array.from_buffers(TIMESTAMP_TYPE, n, [ts_bitmap, pa.py_buffer(ts)], null_count=ts_nulls),
        "timestampType": pa.array(ts_type.astype(np.int32)),
        "headers": headers,
    }
    cols.update(batch_cols)
    return pa.RecordBatch.from_arrays([cols[f.name] for f in RECORD_SCHEMA], schema=RECORD_SCHEMA)


def empty_record_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=RECORD_SCHEMA)


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
    h = h.head(nb)
    counts = counts[:nb]
    n = len(rows)
    header_rows = [[{"key": k, "value": v} for k, v in r.headers] for r in rows]
    batch_cols = _batch_columns(dataclasses.replace(h, baseOffset=base_offsets[:nb]), counts)
    batch = _assemble(
        n, pid,
        pa.array([r.key for r in rows], pa.binary()),
        pa.array([r.value for r in rows], pa.binary()),
        np.array([r.offset for r in rows], dtype=np.int64),
        np.array([r.timestamp for r in rows], dtype=np.int64),
        np.array([r.timestamp_type for r in rows], dtype=np.int32),
        pa.array(header_rows, HEADERS_TYPE),
        batch_cols,
    )
    return batch, nb


# --- accelerated engine --------------------------------------------------------------------

_REC_MESSAGES = {
    1: "malformed varint", 2: "record length runs past the batch", 3: "invalid key length",
    4: "invalid value length", 5: "invalid header count", 6: "invalid header key length",
    7: "invalid header value length", 8: "invalid record size (body length differs from its length field)",
    9: "incorrect declared batch size, records still remaining", 10: "batch holds fewer records than it declares",
    11: "more than 2 GiB of keys or values in one decode window",
}


def decode_accel(buf: np.ndarray, h: HeaderArrays, pid: PartitionId, *, path=None, verify_crc: bool = True,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, budget: Optional[int] = None):
    """Decode a prefix of the batches ``h`` whose record data (decompressed) stays within ``budget``
    bytes (at least one batch). Returns (RecordBatch, number of batches consumed)."""
    from . import records_accel as acc

    if len(h) and (h.magic != 2).any():        # legacy data takes the reference path
        return decode_reference(buf, h, pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes,
                                budget=budget)
    budget = MAX_DECODE_BYTES if budget is None else min(budget, MAX_DECODE_BYTES)
    max_batch_bytes = min(max_batch_bytes, MAX_DECODE_BYTES)
    nb = len(h)
    codec = (h.attributes & rb.COMPRESSION_CODEC_MASK).astype(np.int8)
    b_src = np.zeros(nb, dtype=np.int8)
    b_start = h.position + rb.RECORDS_OFFSET
    b_end = h.position + h.size.astype(np.int64)
    dbuf = _EMPTY
    out = _thread_buffer()
    at = 0
    total = 0
    mv = memoryview(buf)
    codecs_, starts, ends = codec.tolist(), b_start.tolist(), b_end.tolist()   # plain ints: a tight loop
    empty = h.recordsCount.tolist()
    for b in range(nb):
        c = codecs_[b]
        if empty[b] == 0:
            # Kafka never reads the payload of a batch that declares no records (DefaultRecordBatch.iterator)
            b_start[b] = b_end[b] = 0
            continue
        if c == 0:
            if b > 0 and total + ends[b] - starts[b] > budget:
                nb = b
                break
            total += ends[b] - starts[b]
            continue
        pos = int(h.position[b])
        try:
            ref.check_codec(c, 2)
            end = decompress_into(c, mv[starts[b]:ends[b]], out, at, magic=2, max_bytes=max_batch_bytes)
        except KafkalogError as e:
            if b > 0:   # an error in an earlier batch comes first, in file order
                decode_accel(buf, h.head(b), pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes)
            raise e.with_location(path=path, position=pos)
        if b > 0 and total + end - at > budget:
            nb = b
            break
        b_src[b] = 1
        b_start[b] = at
        b_end[b] = end
        total += end - at
        at = end
    if nb < len(h):
        h = h.head(nb)
        codec, b_src, b_start, b_end = codec[:nb], b_src[:nb], b_start[:nb], b_end[:nb]
    if at:
        dbuf = _readonly(out.array[:at])
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
    n = int(counts.sum())
    cap = int((b_end - b_start).sum())
    if cap > _INT32_MAX:   # only a single uncompressed batch near 2 GiB gets here
        raise InvalidRecordError(f"batch at offset {int(h.baseOffset[0])} holds {cap} bytes of records, more than "
                                 "one Arrow record batch can carry", path=path, position=int(h.position[0]),
                                 hint="split the segment with Kafka tools, or read it with a JVM reader")
    out_offset = _pool_empty(n, np.int64)
    out_ts = _pool_empty(n, np.int64)
    key_off = _pool_empty(n + 1, np.int32)
    val_off = _pool_empty(n + 1, np.int32)
    key_valid = np.empty(n, np.uint8)
    val_valid = np.empty(n, np.uint8)
    hdr_count = np.empty(n, np.int32)
    hdr_pos = np.empty(n, np.int64)
    key_data = _pool_empty(cap, np.uint8)
    val_data = _pool_empty(cap, np.uint8)
    log_append = (h.attributes & rb.TIMESTAMP_TYPE_MASK) != 0
    status, bad_b, bad_pos, written, nh = acc.decode_v2_kernel(
        _readonly(buf), dbuf, b_src, b_start, b_end, counts, h.baseOffset, h.baseTimestamp, h.maxTimestamp,
        log_append, out_offset, out_ts, key_off, key_data, key_valid, val_off, val_data, val_valid, hdr_count, hdr_pos)
    if status != acc.REC_OK:
        batch_pos = int(h.position[bad_b])
        msg = _REC_MESSAGES.get(status, f"record walk status {status}")
        if b_src[bad_b] == 0:
            raise InvalidRecordError(f"{msg} (batch at offset {int(h.baseOffset[bad_b])} starting at byte {batch_pos})",
                                     path=path, position=int(bad_pos))
        raise InvalidRecordError(f"{msg} (byte {int(bad_pos - b_start[bad_b])} of the decompressed records of the batch)",
                                 path=path, position=batch_pos)
    kd, vd = int(key_off[n]) if n else 0, int(val_off[n]) if n else 0
    key = _binary(n, key_off, _fit(key_data, kd), key_valid)
    value = _binary(n, val_off, _fit(val_data, vd), val_valid)
    headers = _headers_accel(buf, dbuf, b_src, counts, hdr_count, hdr_pos, nh, cap, n)
    ts_type = np.repeat(log_append.astype(np.int32), counts)
    return _assemble(n, pid, key, value, out_offset, out_ts, ts_type, headers, _batch_columns(h, counts)), nb


def _headers_accel(buf, dbuf, b_src, counts, hdr_count, hdr_pos, nh: int, cap: int, n: int) -> pa.Array:
    from . import records_accel as acc

    if nh == 0:
        empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                           fields=list(HEADER_TYPE))
        return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), empty, type=HEADERS_TYPE)
    rec_src = np.repeat(b_src, counts)
    list_off = np.empty(n + 1, np.int32)
    hk_off = np.empty(nh + 1, np.int32)
    hv_off = np.empty(nh + 1, np.int32)
    hv_valid = np.empty(nh, np.uint8)
    hk_data = np.empty(cap, np.uint8)
    hv_data = np.empty(cap, np.uint8)
    kd, vd = acc.headers_kernel(_readonly(buf), dbuf, rec_src, hdr_count, hdr_pos, list_off, hk_off, hk_data,
                                hv_off, hv_data, hv_valid)
    hkeys = _binary(nh, hk_off, hk_data[:kd], np.ones(nh, np.uint8), typ=pa.string())
    try:
        hkeys.validate(full=True)
    except pa.ArrowInvalid:
        # Kafka decodes header keys leniently (malformed UTF-8 becomes U+FFFD); so do we.
        raw = _binary(nh, hk_off, hk_data[:kd], np.ones(nh, np.uint8))
        hkeys = pa.array([b.decode("utf-8", errors="replace") for b in raw.to_pylist()], pa.string())
    hvals = _binary(nh, hv_off, hv_data[:vd], hv_valid)
    structs = pa.StructArray.from_arrays([hkeys, hvals], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(list_off), structs, type=HEADERS_TYPE)


def decode_window(buf, h: HeaderArrays, pid: PartitionId, *, engine: str, path=None, verify_crc: bool = True,
                  max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, budget: Optional[int] = None):
    """Decode (a prefix of) ``h``: returns (RecordBatch, number of batches consumed)."""
    if engine == "python":
        return decode_reference(buf, h, pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes,
                                budget=budget)
    return decode_accel(buf, h, pid, path=path, verify_crc=verify_crc, max_batch_bytes=max_batch_bytes, budget=budget)
