"""The cleaner's per-batch and per-record decisions and the bytes of a retained batch
(``LogCleaner``'s ``RecordFilter``: ``checkBatchRetention``/``shouldRetainRecord``, and
``MemoryRecords.filterTo``/``buildRetainedRecordsInto`` in ``MemoryRecords.java``, the filter of
``Cleaner.cleanInto`` in ``Cleaner.java``). Pure: bytes in, bytes out.

Per batch (after the transaction tracker classified it as ``can_discard``):

    discardRecords = can_discard                                   data batch
                   = can_discard AND horizon set AND horizon <= now  control batch
    RETAIN_EMPTY   batch has a producer id and is the last batch of an active producer
                   (lastDataOffset == batch.lastOffset, or no data offset and a control batch of
                   the producer's current epoch)
    RETAIN_EMPTY   batch.nextOffset == the partition's high watermark (Kafka 4.4, KAFKA-20452:
                   ``Cleaner.cleanInto`` passes the HW; 3.9-4.3 passed the round's upper bound,
                   KAFKA-17076, which also kept an emptied batch right below an uncleanable segment)
    DELETE         discardRecords (dropped without looking at its records)
    DELETE_EMPTY   dropped only if no record survives

Per record (data batches): offset >= map.end_offset → keep; null key → drop; keep iff
offset >= map[key] (absent: kept) AND (it has a value OR the batch has no delete horizon OR
now < horizon). Control records are kept unless discardRecords.

Writing (magic 2 only):

* all records kept and no horizon to stamp → the ORIGINAL bytes (CRC included);
* some kept → rebuilt: same baseOffset, lastOffsetDelta, magic, codec (default level), timestamp
  type, producerId/epoch, baseSequence, transactional/control flags, partitionLeaderEpoch; record
  offset deltas unchanged; horizon = now + delete.retention.ms when a kept record is a tombstone or
  the batch is a discardable marker and no horizon is set yet (else the existing one is kept);
  baseTimestamp = horizon if set, else first kept record's timestamp; maxTimestamp = max kept
  (CreateTime) or the original (LogAppendTime); record attributes 0; new CRC;
* none kept and RETAIN_EMPTY → the 61-byte empty header (codec none, baseTimestamp -1, original
  maxTimestamp, no horizon flag);
* none kept otherwise → nothing.

Index bookkeeping per output batch (for ``LogSegment.append``): maxOffset = lastOffset for
original/empty batches, the largest KEPT record offset for rebuilt ones; maxTimestamp; and the
batch's lastOffset as the offset of that timestamp.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Tuple

from kafkalog.format import record_batch as rb
from kafkalog.cleaner.source_segments import SourceBatch
from kafkalog.cleaner.offset_map import OffsetMap
from kafkalog.cleaner.producer_state import LastRecord


class BatchRetention(str, enum.Enum):
    DELETE = "DELETE"
    DELETE_EMPTY = "DELETE_EMPTY"
    RETAIN_EMPTY = "RETAIN_EMPTY"


class RecordReason(str, enum.Enum):
    """Why one record was kept or removed (``explain``)."""

    # Kafka's words first (kept / removed — superseded, tombstone past horizon, aborted, marker past
    # horizon), then why; ``--explain`` prints them as they are.
    KEPT_LATEST = "kept — the latest record of its key in the cleaned range"
    KEPT_NOT_IN_MAP = "kept — its key has no later record in the dirty range"
    KEPT_BEYOND_MAP = "kept — at or past the round's upper bound, not cleaned this round"
    KEPT_TOMBSTONE = "kept — the latest tombstone of its key, its delete horizon not reached (delete.retention.ms)"
    KEPT_CONTROL = "kept — transaction marker, still needed or not past its delete horizon"
    REMOVED_SUPERSEDED = "removed — superseded: a later record has the same key"
    REMOVED_NULL_KEY = "removed — null key (invalid in a compacted topic)"
    REMOVED_TOMBSTONE_EXPIRED = "removed — tombstone past horizon: past its delete horizon (delete.retention.ms)"
    REMOVED_ABORTED = "removed — aborted: data of an aborted transaction"
    REMOVED_MARKER = "removed — marker past horizon: a transaction marker past its delete horizon, its data gone"

    @property
    def kept(self) -> bool:
        return self.name.startswith("KEPT")


@dataclass(frozen=True)
class BatchDecision:
    """``checkBatchRetention``'s verdict."""

    retention: BatchRetention
    discard_records: bool
    contains_marker_for_empty_txn: bool
    reason: str


