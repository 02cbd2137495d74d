"""The recopy pass of a round over decoded windows (``source_segments.read_windows``): the same
decisions, counts, reasons and bytes as ``record_filter.filter_batch`` (the reference, kept and
tested against), without a Python object per record.

Per window: the per-batch steps (transaction tracker, ``check_batch_retention``) run in batch order
in Python; the per-record rules (``Cleaner.shouldRetainRecord``) run on numpy columns, with ONE lookup per record that needs
it, in compiled code (``key_walk.KeyVerdicts``: the compiled map, or its hash-slice bitsets), or
``dict.get`` for a precomputed ``ExactOffsetMap``; retained batches that lose records or get a
horizon are re-encoded by the numba writer (``format.records_encode_accel``), or by the reference
writer when only it gives the exact bytes.

When no record's reasons are asked, windows of plain batches take ``filter_to`` instead (the same
decisions and bytes in one compiled call, no Arrow); this module does the other windows and the
audited rounds.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Collection, List, Mapping, Optional, Union

import numpy as np
import pyarrow as pa

from kafkalog.format import record_batch as rb
from kafkalog.format.compression import decompress
from kafkalog.format.records_encode_accel import rewrite_batch
from kafkalog.cleaner.key_map import NOT_FOUND
from kafkalog.cleaner.key_walk import KeyVerdicts
from kafkalog.cleaner.source_segments import SourceWindow
from kafkalog.cleaner.offset_map import ExactOffsetMap, OffsetMap
from kafkalog.cleaner.producer_state import LastRecord
from kafkalog.cleaner.record_filter import (DELETE_IF_EMPTY, BatchRetention, FilterCounts, FilteredBatch, RecordReason,
                                            check_batch_retention, is_batch_last_record_of_producer)
from kafkalog.cleaner.transaction_metadata import CleanedTransactionMetadata

REASONS = list(RecordReason)
_CODE = {r: np.int8(i) for i, r in enumerate(REASONS)}
KEPT_LATEST, KEPT_NOT_IN_MAP, KEPT_BEYOND_MAP, KEPT_TOMBSTONE, KEPT_CONTROL = (
    _CODE[RecordReason.KEPT_LATEST], _CODE[RecordReason.KEPT_NOT_IN_MAP], _CODE[RecordReason.KEPT_BEYOND_MAP],
    _CODE[RecordReason.KEPT_TOMBSTONE], _CODE[RecordReason.KEPT_CONTROL])
REMOVED_SUPERSEDED, REMOVED_NULL_KEY, REMOVED_TOMBSTONE_EXPIRED, REMOVED_ABORTED, REMOVED_MARKER = (
    _CODE[RecordReason.REMOVED_SUPERSEDED], _CODE[RecordReason.REMOVED_NULL_KEY],
    _CODE[RecordReason.REMOVED_TOMBSTONE_EXPIRED], _CODE[RecordReason.REMOVED_ABORTED],
    _CODE[RecordReason.REMOVED_MARKER])
_KEPT_CODES = np.array([r.kept for r in REASONS], dtype=np.bool_)
_TXN_OR_CONTROL = rb.TRANSACTIONAL_FLAG_MASK | rb.CONTROL_FLAG_MASK
_NOT_FOUND = NOT_FOUND                   # "key not in the map" in the looked-up offsets

# Whether retained batches are re-encoded by the numba writer (tests switch it off to run the
# reference writer on the same decisions).
USE_ACCEL_WRITER = True

# --- recopy pass -------------------------------------------------------------------------------

@dataclass
class BatchOutput:
    """One source batch after filtering (what ``_clean_group`` needs of a ``FilteredBatch``)."""

    output: bytes
    max_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    filtered: Optional[FilteredBatch]      # for the audit, only when reasons are wanted


def _lookup(offset_map: OffsetMap, win: SourceWindow, look: np.ndarray, ordinal_base: int) -> np.ndarray:
    """One lookup per record ``look`` of the window: the map's offset for its key, _NOT_FOUND where
    absent."""
    if isinstance(offset_map, KeyVerdicts):
        return offset_map.lookup(win.keys, look, look + ordinal_base, win.offsets[look])
    keys = win.keys.take(pa.array(look)).to_pylist()
    n = len(keys)
    if type(offset_map) is ExactOffsetMap:
        return np.fromiter(map(offset_map.offsets.get, keys, repeat(_NOT_FOUND, n)), dtype=np.int64, count=n)
    found = list(map(offset_map.latest_offset, keys))
    return np.fromiter((_NOT_FOUND if x is None else x for x in found), dtype=np.int64, count=n)


def _asked_in(asked: Optional[np.ndarray], lo: int, hi: int) -> bool:
    if asked is None:
        return True
    return int(np.searchsorted(asked, lo, side="left")) < int(np.searchsorted(asked, hi, side="right"))


def _reference_encode(win: SourceWindow, b: int, kept: np.ndarray, h: rb.BatchHeader,
                      horizon: Optional[int]) -> bytes:
    """``filter_batch``'s own writing of batch ``b``'s kept records."""
    log_append = h.timestamp_type == rb.LOG_APPEND_TIME
    rows = [r for r, k in zip(win.rows(b), kept.tolist()) if k]
    records = [rb.V2Record(r.offset, h.max_timestamp if log_append else r.timestamp, r.key, r.value, r.headers)
               for r in rows]
    return rb.encode_batch(records, base_offset=h.base_offset, last_offset_delta=h.last_offset_delta,
                           codec=h.codec, timestamp_type=h.timestamp_type, transactional=h.is_transactional,
                           control=h.is_control, delete_horizon_ms=horizon, producer_id=h.producer_id,
                           producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                           partition_leader_epoch=h.partition_leader_epoch,
                           max_timestamp=h.max_timestamp if log_append else None)


def _rewrite(win: SourceWindow, b: int, kept: np.ndarray, kept_ts: np.ndarray, h: rb.BatchHeader,
             horizon: Optional[int], max_batch_bytes: int) -> bytes:
    if USE_ACCEL_WRITER:
        pos, size = win.positions[b], win.sizes[b]
        region = win.records_region(b)
        if h.codec == 0:
            src, start, end = win.buf, pos + rb.RECORDS_OFFSET, pos + size
        elif region is not None:          # decompressed once, when the window was decoded
            src, start, end = region
        else:
            payload = decompress(h.codec, memoryview(win.buf)[pos + rb.RECORDS_OFFSET:pos + size], magic=2,  # type: ignore[arg-type, unused-ignore]
                                 max_bytes=max_batch_bytes)
            src, start, end = np.frombuffer(payload, dtype=np.uint8), 0, len(payload)
        log_append = h.timestamp_type == rb.LOG_APPEND_TIME
        out = rewrite_batch(src, start, end, len(kept), kept, kept_ts, base_offset=h.base_offset,
                            last_offset_delta=h.last_offset_delta, codec=h.codec, timestamp_type=h.timestamp_type,
                            transactional=h.is_transactional, control=h.is_control, delete_horizon_ms=horizon,
                            producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                            base_sequence=h.base_sequence, partition_leader_epoch=h.partition_leader_epoch,
                            max_timestamp=h.max_timestamp if log_append else None)
        if out is not None:
            return out
    return _reference_encode(win, b, kept, h, horizon)


def filter_window(win: SourceWindow, *, tracker: CleanedTransactionMetadata, active: Mapping[int, LastRecord],
                  high_watermark: int, offset_map: OffsetMap, now_ms: int, delete_retention_ms: int,
                  counts: FilterCounts, record_decisions: Union[bool, Collection[int]],
                  asked: Optional[np.ndarray], max_batch_bytes: int, ordinal_base: int = 0) -> List[BatchOutput]:
    """``filter_batch`` for every batch of the window, in order (tracker calls included); adds the
    audit numbers to ``counts``. ``asked``: sorted offsets whose reasons are wanted (None: all);
    ``ordinal_base``: the window's first record's index in the round's recopied range."""
    headers = win.headers
    nb = len(headers)
    rs = win.record_start
    n = int(rs[-1])
    per_batch = np.diff(rs)
    decisions = []
    mode = np.empty(nb, dtype=np.int8)          # 0: records discarded, 1: control kept, 2: data, per record
    control = np.empty(nb, dtype=np.bool_)
    horizon_passed = np.zeros(nb, dtype=np.bool_)
    for b, h in enumerate(headers):
        if not h.attributes & _TXN_OR_CONTROL and h.last_offset + 1 != high_watermark and (
                h.producer_id == rb.NO_PRODUCER_ID or h.producer_id not in active):
            # a plain data batch: the tracker has nothing to do (what it consumes up to this offset,
            # its next transactional or control batch consumes first) and the verdict is constant
            decisions.append(DELETE_IF_EMPTY)
            control[b] = False
            mode[b] = 2
            horizon = h.delete_horizon_ms
            horizon_passed[b] = horizon is not None and now_ms >= horizon
            continue
        if h.is_control:
            can_discard = tracker.on_control_batch(h.producer_id, h.last_offset, win.control_type(b))
        else:
            can_discard = tracker.on_data_batch(h.producer_id, h.last_offset, h.is_transactional)
        d = check_batch_retention(h, can_discard_batch=can_discard,
                                  is_last_of_active_producer=is_batch_last_record_of_producer(h, active),
                                  high_watermark=high_watermark, now_ms=now_ms)
        decisions.append(d)
        control[b] = h.is_control
        if d.retention is BatchRetention.DELETE or d.discard_records:
            mode[b] = 0
        else:
            mode[b] = 1 if h.is_control else 2
        horizon = h.delete_horizon_ms
        horizon_passed[b] = horizon is not None and now_ms >= horizon

    # per record (Cleaner.shouldRetainRecord)
    rec_mode = np.repeat(mode, per_batch)
    rec_control = np.repeat(control, per_batch)
    offsets = win.offsets
    codes = np.empty(n, dtype=np.int8)
    codes[rec_mode == 0] = np.where(rec_control[rec_mode == 0], REMOVED_MARKER, REMOVED_ABORTED)
    codes[rec_mode == 1] = KEPT_CONTROL
    data = rec_mode == 2
    if data.any():
        beyond = data & (offsets >= offset_map.end_offset)
        codes[beyond] = KEPT_BEYOND_MAP
        rest = data & ~beyond
        codes[rest & ~win.key_valid] = REMOVED_NULL_KEY
        look = np.flatnonzero(rest & win.key_valid)
        if len(look):
            off = offsets[look]
            found = _lookup(offset_map, win, look, ordinal_base)
            has = found != _NOT_FOUND
            tomb = ~win.value_valid[look]
            expired = np.repeat(horizon_passed, per_batch)[look]
            c = np.where(has, KEPT_LATEST, KEPT_NOT_IN_MAP).astype(np.int8)
            c[tomb] = np.where(expired[tomb], REMOVED_TOMBSTONE_EXPIRED, KEPT_TOMBSTONE)
            c[has & (off < found)] = REMOVED_SUPERSEDED
            codes[look] = c
    kept = _KEPT_CODES[codes]
    tomb_kept = kept & ~rec_control & ~win.value_valid
    ck = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(kept, out=ck[1:])
    ct = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(tomb_kept, out=ct[1:])
    kept_b = (ck[rs[1:]] - ck[rs[:-1]]).tolist()
    tomb_b = (ct[rs[1:]] - ct[rs[:-1]]).tolist()

    by_code = np.bincount(codes, minlength=len(REASONS)).tolist()
    counts.batches_read += nb
    counts.records_read += n
    counts.records_kept += int(ck[n])
    counts.records_superseded += by_code[REMOVED_SUPERSEDED]
    counts.records_null_key += by_code[REMOVED_NULL_KEY]
    counts.tombstones_kept += int(ct[n])
    counts.tombstones_removed += by_code[REMOVED_TOMBSTONE_EXPIRED]
    counts.aborted_records_removed += by_code[REMOVED_ABORTED]
    counts.markers_kept += int(np.count_nonzero(kept & rec_control))
    counts.markers_removed += by_code[REMOVED_MARKER]

    # per batch: the bytes written (MemoryRecords.filterTo)
    out: List[BatchOutput] = []
    starts = rs.tolist()
    for b, h in enumerate(headers):
        d = decisions[b]
        size = win.sizes[b]
        counts.bytes_read += size
        lo, hi = starts[b], starts[b + 1]
        kc = kept_b[b]
        horizon = h.delete_horizon_ms
        verbatim = False
        if kc:
            need_horizon = (tomb_b[b] > 0 or d.contains_marker_for_empty_txn) and horizon is None
            if kc == hi - lo and not need_horizon:
                counts.batches_copied += 1
                output, verbatim = win.raw(b), True
                max_offset, max_ts = h.last_offset, h.max_timestamp
            else:
                if need_horizon:
                    horizon = now_ms + delete_retention_ms
                    counts.horizons_stamped += 1
                kmask = kept[lo:hi]
                log_append = h.timestamp_type == rb.LOG_APPEND_TIME
                kept_ts = np.full(kc, h.max_timestamp, dtype=np.int64) if log_append else win.timestamps[lo:hi][kmask]
                output = _rewrite(win, b, kmask, kept_ts, h, horizon, max_batch_bytes)
                max_ts = h.max_timestamp if log_append else int(kept_ts.max())
                max_offset = int(offsets[lo:hi][kmask].max())
                counts.batches_rewritten += 1
            counts.bytes_written += len(output)
            shallow = h.last_offset
        elif d.retention is BatchRetention.RETAIN_EMPTY:
            output = rb.encode_batch([], base_offset=h.base_offset, last_offset_delta=h.last_offset_delta, codec=0,
                                     timestamp_type=h.timestamp_type, transactional=h.is_transactional,
                                     control=h.is_control, producer_id=h.producer_id,
                                     producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                                     partition_leader_epoch=h.partition_leader_epoch, max_timestamp=h.max_timestamp)
            verbatim = output == win.raw(b)
            horizon = None
            counts.batches_emptied += 1
            counts.bytes_written += len(output)
            max_offset, max_ts, shallow = h.last_offset, h.max_timestamp, h.last_offset
        else:
            counts.batches_removed += 1
            output, horizon, max_offset, max_ts, shallow = b"", None, -1, rb.NO_TIMESTAMP, -1
        fb = None
        if record_decisions and _asked_in(asked, h.base_offset, h.last_offset):
            reasons = list(zip(offsets[lo:hi].tolist(), [REASONS[c] for c in codes[lo:hi].tolist()]))
            fb = FilteredBatch(h.base_offset, h.last_offset, d, output, verbatim, horizon, max_offset, max_ts,
                               shallow, reasons, FilterCounts(records_kept=kc))
        out.append(BatchOutput(output, max_offset, max_ts, shallow, fb))
    return out


__all__ = ["BatchOutput", "filter_window"]
