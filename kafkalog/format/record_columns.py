"""The Arrow side of decoding: pooled buffers, shared constant columns, and RECORD_SCHEMA record batches
assembled from per-record arrays (both engines of ``kafkalog.format.decoder`` build their output here)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import pyarrow as pa

from kafkalog.format import record_batch as rb
from kafkalog.format.buffer_pool import OUTPUT_POOL
from kafkalog.format.file_records import HeaderArrays
from kafkalog.format.schema import HEADER_TYPE, HEADERS_TYPE, RECORD_SCHEMA, TIMESTAMP_TYPE

from kafkalog.topic_partition import TopicPartition


# --- pooled buffers ------------------------------------------------------------------------

def readonly(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


EMPTY = readonly(np.zeros(1, dtype=np.uint8))


def pool_empty(n: int, dtype) -> np.ndarray:
    """An uninitialised array from the output BufferPool (large) or Arrow's pool (small): freed
    tables' memory is reused across calls and threads, where fresh allocations page-fault."""
    dtype = np.dtype(dtype)
    return np.frombuffer(OUTPUT_POOL.allocate(max(n, 1) * dtype.itemsize), dtype=dtype, count=n)


def fit(data: np.ndarray, used: int) -> np.ndarray:
    """The first ``used`` bytes, copied to a buffer of their own when they fill less than half of it:
    an Arrow slice would keep the whole upper-bound allocation alive for the table's lifetime."""
    if used >= len(data) // 2:
        return data[:used]
    fitted = pool_empty(used, np.uint8)
    fitted[:] = data[:used]
    return fitted


def values_then_keys(data: np.ndarray, vd: int, keys: np.ndarray, kd: int):
    """Key bytes (walked into the workspace) appended after the value bytes in ``data``, which has
    room for both: a record's key and value are disjoint parts of its bytes, and ``data`` holds as
    many bytes as the records. One allocation per window instead of two upper-bound ones.
    Returns (value bytes, key bytes), views of one buffer."""
    data[vd:vd + kd] = keys[:kd]
    data = fit(data, vd + kd)
    return data[:vd], data[vd:vd + kd]


def carve(shapes) -> List[np.ndarray]:
    """Arrays of the given (count, dtype) shapes carved from one pooled allocation, 64-byte aligned:
    an allocation that is kept costs ~0.1 ms whatever its size, and a window needs ~20 columns."""
    offsets = []
    total = 0
    for count, dtype in shapes:
        offsets.append(total)
        total += (count * np.dtype(dtype).itemsize + 63) & ~63
    block = OUTPUT_POOL.allocate(max(total, 1))
    return [np.frombuffer(block, dtype=dtype, count=count, offset=off) for (count, dtype), off in zip(shapes, offsets)]


# --- columns ------------------------------------------------------------------------------


def validity(mask: np.ndarray, nulls: Optional[int] = None):
    """Arrow validity bitmap from a 0/1 byte mask; None when nothing is null (``nulls``, when the
    caller counted them, saves a pass over the mask)."""
    if nulls == 0 or (nulls is None and mask.all()):
        return None, 0
    return pa.py_buffer(np.packbits(mask.astype(np.bool_), bitorder="little")), int(len(mask) - np.count_nonzero(mask))


def binary_array(n: int, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray, typ=pa.binary(),
            nulls: Optional[int] = None) -> pa.Array:
    bitmap, nulls = validity(valid, nulls)
    return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


class RepeatedColumns:
    """Read-only buffers that repeat one value (a topic name's offsets and bytes, a partition number,
    zero and one bits), kept per value at the largest length asked for and shared by prefix: every
    window of a partition carries the same topic and partition columns, and most windows' flag
    columns are all false, so they need no new memory each time."""

    KEEP_BYTES = 64 << 20    # past this the cache starts over (arrays in use stay with their tables)

    def __init__(self):
        self._arrays: dict = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def _cached(self, key, n: int, make, nbytes):
        with self._lock:
            have = self._arrays.get(key)
        if have is None or len(have) < n:
            grown = make(max(n, 2 * len(have) if have is not None else n, 1024))
            with self._lock:
                current = self._arrays.get(key)
                if current is not None and len(current) >= n:
                    return current      # another decode thread made it meanwhile: share that one
                if self._bytes + nbytes(grown) > self.KEEP_BYTES:
                    self._arrays.clear()
                    self._bytes = 0
                old = self._arrays.get(key)
                self._bytes += nbytes(grown) - (nbytes(old) if old is not None else 0)
                self._arrays[key] = grown
            have = grown
        return have

    def clear(self) -> None:
        """Start over (what happens by itself past KEEP_BYTES); arrays in use stay with their tables."""
        with self._lock:
            self._arrays.clear()
            self._bytes = 0

    def get(self, key, n: int, make) -> np.ndarray:
        """The first n items of a read-only numpy array made by ``make(length)``."""
        return self._cached(key, n, lambda m: readonly(make(m)), lambda a: a.nbytes)[:n]

    def column(self, key, n: int, make) -> pa.Array:
        """The first n rows of an Arrow array made by ``make(length)`` (a slice costs ~1 µs, where
        building the array again from its buffers costs 10–60 µs, per column and window)."""
        return self._cached(("column",) + key, n, make, lambda a: a.get_total_buffer_size()).slice(0, n)


