"""Build a segment's indexes the way the broker does: ``build_indexes`` is segment recovery's
rebuild (``LogSegment.recover``), ``IndexAppender`` is ``LogSegment.append``'s bookkeeping, and
``build_transaction_index`` replays producer state to find the aborted transactions.

All three work on per-batch values (positions, sizes, offsets, timestamps, producer fields), not on bytes,
so they do not depend on how the batches were read. Rules: Kafka's ``LogSegment.append``,
``LogSegment.recover``, ``LogSegment.onBecomeInactiveSegment`` and ``TransactionIndex.java``.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from kafkalog.engine import is_reference
from kafkalog.errors import CorruptIndexError, OffsetOverflowError
from kafkalog.format.control_record import ABORT, COMMIT
from kafkalog.format.record_batch import NO_TIMESTAMP
from kafkalog.java_types import INT32_MAX
from kafkalog.index.offset_index import OFFSET_ENTRY_SIZE, OffsetIndex
from kafkalog.index.time_index import TIME_ENTRY_SIZE, TimeIndex
from kafkalog.index.transaction_index import TXN_ENTRY_SIZE, AbortedTxn, TransactionIndex

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

#: ``index.interval.bytes`` default.
DEFAULT_INDEX_INTERVAL_BYTES = 4096

#: Column names ``build_transaction_index`` reads (snake_case first, then the Arrow batch
#: table's camelCase spelling).
TXN_BATCH_COLUMNS: Dict[str, Tuple[str, ...]] = {
    "base_offset": ("base_offset", "baseOffset"),
    "producer_id": ("producer_id", "producerId"),
    "is_transactional": ("is_transactional", "isTransactional"),
    "is_control": ("is_control", "isControl"),
    "control_type": ("control_type", "controlType"),
}


@dataclass(frozen=True)
class _BuildError:
    """The first failure found while replaying recovery, ordered as Kafka would hit it."""

    batch: int      # batch index (len(batches) = the final roll/close entry)
    rank: int       # within one batch: 0 offset range, 1 offset index, 2 time index
    error: Exception


# --- recovery rebuild -----------------------------------------------------------------------

def build_indexes(
    *,
    base_offset: int,
    positions: Any,
    sizes: Any,
    last_offsets: Any,
    max_timestamps: Any,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
) -> Tuple[OffsetIndex, TimeIndex]:
    """The offset and time index ``LogSegment.recover`` writes for these batches (then trimmed,
    with the roll/close final time entry), as (OffsetIndex, TimeIndex).

    One element per batch, in file order, for every batch of the segment from position 0:
    ``positions`` (byte position in the .log), ``sizes`` (whole batch incl. the 12-byte log
    overhead), ``last_offsets``, ``max_timestamps`` (−1 when the batch has none, e.g. magic 0).

    Rule (``LogSegment.recover``): an offset-index entry (batch lastOffset, batch position) is due when
    ``position − lastIndexEntryPosition > index_interval_bytes`` (strict, before adding the batch's
    size, so position 0 is never indexed); with it the time index gets the running
    (max timestamp, lastOffset of the earliest batch reaching it) if that timestamp is strictly
    greater than its last entry's; at the end the same pair is offered once more.

    Raises :class:`OffsetOverflowError` (position = the batch's .log position) when a batch's last
    offset is below the base offset or more than 2**31−1 above it, and :class:`CorruptIndexError`
    (position = byte offset of the entry in the index file) where Kafka throws
    ``InvalidOffsetException``: an entry offset not above the previous one.

    Fully vectorised except for a walk over the offset-index entries themselves (at most one per
    4 KiB of log); ~0.1 s per million batches.
    """
    base_offset = int(base_offset)
    interval = int(index_interval_bytes)
    pos = _int64_vector(positions, "positions")
    size = _int64_vector(sizes, "sizes")
    last = _int64_vector(last_offsets, "last_offsets")
    ts = _int64_vector(max_timestamps, "max_timestamps")
    n = pos.shape[0]
    if not (size.shape[0] == last.shape[0] == ts.shape[0] == n):
        raise ValueError(
            f"one value per batch expected: positions {n}, sizes {size.shape[0]}, "
            f"last_offsets {last.shape[0]}, max_timestamps {ts.shape[0]}"
        )
    if n == 0:
        return _offset_index(base_offset, [], []), _time_index(base_offset, [], [])
    _check_contiguous(pos, size)

    # Kafka's ensureOffsetInRange(batch.lastOffset), once per batch.
    relative = last - base_offset
    errors = []
    overflow = np.flatnonzero((relative < 0) | (relative > INT32_MAX))
    if overflow.size:
        i = int(overflow[0])
        errors.append(_BuildError(i, 0, _overflow_error(base_offset, int(last[i]), int(pos[i]))))

    # Offset index: greedy chain of due batches, then Kafka's "offset > last offset" check.
    entries = _entry_batches(pos, interval)
    entry_offsets = last[entries]
    not_increasing = np.flatnonzero(entry_offsets[1:] <= entry_offsets[:-1])
    if not_increasing.size:
        k = int(not_increasing[0]) + 1
        i = int(entries[k])
        errors.append(_BuildError(i, 1, CorruptIndexError(
            f"batch at log position {int(pos[i])} would add offset {int(entry_offsets[k])} to the "
            f"offset index after offset {int(entry_offsets[k - 1])}; offsets must increase "
            "(Kafka's recovery throws InvalidOffsetException and empties the segment)",
            position=k * OFFSET_ENTRY_SIZE,
        )))

    # Running (max timestamp, offset): strictly-greater updates from (−1, base offset).
    running_max = np.maximum.accumulate(np.maximum(ts, NO_TIMESTAMP))
    previous_max = np.empty_like(running_max)
    previous_max[0] = NO_TIMESTAMP
    previous_max[1:] = running_max[:-1]
    setter = np.maximum.accumulate(np.where(ts > previous_max, np.arange(n), -1))
    running_offset = np.where(setter >= 0, last[np.maximum(setter, 0)], base_offset)

    # Time index: one maybeAppend per offset-index entry, plus the final (roll/close) one.
    cand_batch = np.append(entries, n)
    cand_ts = np.append(running_max[entries], running_max[-1])
    cand_off = np.append(running_offset[entries], running_offset[-1])
    keep = cand_ts > np.append(NO_TIMESTAMP, cand_ts[:-1])  # candidates never decrease
    m = cand_ts.shape[0]
    last_kept = np.maximum.accumulate(np.where(keep, np.arange(m), -1))
    kept_before = np.append(-1, last_kept[:-1])
    behind = np.flatnonzero((kept_before >= 0) & (cand_off < cand_off[np.maximum(kept_before, 0)]))
    if behind.size:
        k = int(behind[0])
        i = int(cand_batch[k])
        where = "the final (roll) entry" if i == n else f"batch at log position {int(pos[i])}"
        errors.append(_BuildError(i, 2, CorruptIndexError(
            f"{where} would add offset {int(cand_off[k])} to the time index after offset "
            f"{int(cand_off[kept_before[k]])}; offsets must not decrease (Kafka's recovery throws "
            "InvalidOffsetException and empties the segment)",
            position=int(np.count_nonzero(keep[:k])) * TIME_ENTRY_SIZE,
        )))

    if errors:
        raise min(errors, key=lambda e: (e.batch, e.rank)).error
    return (
        _offset_index(base_offset, entry_offsets, pos[entries]),
        _time_index(base_offset, cand_ts[keep], cand_off[keep]),
    )


def _entry_batches(pos: np.ndarray, interval: int) -> np.ndarray:
    """Indices of the batches that get an offset-index entry (position 0 is the initial
    "last entry"; a batch is due when its position is more than ``interval`` past it)."""
    n = pos.shape[0]
    if n > 1 and bool((np.diff(pos) > interval).all()):
        return np.arange(1, n, dtype=np.int64)  # every batch is bigger than the interval
    # next_due[i]: the first batch more than `interval` bytes past batch i (n when none).
    next_due = np.searchsorted(pos, pos + interval, side="right")
    chain = array("q")
    i = int(next_due[0])
    item = next_due.item
    while i < n:
        chain.append(i)
        i = item(i)
    return np.frombuffer(chain, dtype=np.int64) if chain else np.empty(0, np.int64)


def _check_contiguous(pos: np.ndarray, size: np.ndarray) -> None:
    if (size <= 0).any():
        i = int(np.flatnonzero(size <= 0)[0])
        raise ValueError(f"batch {i} has size {int(size[i])}; batch sizes are positive")
    valid_bytes = np.empty_like(pos)
    valid_bytes[0] = 0
    np.cumsum(size[:-1], out=valid_bytes[1:])
    gap = np.flatnonzero(valid_bytes != pos)
    if gap.size:
        i = int(gap[0])
        raise ValueError(
            f"batch {i} is at position {int(pos[i])} but the batches before it end at "
            f"{int(valid_bytes[i])}; pass every batch of the segment, from position 0, in file order"
        )


# --- append path ----------------------------------------------------------------------------

class IndexAppender:
    """``LogSegment.append``'s index bookkeeping for a fresh segment, one call per append.

    One append may carry several batches (a follower's fetched chunk, a cleaner chunk): its entry
    maps the append's LARGEST offset to the append's START position, so multi-batch appends give
    chunk-granular indexes that differ from a recovery rebuild. With one batch per append
    the result equals :func:`build_indexes`.

    ``engine`` (``kafkalog.engine``) picks how ``append_batches`` runs: the compiled engine's numba
    loop (``append_accel``) or the reference engine's Python loop, with the same entries, state and
    errors.
    """

    def __init__(self, base_offset: int, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 engine: Optional[str] = None):
        self.base_offset = int(base_offset)
        self.index_interval_bytes = int(index_interval_bytes)
        # append_batches: a numba loop (append_accel) or the Python loop below (kafkalog.engine)
        self._compiled = not is_reference(engine)
        self._scratch = np.empty((4, 0), np.int64)     # the kernel's new entries, reused window to window
        self._bytes_since_last_entry = 0
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._offsets = array("q")
        self._positions = array("q")
        self._timestamps = array("q")
        self._time_offsets = array("q")

    def append(
        self,
        *,
        position: int,
        size: int,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
    ) -> None:
        """Account for one append of ``size`` bytes written at ``position`` whose batches end at
        ``largest_offset``; ``largest_timestamp`` is their max timestamp and
        ``offset_of_max_timestamp`` the last offset of the first batch carrying it."""
        if size <= 0 or position < 0:
            raise _bad_append(size, position)
        relative = largest_offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise _overflow_error(self.base_offset, largest_offset, position)
        if largest_timestamp > self._max_timestamp:
            self._max_timestamp = int(largest_timestamp)
            self._offset_of_max_timestamp = int(offset_of_max_timestamp)
        if self._bytes_since_last_entry > self.index_interval_bytes:
            if self._offsets and largest_offset <= self._offsets[-1]:
                raise _offset_order_error(position, largest_offset, self._offsets)
            self._offsets.append(int(largest_offset))
            self._positions.append(int(position))
            self._maybe_append_time_entry()
            self._bytes_since_last_entry = 0
        self._bytes_since_last_entry += int(size)

    def append_batches(self, positions: Any, sizes: Any, last_offsets: Any, max_timestamps: Any) -> None:
        """``append`` for each batch in turn, one append per batch (its offset of max timestamp is its
        last offset), from parallel per-batch sequences: the cleaner's recopy indexes a window of
        batches in one call instead of one keyword call per batch.

        :param positions: each batch's position in the segment.
        :param sizes: each batch's size (its 12-byte log overhead included).
        :param last_offsets: each batch's last offset.
        :param max_timestamps: each batch's max timestamp.
        """
        if self._compiled:
            columns = _int64_columns(positions, sizes, last_offsets, max_timestamps)
            if columns is not None and self._append_batches_compiled(*columns):
                return
        interval = self.index_interval_bytes
        since = self._bytes_since_last_entry
        offsets, entry_positions = self._offsets, self._positions
        low, high = self.base_offset, self.base_offset + INT32_MAX
        for position, size, last, ts in zip(_ints(positions), _ints(sizes), _ints(last_offsets), _ints(max_timestamps)):
            if size <= 0 or position < 0:
                raise _bad_append(size, position)
            if not low <= last <= high:
                raise _overflow_error(self.base_offset, last, position)
            if ts > self._max_timestamp:
                self._max_timestamp = ts
                self._offset_of_max_timestamp = last
            if since > interval:
                if offsets and last <= offsets[-1]:
                    raise _offset_order_error(position, last, offsets)
                offsets.append(last)
                entry_positions.append(position)
                self._maybe_append_time_entry()
                since = 0
            since += size
            self._bytes_since_last_entry = since

    def _append_batches_compiled(self, positions: np.ndarray, sizes: np.ndarray, last_offsets: np.ndarray,
                                 max_timestamps: np.ndarray) -> bool:
        """``append_batches`` by ``append_accel``'s kernel (False, nothing done: a value does not fit
        in int64, take the Python loop). On a failing batch the entries and state before it are kept
        and the Python loop's own error is raised, as that loop leaves them."""
        import kafkalog.index.append_accel as accel     # numba: loaded with the first compiled call

        base, since, max_ts, offset_of_max_ts = (self.base_offset, self._bytes_since_last_entry, self._max_timestamp,
                                                 self._offset_of_max_timestamp)
        if not all(_INT64_MIN <= v <= _INT64_MAX for v in (base, since, max_ts, offset_of_max_ts, self.index_interval_bytes)):
            return False
        n = min(positions.shape[0], sizes.shape[0], last_offsets.shape[0], max_timestamps.shape[0])  # zip's
        if self._scratch.shape[1] < n:
            self._scratch = np.empty((4, max(n, 2 * self._scratch.shape[1])), np.int64)
        out = self._scratch
        offsets, times = self._offsets, self._timestamps
        status, i, k, t, since, max_ts, offset_of_max_ts = accel.append_batches_kernel(
            positions, sizes, last_offsets, max_timestamps, n, self.index_interval_bytes,
            base, min(base + INT32_MAX, _INT64_MAX), since, max_ts, offset_of_max_ts,
            len(offsets) > 0, offsets[-1] if offsets else 0,
            len(times) > 0, times[-1] if times else 0, self._time_offsets[-1] if times else 0, out)
        if k:
            offsets.frombytes(_raw(out[0, :k]))
            self._positions.frombytes(_raw(out[1, :k]))
        if t:
            times.frombytes(_raw(out[2, :t]))
            self._time_offsets.frombytes(_raw(out[3, :t]))
        self._bytes_since_last_entry, self._max_timestamp, self._offset_of_max_timestamp = since, max_ts, offset_of_max_ts
        if status == accel.APPEND_OK:
            return True
        position, last = int(positions[i]), int(last_offsets[i])
        if status == accel.APPEND_BAD_BATCH:
            raise _bad_append(int(sizes[i]), position)
        if status == accel.APPEND_OVERFLOW:
            raise _overflow_error(self.base_offset, last, position)
        if status == accel.APPEND_OFFSET_ORDER:
            raise _offset_order_error(position, last, offsets)
        self._maybe_append_time_entry()          # APPEND_TIME_ORDER: raises the time index's error
        raise AssertionError(f"append_batches_kernel: status {status} at batch {i} raised nothing")

    def finish(self) -> Tuple[OffsetIndex, TimeIndex]:
        """Roll/close: offer the running max to the time index once more (``LogSegment.onBecomeInactiveSegment``) and return the
        trimmed indexes. Idempotent (an equal timestamp is never appended twice)."""
        self._maybe_append_time_entry()
        return (
            _offset_index(self.base_offset, self._offsets, self._positions),
            _time_index(self.base_offset, self._timestamps, self._time_offsets),
        )

    def _maybe_append_time_entry(self) -> None:
        ts, offset = self._max_timestamp, self._offset_of_max_timestamp
        if self._timestamps:
            if offset < self._time_offsets[-1]:
                raise CorruptIndexError(
                    f"time index entry offset {offset} is below the previous entry's offset "
                    f"{self._time_offsets[-1]}",
                    position=len(self._timestamps) * TIME_ENTRY_SIZE,
                )
            if ts <= self._timestamps[-1]:
                return
        elif ts <= NO_TIMESTAMP:
            return
        self._timestamps.append(ts)
        self._time_offsets.append(offset)


def _int64_columns(*columns: Any) -> Optional[Tuple[np.ndarray, ...]]:
    """The per-batch sequences as contiguous int64 arrays, or None when one is not a one-dimensional
    sequence of integers that int64 holds (the Python loop takes those, and fails as it fails)."""
    if all(type(c) is np.ndarray and c.dtype == np.int64 and c.ndim == 1 and c.flags.c_contiguous for c in columns):
        return columns                          # the cleaner's columns, as they are
    out = []
    for values in columns:
        arr = np.asarray(values)
        if arr.ndim != 1 or not (arr.dtype.kind == "i" or (arr.dtype.kind == "u" and arr.dtype.itemsize < 8)):
            if arr.ndim == 1 and arr.size == 0:
                arr = np.empty(0, np.int64)      # [] is float64 to numpy; nothing to append all the same
            else:
                return None
        out.append(np.ascontiguousarray(arr, dtype=np.int64))
    return tuple(out)


def _raw(values: np.ndarray) -> memoryview:
    """A contiguous array's bytes, for ``array.frombytes`` (which refuses a non-byte buffer)."""
    return memoryview(values).cast("B")  # type: ignore[arg-type]  # numpy's stubs do not say ndarray is a Buffer


def _ints(values: Any) -> list:
    """A per-batch sequence as Python ints (numpy arrays through ``tolist``)."""
    return values.tolist() if hasattr(values, "tolist") else [int(v) for v in values]


# --- transaction index ----------------------------------------------------------------------

def build_transaction_index(
    *,
    base_offset: int,
    batches: Mapping,
    open_txn_first_offsets: Optional[Mapping[int, int]] = None,
) -> TransactionIndex:
    """The ``.txnindex`` recovery writes for one segment (see :func:`replay_transactions`)."""
    aborted, _ = replay_transactions(batches=batches, open_txn_first_offsets=open_txn_first_offsets)
    return TransactionIndex(int(base_offset), aborted)


def replay_transactions(
    *,
    batches: Mapping,
    open_txn_first_offsets: Optional[Mapping[int, int]] = None,
) -> Tuple[Tuple[AbortedTxn, ...], Dict[int, int]]:
    """Replay transactional producer state over one segment's batches, as recovery does.

    ``batches`` holds PARALLEL COLUMNS, one element per batch in file order: a mapping from column
    name to an array-like (a dict of lists / numpy arrays, a pandas DataFrame, or a pyarrow
    Table such as the batch table of ``scan_batches``). Columns (snake_case or camelCase):
    ``base_offset``, ``producer_id``, ``is_transactional``, ``is_control``, ``control_type``
    (0 ABORT, 1 COMMIT, anything else — including null/−1 for data batches — other).

    ``open_txn_first_offsets`` maps producer id → first offset of its transaction still open at
    the start of the segment (from the producer snapshot / earlier segments).

    Rules: only batches with a producer id (≥ 0) count. A transactional data batch opens its
    producer's transaction at the batch's base offset unless one is open. A control batch of type
    ABORT or COMMIT closes the producer's open transaction; an ABORT of a transaction that held data
    yields AbortedTxn(pid, first offset, marker offset, LSO) with LSO = the smallest first offset of
    the OTHER producers' open transactions, else marker offset + 1. A marker with no open
    transaction (an empty transaction) yields nothing. Other control types, and non-transactional
    data batches, leave the transaction state alone.

    Returns (aborted transactions in marker order, producer id → first offset of every
    transaction still open at the end), the latter to carry into the next segment.
    """
    base = _column(batches, "base_offset", np.int64, None)
    pid = _column(batches, "producer_id", np.int64, -1)
    is_txn = _column(batches, "is_transactional", np.bool_, False)
    is_ctrl = _column(batches, "is_control", np.bool_, False)
    ctype = _column(batches, "control_type", np.int64, -1)
    n = base.shape[0]
    if not (pid.shape[0] == is_txn.shape[0] == is_ctrl.shape[0] == ctype.shape[0] == n):
        raise ValueError("all batch columns must have one value per batch")

    open_txns: Dict[int, int] = {int(p): int(f) for p, f in (open_txn_first_offsets or {}).items()}
    aborted: list = []
    relevant = np.flatnonzero((pid >= 0) & (is_txn | is_ctrl))
    for i, p, offset, control, kind in zip(
        relevant.tolist(),
        pid[relevant].tolist(),
        base[relevant].tolist(),
        is_ctrl[relevant].tolist(),
        ctype[relevant].tolist(),
    ):
        if not control:
            open_txns.setdefault(p, offset)
            continue
        if kind not in (ABORT, COMMIT):
            continue
        first = open_txns.pop(p, None)
        if first is None or kind == COMMIT:
            continue
        if aborted and offset <= aborted[-1].last_offset:
            raise CorruptIndexError(
                f"ABORT marker of batch {i} at offset {offset} is not after the previous aborted "
                f"transaction's marker at {aborted[-1].last_offset}; markers must increase",
                position=len(aborted) * TXN_ENTRY_SIZE,
            )
        lso = min(open_txns.values()) if open_txns else offset + 1
        aborted.append(AbortedTxn(p, first, offset, lso))
    return tuple(aborted), open_txns


# --- helpers --------------------------------------------------------------------------------

def _bad_append(size: int, position: int) -> ValueError:
    return ValueError(f"an append has a positive size and a position >= 0, got {size} at {position}")


def _offset_order_error(position: int, offset: int, offsets: array) -> CorruptIndexError:
    """``OffsetIndex.append``'s InvalidOffsetException: ``offset`` not above the last entry of ``offsets``."""
    return CorruptIndexError(
        f"append at log position {position} would add offset {offset} to the "
        f"offset index after offset {offsets[-1]}; offsets must increase",
        position=len(offsets) * OFFSET_ENTRY_SIZE,
    )


def _overflow_error(base_offset: int, offset: int, log_position: int) -> OffsetOverflowError:
    return OffsetOverflowError(
        f"offset {offset} of the batch at log position {log_position} is {offset - base_offset} "
        f"from the segment base offset {base_offset}; a segment holds relative offsets "
        f"0..{INT32_MAX} only",
        position=int(log_position),
    )


def _offset_index(base_offset: int, offsets: Any, positions: Any) -> OffsetIndex:
    return OffsetIndex(base_offset, _as_int64(offsets), _as_int64(positions))


def _time_index(base_offset: int, timestamps: Any, offsets: Any) -> TimeIndex:
    return TimeIndex(base_offset, _as_int64(timestamps), _as_int64(offsets))


def _as_int64(values: Any) -> np.ndarray:
    if isinstance(values, array):
        return np.frombuffer(values, dtype=np.int64).copy() if len(values) else np.empty(0, np.int64)
    return np.asarray(values, dtype=np.int64)


def _int64_vector(values: Any, name: str) -> np.ndarray:      # numpy, pyarrow or pandas
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        try:
            values = values.to_numpy(zero_copy_only=False)  # pyarrow
        except TypeError:
            values = values.to_numpy()  # pandas
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _column(batches: Mapping, field: str, dtype: Any, fill: Any) -> np.ndarray:
    names = TXN_BATCH_COLUMNS[field]
    for name in names:
        try:
            col = batches[name]
        except (KeyError, IndexError, TypeError):
            continue
        break
    else:
        raise ValueError(f"batches has no column {' or '.join(map(repr, names))}")
    if hasattr(col, "fill_null") and fill is not None:  # pyarrow (Chunked)Array
        col = col.fill_null(fill)
    if hasattr(col, "to_numpy") and not isinstance(col, np.ndarray):
        try:
            col = col.to_numpy(zero_copy_only=False)
        except TypeError:
            col = col.to_numpy()
    arr = np.asarray(col)
    if arr.dtype == object:
        if fill is None and any(v is None for v in arr):
            raise ValueError(f"column {field!r} has nulls")
        arr = np.array([fill if v is None else v for v in arr])
    return arr.astype(dtype, copy=False).reshape(-1)
