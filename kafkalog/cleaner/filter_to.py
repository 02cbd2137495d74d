"""Kafka's ``MemoryRecords.filterTo`` compiled: the cleaner's recopy of a source segment
(``LogCleaner.cleanInto``), the twin of the reference ``record_filter.filter_batch`` — the same
decisions, counts, reasons and bytes, kept and tested against it (``tests/conformance``).

Two paths, one module:

* **The kernel** (``filter_to_kernel``) for windows of plain batches when no record's reason is
  asked: one numba call walks every record of the window once, looks its key up in the map pass's
  answer (``key_walk.KeyVerdicts``: two bits per record, or the compiled map below its
  ``map_below`` offset), decides keep/drop, and writes every batch's output — copied whole, rebuilt
  with the kept records (``records_encode_accel``: header, C codecs, CRC), or nothing — into one
  buffer, with no Python per batch and no Arrow. A plain batch is a data batch outside any
  transaction, not an active producer's last, not the last before the high watermark: its verdict
  is the constant ``record_filter.DELETE_IF_EMPTY`` and the transaction tracker has nothing to do
  with it (what it consumes up to this offset, its next transactional or control batch consumes first).
* **The columnar path** (:func:`filter_window`) for every other window, the audited rounds, and a
  window the kernel hands back (a batch it cannot write exactly as the reference writer does: codecs
  without a C encoder here, non-canonical varints, extreme offsets or timestamps; or a record that
  does not walk): the decoder's window (``source_segments.read_windows``) as numpy columns. The
  per-batch steps (transaction tracker, ``check_batch_retention``) run in batch order in Python; the
  per-record rules run on the columns with ONE lookup per record that needs it; retained batches
  that lose records or get a horizon are re-encoded by the numba writer (``rewrite_batch``), or by
  the reference writer when only it gives the exact bytes.

Per window the result is ``WindowOutput``: the bytes of its batches back to back and per batch
where its output lies and the numbers the index builder needs.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Collection, Iterator, List, Mapping, Optional, Union

import numpy as np
import pyarrow as pa

from kafkalog.format import record_batch as rb
from kafkalog.format.buffer_pool import release_pages
from kafkalog.format.compression import ZSTD_LEVEL, decompress, thread_output_buffer
from kafkalog.format.compression_accel import zstd_compressor
from kafkalog.format.decoder import decompress_batches
from kafkalog.fs.filesystem import MappedFile
from kafkalog.format.native import LZ4_STREAM_BYTES, native_functions
from kafkalog.format.records_encode_accel import rewrite_batch
import kafkalog.cleaner.key_map as km
import kafkalog.cleaner.filter_to_kernel as fk
from kafkalog.cleaner.filter_to_kernel import (
    C_BYTES_WRITTEN, C_COPIED, C_HORIZONS, C_KEPT, C_REMOVED, C_REWRITTEN, C_TOMBS_KEPT, FT_OK, HEADER_BYTES,
    KEPT_BEYOND_MAP, KEPT_CONTROL, KEPT_LATEST, KEPT_NOT_IN_MAP, KEPT_TOMBSTONE, N_COUNTERS, REASONS, REMOVED_ABORTED,
    REMOVED_MARKER, REMOVED_NULL_KEY, REMOVED_SUPERSEDED, REMOVED_TOMBSTONE_EXPIRED, filter_window_kernel)
from kafkalog.cleaner.key_walk import MAP_NEVER, KeyVerdicts
from kafkalog.cleaner.offset_map import ExactOffsetMap, OffsetMap
from kafkalog.cleaner.producer_state import LastRecord
from kafkalog.cleaner.record_filter import (DELETE_IF_EMPTY, BatchRetention, FilterCounts, FilteredBatch,
                                            check_batch_retention, is_batch_last_record_of_producer)
from kafkalog.cleaner.source_segments import READ_WINDOW_BATCHES, SourceWindow, read_windows
from kafkalog.cleaner.transaction_metadata import CleanedTransactionMetadata
from kafkalog.log.segment import LogSegment

WINDOW_BYTES = 2 << 20         # records (decompressed) per window of plain batches: bounds the worker's buffers

_KEPT_CODES = np.array([r.kept for r in REASONS], dtype=np.bool_)
_TXN_OR_CONTROL = rb.TRANSACTIONAL_FLAG_MASK | rb.CONTROL_FLAG_MASK
_NOT_FOUND = km.NOT_FOUND                # "key not in the map" in the looked-up offsets


# --- what a window wrote -------------------------------------------------------------------

@dataclass
class BatchOutput:
    """One source batch after filtering (what ``_clean_group`` needs of a ``FilteredBatch``)."""

    output: bytes
    max_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    filtered: Optional[FilteredBatch]      # for the audit, only when reasons are wanted


@dataclass
class WindowOutput:
    """Batches [first, first + count) of a segment after filtering: batch b's bytes are
    ``data[start[b]:end[b]]`` (empty when removed; one after the other), ``max_offset``,
    ``max_timestamp`` and ``shallow_offset`` as ``BatchOutput`` has them."""

    first: int
    data: np.ndarray
    start: np.ndarray
    end: np.ndarray
    max_offset: np.ndarray
    max_timestamp: np.ndarray
    shallow_offset: np.ndarray

    @property
    def count(self) -> int:
        return len(self.start)

    @staticmethod
    def of_batches(first: int, outputs: List[BatchOutput]) -> "WindowOutput":
        sizes = np.fromiter((len(o.output) for o in outputs), np.int64, len(outputs))
        end = np.cumsum(sizes)
        data = np.frombuffer(b"".join(o.output for o in outputs), np.uint8)
        return WindowOutput(first, data, end - sizes, end,
                            np.fromiter((o.max_offset for o in outputs), np.int64, len(outputs)),
                            np.fromiter((o.max_timestamp for o in outputs), np.int64, len(outputs)),
                            np.fromiter((o.shallow_offset_of_max_timestamp for o in outputs), np.int64, len(outputs)))

    def written(self, a: int, b: int):
        """What batches [a, b) of the window wrote, as one ``_GroupOutput.write`` takes it: (bytes,
        largest offset, largest timestamp, its shallow offset); None when they wrote nothing."""
        lo, hi = int(self.start[a]), int(self.end[b - 1])
        if hi == lo:
            return None
        wrote = self.end[a:b] > self.start[a:b]
        ts = self.max_timestamp[a:b][wrote]
        k = int(np.argmax(ts))              # the first batch with the largest timestamp, as batch by batch
        return (memoryview(self.data[lo:hi]), int(self.max_offset[a:b][wrote].max()), int(ts[k]),  # type: ignore[arg-type, unused-ignore]
                int(self.shallow_offset[a:b][wrote][k]))



# --- the columnar path -----------------------------------------------------------------------

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


# --- the kernel's driver --------------------------------------------------------------------

def _codecs() -> fk.Codecs:
    """What the kernel calls the C codecs and CRC with (addresses; 0 where missing)."""
    native = native_functions()
    z = zstd_compressor(ZSTD_LEVEL) if native.enabled else None
    return fk.Codecs(
        np.array([native.lz4_reset_stream, native.lz4_compress_fast_continue] if native.enabled else [0, 0], np.uintp),
        np.zeros(LZ4_STREAM_BYTES, np.uint8),
        z.fns if z is not None else np.zeros(3, np.uintp),
        np.uintp(z.cctx if z is not None else 0),
        z.io if z is not None else np.zeros(6, np.uint64),
        np.uintp(native.crc32c_update if native.enabled else 0))


def available(offset_map) -> bool:
    """Whether windows of plain batches can take the kernel for this map (the compiled map pass's
    answer, and the C CRC-32C to seal rewritten batches with)."""
    return isinstance(offset_map, KeyVerdicts) and native_functions().crc32c_update != 0


def plain_batches(h, high_watermark: int, active_ids: np.ndarray) -> np.ndarray:
    """Per batch of ``h``: True for a plain batch (see the module docstring)."""
    pids = h.producerId
    return (((h.attributes & _TXN_OR_CONTROL) == 0) & (h.lastOffset + 1 != high_watermark)
            & ((pids == rb.NO_PRODUCER_ID) | ~np.isin(pids, active_ids)))


def _run(buf, dbuf, b_src, b_start, b_end, h, offset_map: KeyVerdicts, now_ms: int, delete_retention_ms: int,
         ordinal: int, codecs: fk.Codecs, counts: FilterCounts, first: int) -> Optional[WindowOutput]:
    nb = len(h)
    per_batch = np.maximum(h.recordsCount.astype(np.int64), 0)
    region = (b_end - b_start).astype(np.int64)
    most = int(per_batch.max()) if nb else 0
    room = int(np.maximum(h.size.astype(np.int64), HEADER_BYTES + region + 16 * per_batch + region // 64 + 1024).sum())
    out = thread_output_buffer("cleaner recopy, written").reserve(room, 0)
    scratch = thread_output_buffer("cleaner recopy, records").reserve(
        int((region + 16 * per_batch).max()) + 16 if nb else 16, 0)
    kept_body = np.empty(max(most, 1), np.int64)        # (per record of one batch: small)
    kept_end = np.empty(max(most, 1), np.int64)
    kept_ts = np.empty(max(most, 1), np.int64)
    o = [np.empty(nb, np.int64) for _ in range(5)]
    c = np.zeros(N_COUNTERS, np.int64)
    if offset_map.key_map is not None:
        slots, arena = offset_map.key_map.arrays()
        weak, map_below = offset_map.key_map.weak_hash, offset_map.map_below
    else:
        slots, arena, weak, map_below = np.zeros(km.SLOT_WORDS, np.int64), np.zeros(1, np.uint8), False, MAP_NEVER
    batches = fk.Batches(b_src, b_start, b_end, h.position.astype(np.int64), h.size.astype(np.int64), per_batch,
                         h.baseOffset, h.lastOffset, h.attributes.astype(np.int64), h.baseTimestamp, h.maxTimestamp)
    rules = fk.Rules(offset_map.end_offset, now_ms, now_ms + delete_retention_ms, map_below, ordinal)
    lookup = fk.Lookup(weak, slots, arena, offset_map.found_bits, offset_map.superseded_bits)
    status, _b = filter_window_kernel(fk.Source(buf, dbuf), batches, rules, lookup,
                                      fk.Work(kept_body, kept_end, kept_ts, scratch, out), fk.Result(o[0], o[1], o[2], o[3], o[4], c), codecs)
    if status != FT_OK:
        return None
    by = c.tolist()
    counts.batches_read += nb
    counts.records_read += int(per_batch.sum())
    counts.records_kept += by[C_KEPT]
    counts.records_superseded += by[REMOVED_SUPERSEDED]
    counts.records_null_key += by[REMOVED_NULL_KEY]
    counts.tombstones_kept += by[C_TOMBS_KEPT]
    counts.tombstones_removed += by[REMOVED_TOMBSTONE_EXPIRED]
    counts.batches_copied += by[C_COPIED]
    counts.batches_rewritten += by[C_REWRITTEN]
    counts.batches_removed += by[C_REMOVED]
    counts.horizons_stamped += by[C_HORIZONS]
    counts.bytes_read += int(h.size.astype(np.int64).sum())
    counts.bytes_written += by[C_BYTES_WRITTEN]
    return WindowOutput(first, out[:by[C_BYTES_WRITTEN]], *o)      # valid until the next window


def filtered_windows(seg: LogSegment, *, tracker, active: Mapping[int, LastRecord], high_watermark: int,
                     offset_map: KeyVerdicts, now_ms: int, delete_retention_ms: int, counts: FilterCounts,
                     max_batch_bytes: int, ordinal: int) -> Iterator[WindowOutput]:
    """Every batch of ``seg`` filtered, in file order, a window at a time. ``ordinal``: the segment's
    first record in the recopied range. Adds the audit numbers to ``counts``."""
    h = seg.scan().headers
    n = len(h)
    legacy = np.flatnonzero(h.magic != rb.MAGIC_VALUE_V2)
    stop = int(legacy[0]) if legacy.size else n
    active_ids = np.fromiter(active.keys(), np.int64, len(active))
    codecs = _codecs()
    cache = offset_map.windows
    decompressed = thread_output_buffer("cleaner recopy, decompressed")
    plain = plain_batches(h.head(stop), high_watermark, active_ids)
    others = np.flatnonzero(~plain)
    with MappedFile(seg.log_path) as f:
        buf = f.array
        i = 0
        while i < stop:
            result = None
            if plain[i]:          # a window of plain batches only: up to the next other batch
                k = int(np.searchsorted(others, i))
                j = min(int(others[k]) if k < len(others) else stop, i + READ_WINDOW_BATCHES)
                kept = cache.take(seg.base_offset, i, j - i) if cache is not None else None
                if kept is not None:      # decompressed by the map pass already
                    consumed, b_src, b_start, b_end, dbuf = kept
                else:
                    consumed, b_src, b_start, b_end, dbuf = decompress_batches(
                        buf, h.slice(i, j), decompressed, path=seg.log_path, max_batch_bytes=max_batch_bytes,
                        budget=WINDOW_BYTES)
                    consumed = max(int(consumed), 1)
                result = _run(buf, dbuf, b_src, b_start, b_end, h.slice(i, i + consumed), offset_map, now_ms,
                              delete_retention_ms, ordinal, codecs, counts, i)
            if result is None:    # the decoder's window from here, through filter_window
                windows = read_windows(seg, max_batch_bytes=max_batch_bytes, from_position=int(h.position[i]))
                win = next(windows)
                windows.close()
                result = WindowOutput.of_batches(i, filter_window(
                    win, tracker=tracker, active=active, high_watermark=high_watermark,
                    offset_map=offset_map, now_ms=now_ms, delete_retention_ms=delete_retention_ms, counts=counts,  # type: ignore[arg-type]
                    record_decisions=False, asked=None, max_batch_bytes=max_batch_bytes, ordinal_base=ordinal))
                consumed = len(win.headers)
            yield result
            release_pages(buf, int(h.position[i]), int(h.position[i + consumed - 1]) + int(h.size[i + consumed - 1]))
            ordinal += int(np.maximum(h.recordsCount[i:i + consumed].astype(np.int64), 0).sum())
            i += consumed
    if cache is not None:
        cache.drop_segment(seg.base_offset)
    if stop < n:           # the decoder's refusal of a v0/v1 message, with its message
        yield from read_windows(seg, max_batch_bytes=max_batch_bytes, from_position=int(h.position[stop]))  # type: ignore[misc]  # raises first


__all__ = ["BatchOutput", "WindowOutput", "available", "filter_window", "filtered_windows", "plain_batches"]