@dataclass
class FilterCounts:
    """Audit numbers (summed over batches, segments, partitions)."""

    batches_read: int = 0
    batches_copied: int = 0          # original bytes kept
    batches_rewritten: int = 0       # rebuilt with fewer records or a new horizon
    batches_emptied: int = 0         # kept as a 61-byte empty batch
    batches_removed: int = 0
    records_read: int = 0
    records_kept: int = 0
    records_superseded: int = 0
    records_null_key: int = 0
    tombstones_kept: int = 0
    tombstones_removed: int = 0      # latest tombstones past their horizon
    aborted_records_removed: int = 0
    markers_kept: int = 0
    markers_removed: int = 0
    horizons_stamped: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    def add(self, other: "FilterCounts") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass
class FilteredBatch:
    """One source batch after filtering: its output bytes (b"" when dropped) and why."""

    base_offset: int
    last_offset: int
    decision: BatchDecision
    output: bytes
    verbatim: bool
    delete_horizon_ms: Optional[int]
    max_offset: int                  # for the index (see module doc); -1 when nothing is written
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    decisions: List[Tuple[int, RecordReason]] = field(default_factory=list)
    counts: FilterCounts = field(default_factory=FilterCounts)


# The verdict of every data batch outside a transaction that is not an active producer's last nor
# the last before the high watermark: the common case, which the fast filter takes without the call.
DELETE_IF_EMPTY = BatchDecision(BatchRetention.DELETE_EMPTY, False, False, "dropped only if no record survives")