REPEATS = RepeatedColumns()
NO_HEADERS = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                         fields=list(HEADER_TYPE))


def repeated_string(text: Optional[str], n: int) -> pa.Array:
    """A string column holding ``text`` n times (null when text is None), built from shared buffers."""
    if text is None:
        return pa.nulls(n, pa.string())
    raw = text.encode("utf-8")

    def make(m):
        offsets = np.arange(m + 1, dtype=np.int32) * np.int32(len(raw))
        return pa.Array.from_buffers(pa.string(), m, [None, pa.py_buffer(offsets), pa.py_buffer(raw * m)])
    return REPEATS.column(("string", raw), n, make)


def repeated(value, dtype, n: int) -> pa.Array:
    """A column holding ``value`` n times (null when value is None), from a shared read-only buffer."""
    dtype = np.dtype(dtype)
    if value is None:
        return pa.nulls(n, pa.from_numpy_dtype(dtype))
    return REPEATS.column((dtype.str, int(value)), n, lambda m: pa.array(np.full(m, value, dtype)))


def no_headers(n: int) -> pa.Array:
    """A headers column of n empty lists."""
    return REPEATS.column(("no-headers",), n, lambda m: pa.ListArray.from_arrays(
        pa.array(np.zeros(m + 1, np.int32)), NO_HEADERS, type=HEADERS_TYPE))


def null_int64(n: int) -> pa.Array:
    return REPEATS.column(("null-int64",), n, lambda m: pa.Array.from_buffers(
        pa.int64(), m, [repeated_bits(False, m), pa.py_buffer(np.zeros(m, np.int64))], null_count=m))


def repeated_bits(bit: bool, n: int) -> pa.Buffer:
    """A bitmap of n bits, all ``bit``."""
    return pa.py_buffer(REPEATS.get(("bits", bool(bit)), (n + 7) // 8,
                                     lambda m: np.full(m, 0xFF if bit else 0, np.uint8)))


def batch_columns(h: HeaderArrays, counts: np.ndarray) -> dict:
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


def assemble(n: int, pid: TopicPartition, key: pa.Array, value: pa.Array, offsets: np.ndarray, ts: np.ndarray,
              ts_type: pa.Array, headers: pa.Array, batch_cols: dict, *,
              ts_nulls: Optional[int] = None) -> pa.RecordBatch:
    ts_bitmap, ts_nulls = validity(ts != rb.NO_TIMESTAMP) if ts_nulls != 0 else (None, 0)
    cols = {
        "key": key,
        "value": value,
        "topic": repeated_string(pid.topic, n),
        "partition": repeated(pid.partition, np.int32, n),
        "offset": pa.array(offsets),
        "timestamp": pa.Array.from_buffers(TIMESTAMP_TYPE, n, [ts_bitmap, pa.py_buffer(ts)], null_count=ts_nulls),
        "timestampType": ts_type,
        "headers": headers,
    }
    cols.update(batch_cols)
    return pa.RecordBatch.from_arrays([cols[f.name] for f in RECORD_SCHEMA], schema=RECORD_SCHEMA)


def flag_column(flags: np.ndarray, counts: np.ndarray, n: int) -> pa.Array:
    """A bool column repeating a per-batch flag: a shared constant bitmap when every batch agrees."""
    every = bool(len(flags)) and bool(flags.all())
    if every or not flags.any():
        return REPEATS.column(("bool", every), n,
                               lambda m: pa.Array.from_buffers(pa.bool_(), m, [None, repeated_bits(every, m)]))
    return pa.array(np.repeat(flags, counts))


@dataclass
class BatchColumnPlan:
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
    def of(cls, h: HeaderArrays, log_append: np.ndarray) -> "BatchColumnPlan":
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


def batch_columns_accel(plan: BatchColumnPlan, counts: np.ndarray, n: int, carved: list):
    """The accelerated twin of batch_columns (plus timestampType): one kernel fills the columns the
    plan repeats per record, into ``carved`` (shaped by plan.shapes); the others share a constant."""
    from kafkalog.format import records_accel as acc

    parts = iter(carved)
    outs = [next(parts) if f else np.empty(0, d) for d, f in zip(plan.DTYPES, plan.fill)]
    if any(plan.fill):
        acc.batch_columns_kernel(counts, *plan.sources, *outs)
    cols = {}
    for name, dtype, src, f, out in zip(plan.NAMES, plan.DTYPES, plan.sources, plan.fill, outs):
        cols[name] = pa.array(out) if f else repeated(src[0] if len(src) else 0, dtype, n)
    if not plan.has_horizon.any():
        cols["deleteHorizonMs"] = null_int64(n)
    elif not plan.has_horizon.all():
        cols["deleteHorizonMs"] = pa.array(cols["deleteHorizonMs"].to_numpy(zero_copy_only=True),
                                           mask=~np.repeat(plan.has_horizon, counts), type=pa.int64())
    cols["isTransactional"] = flag_column((plan.attrs & rb.TRANSACTIONAL_FLAG_MASK) != 0, counts, n)
    cols["isControl"] = flag_column((plan.attrs & rb.CONTROL_FLAG_MASK) != 0, counts, n)
    return cols.pop("timestampType"), cols
