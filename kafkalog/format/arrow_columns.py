"""The Arrow side of decoding records: the buffers a decode call works in (pooled, carved, kept across
calls), columns that repeat one value (shared, read-only), the batch-level columns repeated onto each
record, and assembling one ``RecordBatch`` of RECORD_SCHEMA. Both decoding engines build on it."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import pyarrow as pa

from kafkalog.format import record_batch as rb
from kafkalog.format.buffer_pool import OUTPUT_POOL
from kafkalog.format.compression import OutputBuffer
from kafkalog.format.file_records import HeaderArrays
from kafkalog.format.schema import HEADER_TYPE, HEADERS_TYPE, RECORD_SCHEMA, TIMESTAMP_TYPE


# --- data structures and buffers -----------------------------------------------------------

@dataclass(frozen=True)
class PartitionId:
    topic: Optional[str]
    partition: Optional[int]


def readonly(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


EMPTY_BYTES = readonly(np.zeros(1, dtype=np.uint8))


def pool_empty(n: int, dtype) -> np.ndarray:
    """An uninitialised array from the output BufferPool (large) or Arrow's pool (small): freed
    tables' memory is reused across calls and threads, where fresh allocations page-fault."""
    dtype = np.dtype(dtype)
    return np.frombuffer(OUTPUT_POOL.allocate(max(n, 1) * dtype.itemsize), dtype=dtype, count=n)


def fit_to_size(data: np.ndarray, used: int) -> np.ndarray:
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
    data = fit_to_size(data, vd + kd)
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


# --- shared assembly -----------------------------------------------------------------------

def validity_bitmap(mask: np.ndarray, nulls: Optional[int] = None):
    """Arrow validity bitmap from a 0/1 byte mask; None when nothing is null (``nulls``, when the
    caller counted them, saves a pass over the mask)."""
    if nulls == 0 or (nulls is None and mask.all()):
        return None, 0
    return pa.py_buffer(np.packbits(mask.astype(np.bool_), bitorder="little")), int(len(mask) - np.count_nonzero(mask))


def binary_array(n: int, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray, typ=pa.binary(),
            nulls: Optional[int] = None) -> pa.Array:
    bitmap, nulls = validity_bitmap(valid, nulls)
    return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


class Repeats:
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
                if self._bytes + nbytes(grown) > self.KEEP_BYTES:
                    self._arrays.clear()
                    self._bytes = 0
                old = self._arrays.get(key)
                self._bytes += nbytes(grown) - (nbytes(old) if old is not None else 0)
                self._arrays[key] = grown
            have = grown
        return have

    def get(self, key, n: int, make) -> np.ndarray:
        """The first n items of a read-only numpy array made by ``make(length)``."""
        return self._cached(key, n, lambda m: readonly(make(m)), lambda a: a.nbytes)[:n]

    def column(self, key, n: int, make) -> pa.Array:
        """The first n rows of an Arrow array made by ``make(length)`` (a slice costs ~1 µs, where
        building the array again from its buffers costs 10–60 µs, per column and window)."""
        return self._cached(("column",) + key, n, make, lambda a: a.get_total_buffer_size()).slice(0, n)


REPEATS = Repeats()
_NO_HEADERS = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
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


def repeated_column(value, dtype, n: int) -> pa.Array:
    """A column holding ``value`` n times (null when value is None), from a shared read-only buffer."""
    dtype = np.dtype(dtype)
    if value is None:
        return pa.nulls(n, pa.from_numpy_dtype(dtype))
    return REPEATS.column((dtype.str, int(value)), n, lambda m: pa.array(np.full(m, value, dtype)))


def no_headers_column(n: int) -> pa.Array:
    """A headers column of n empty lists."""
    return REPEATS.column(("no-headers",), n, lambda m: pa.ListArray.from_arrays(
        pa.array(np.zeros(m + 1, np.int32)), _NO_HEADERS, type=HEADERS_TYPE))


def null_int64_column(n: int) -> pa.Array:
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


def assemble_batch(n: int, pid: PartitionId, key: pa.Array, value: pa.Array, offsets: np.ndarray, ts: np.ndarray,
              ts_type: pa.Array, headers: pa.Array, batch_cols: dict, *,
              ts_nulls: Optional[int] = None) -> pa.RecordBatch:
    ts_bitmap, ts_nulls = validity_bitmap(ts != rb.NO_TIMESTAMP) if ts_nulls != 0 else (None, 0)
    cols = {
        "key": key,
        "value": value,
        "topic": repeated_string(pid.topic, n),
        "partition": repeated_column(pid.partition, np.int32, n),
        "offset": pa.array(offsets),
        "timestamp": pa.Array.from_buffers(TIMESTAMP_TYPE, n, [ts_bitmap, pa.py_buffer(ts)], null_count=ts_nulls),
        "timestampType": ts_type,
        "headers": headers,
    }
    cols.update(batch_cols)
    return pa.RecordBatch.from_arrays([cols[f.name] for f in RECORD_SCHEMA], schema=RECORD_SCHEMA)