def is_batch_last_record_of_producer(header: rb.BatchHeader, active: Mapping[int, LastRecord]) -> bool:
    last = active.get(header.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return header.last_offset == last.last_data_offset
    return header.is_control and header.producer_epoch == last.producer_epoch


def check_batch_retention(header: rb.BatchHeader, *, can_discard_batch: bool, is_last_of_active_producer: bool,
                          high_watermark: int, now_ms: int) -> BatchDecision:
    """``checkBatchRetention`` (``Cleaner.cleanInto``'s filter) for one batch already classified by the transaction tracker."""
    horizon = header.delete_horizon_ms
    if header.is_control:
        discard = can_discard_batch and horizon is not None and horizon <= now_ms
    else:
        discard = can_discard_batch
    marker_for_empty_txn = can_discard_batch and header.is_control
    if header.producer_id != rb.NO_PRODUCER_ID and is_last_of_active_producer:
        return BatchDecision(BatchRetention.RETAIN_EMPTY, discard, marker_for_empty_txn,
                             f"last batch of active producer {header.producer_id}: kept, empty if no record survives")
    if header.last_offset + 1 == high_watermark:
        return BatchDecision(BatchRetention.RETAIN_EMPTY, discard, marker_for_empty_txn,
                             f"last batch before the high watermark {high_watermark}: kept, empty if "
                             "no record survives")
    if discard:
        why = ("transaction marker past its delete horizon" if header.is_control
               else f"aborted transactional data of producer {header.producer_id}")
        return BatchDecision(BatchRetention.DELETE, discard, marker_for_empty_txn, f"dropped: {why}")
    if not discard and not marker_for_empty_txn:
        return DELETE_IF_EMPTY
    return BatchDecision(BatchRetention.DELETE_EMPTY, discard, marker_for_empty_txn,
                         "dropped only if no record survives")


def record_decision(header: rb.BatchHeader, offset: int, key: Optional[bytes], value: Optional[bytes],
                    offset_map: OffsetMap, now_ms: int) -> RecordReason:
    """``Cleaner.shouldRetainRecord`` for a data record of a batch whose records are not discarded."""
    if offset >= offset_map.end_offset:
        return RecordReason.KEPT_BEYOND_MAP
    if key is None:
        return RecordReason.REMOVED_NULL_KEY
    found = offset_map.latest_offset(key)
    if found is not None and offset < found:
        return RecordReason.REMOVED_SUPERSEDED
    if value is None:
        horizon = header.delete_horizon_ms
        if horizon is not None and now_ms >= horizon:
            return RecordReason.REMOVED_TOMBSTONE_EXPIRED
        return RecordReason.KEPT_TOMBSTONE
    return RecordReason.KEPT_LATEST if found is not None else RecordReason.KEPT_NOT_IN_MAP


def filter_batch(batch: SourceBatch, *, can_discard_batch: bool, is_last_of_active_producer: bool,
                 high_watermark: int, offset_map: OffsetMap, now_ms: int, delete_retention_ms: int,
                 record_decisions: bool = True) -> FilteredBatch:
    """Filter one v2 batch (``MemoryRecords.filterBatch``)."""
    h = batch.header
    decision = check_batch_retention(h, can_discard_batch=can_discard_batch,
                                     is_last_of_active_producer=is_last_of_active_producer,
                                     high_watermark=high_watermark, now_ms=now_ms)
    c = FilterCounts(batches_read=1, records_read=len(batch.records), bytes_read=batch.size)
    reasons: List[Tuple[int, RecordReason]] = []
    kept = []
    if decision.retention is BatchRetention.DELETE or decision.discard_records:
        why = RecordReason.REMOVED_MARKER if h.is_control else RecordReason.REMOVED_ABORTED
        for r in batch.records:
            reasons.append((r.offset, why))
        if h.is_control:
            c.markers_removed += len(batch.records)
        else:
            c.aborted_records_removed += len(batch.records)
    else:
        for r in batch.records:
            why = RecordReason.KEPT_CONTROL if h.is_control else \
                record_decision(h, r.offset, r.key, r.value, offset_map, now_ms)
            reasons.append((r.offset, why))
            if why.kept:
                kept.append(r)
                if h.is_control:
                    c.markers_kept += 1
                elif r.value is None:
                    c.tombstones_kept += 1
            elif why is RecordReason.REMOVED_SUPERSEDED:
                c.records_superseded += 1
            elif why is RecordReason.REMOVED_NULL_KEY:
                c.records_null_key += 1
            elif why is RecordReason.REMOVED_TOMBSTONE_EXPIRED:
                c.tombstones_removed += 1
    c.records_kept = len(kept)
    if not record_decisions:
        reasons = []

    horizon = h.delete_horizon_ms
    if kept:
        contains_tombstones = any(r.value is None for r in kept) and not h.is_control
        need_horizon = (contains_tombstones or decision.contains_marker_for_empty_txn) and horizon is None
        if len(kept) == len(batch.records) and not need_horizon:
            c.batches_copied += 1
            c.bytes_written += batch.size
            return FilteredBatch(h.base_offset, h.last_offset, decision, batch.raw, True, horizon, h.last_offset,
                                 h.max_timestamp, h.last_offset, reasons, c)
        if need_horizon:
            horizon = now_ms + delete_retention_ms
            c.horizons_stamped += 1
        log_append = h.timestamp_type == rb.LOG_APPEND_TIME
        records = [rb.V2Record(r.offset, h.max_timestamp if log_append else r.timestamp, r.key, r.value, r.headers)
                   for r in kept]
        out = rb.encode_batch(records, base_offset=h.base_offset, last_offset_delta=h.last_offset_delta,
                              codec=h.codec, timestamp_type=h.timestamp_type, transactional=h.is_transactional,
                              control=h.is_control, delete_horizon_ms=horizon, producer_id=h.producer_id,
                              producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                              partition_leader_epoch=h.partition_leader_epoch,
                              max_timestamp=h.max_timestamp if log_append else None)
        max_ts = h.max_timestamp if log_append else max(r.timestamp for r in records)
        c.batches_rewritten += 1
        c.bytes_written += len(out)
        return FilteredBatch(h.base_offset, h.last_offset, decision, out, False, horizon,
                             max(r.offset for r in kept), max_ts, h.last_offset, reasons, c)
    if decision.retention is BatchRetention.RETAIN_EMPTY:
        out = rb.encode_batch([], base_offset=h.base_offset, last_offset_delta=h.last_offset_delta, codec=0,
                              timestamp_type=h.timestamp_type, transactional=h.is_transactional,
                              control=h.is_control, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                              base_sequence=h.base_sequence, partition_leader_epoch=h.partition_leader_epoch,
                              max_timestamp=h.max_timestamp)
        verbatim = out == batch.raw
        c.batches_emptied += 1
        c.bytes_written += len(out)
        return FilteredBatch(h.base_offset, h.last_offset, decision, out, verbatim, None, h.last_offset,
                             h.max_timestamp, h.last_offset, reasons, c)
    c.batches_removed += 1
    return FilteredBatch(h.base_offset, h.last_offset, decision, b"", False, None, -1, rb.NO_TIMESTAMP, -1,
                         reasons, c)
