"""The producer state the cleaner needs (``ProducerStateManager`` as far as ``activeProducers`` and
the first unstable offset go), rebuilt offline from batch headers.

Per producer id (batches with producerId >= 0, in log order; ``ProducerAppendInfo.append``):

* data batch (empty or not): epoch := batch epoch (a new epoch forgets the previous data offset),
  lastDataOffset := batch.lastOffset, lastTimestamp := batch.maxTimestamp, and a transactional
  batch opens a transaction at its baseOffset unless one is open;
* control batch with its marker record (an end-transaction marker): epoch := batch epoch (a new
  epoch forgets the data offset), lastTimestamp := the marker's timestamp (= batch.maxTimestamp),
  the open transaction is closed;
* control batch WITHOUT records (emptied by an earlier cleaning): nothing changes — Kafka skips it
  ("the entire transaction has been cleaned from the log"); only an entry for an unknown producer
  is created, as ``ProducerStateEntry.empty`` (epoch -1, timestamp -1, no data offset).

A producer is active unless it has no open transaction and
``now - lastTimestamp >= producer.id.expiration.ms`` (``ProducerStateManager.isProducerExpired``).
APPROXIMATION: a broker drops expired producers only every
``producer.id.expiration.check.interval.ms`` (10 min), so for up to 10 minutes after expiry it
still treats a producer as active; offline the expiry is evaluated exactly at the given ``now_ms``.
The state is seeded as a broker loads it (``ProducerStateManager.truncateAndReload``): from the
newest snapshot in (logStartOffset, logEndOffset], its expired entries dropped, then the batches
from the snapshot's offset are replayed (see ``plan._seed_producer_state``).

The first unstable offset is the smallest first offset of the transactions still open at the
log end (the cleaner never passes it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional

import numpy as np

NO_OFFSET = -1
NO_EPOCH = -1        # RecordBatch.NO_PRODUCER_EPOCH


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int
    last_data_offset: int = NO_OFFSET
    last_timestamp: int = -1
    current_txn_first_offset: int = NO_OFFSET


@dataclass(frozen=True)
class LastRecord:
    """What ``isBatchLastRecordOfProducer`` compares a batch with (``LastRecord``)."""

    last_data_offset: Optional[int]
    producer_epoch: int


def seed_from_snapshot(entries: Iterable, now_ms: Optional[int] = None,
                       expiration_ms: Optional[int] = None) -> Dict[int, ProducerEntry]:
    """Producer entries from ``ProducerSnapshotEntry`` objects (kafkalog.log.producer_snapshot); given
    ``now_ms`` and ``expiration_ms``, the entries expired then are left out, as
    ``ProducerStateManager.loadFromSnapshot`` does."""
    state = {int(e.producer_id): ProducerEntry(int(e.producer_id), int(e.producer_epoch), int(e.last_offset),
                                               int(e.timestamp), int(e.current_txn_first_offset))
             for e in entries}
    if now_ms is not None and expiration_ms is not None:
        state = {p: e for p, e in state.items() if not is_expired(e, now_ms, expiration_ms)}
    return state


def replay(state: Dict[int, ProducerEntry], batches: Mapping, from_offset: Optional[int] = None
           ) -> Dict[int, ProducerEntry]:
    """Apply batch headers (parallel columns as in the scan table: producerId, producerEpoch,
    baseOffset, lastOffset, maxTimestamp, isTransactional, isControl, recordsCount) to ``state`` in
    place. Without a recordsCount column every batch counts as non-empty. ``from_offset``: only the
    batches whose lastOffset >= it (``LogSegment.read(startOffset)`` from a snapshot's offset)."""
    pid = np.asarray(batches["producerId"])
    keep = pid >= 0
    if from_offset is not None:
        keep &= np.asarray(batches["lastOffset"]) >= from_offset
    relevant = np.flatnonzero(keep)
    if not relevant.size:
        return state
    cols = {name: np.asarray(batches[name])[relevant].tolist()
            for name in ("producerId", "producerEpoch", "baseOffset", "lastOffset", "maxTimestamp",
                         "isTransactional", "isControl")}
    counts = (np.asarray(batches["recordsCount"])[relevant].tolist() if "recordsCount" in batches
              else [1] * relevant.size)
    for p, epoch, base, last, ts, txn, control, count in zip(*(cols[n] for n in (
            "producerId", "producerEpoch", "baseOffset", "lastOffset", "maxTimestamp", "isTransactional",
            "isControl")), counts):
        e = state.get(p)
        if control and count == 0:
            # ProducerAppendInfo.append: an empty control batch is not appended; prepareUpdate +
            # update still store ProducerStateEntry.empty for a producer not seen before
            if e is None:
                state[p] = ProducerEntry(p, NO_EPOCH)
            continue
        if e is None:
            e = state[p] = ProducerEntry(p, epoch)
        if e.epoch != epoch:
            e.epoch = epoch
            e.last_data_offset = NO_OFFSET
        e.last_timestamp = ts
        if control:
            e.current_txn_first_offset = NO_OFFSET
        else:
            e.last_data_offset = last
            if txn and e.current_txn_first_offset == NO_OFFSET:
                e.current_txn_first_offset = base
    return state


def is_expired(entry: ProducerEntry, now_ms: int, expiration_ms: int) -> bool:
    return entry.current_txn_first_offset == NO_OFFSET and now_ms - entry.last_timestamp >= expiration_ms


def active_producers(state: Mapping[int, ProducerEntry], now_ms: int, expiration_ms: int) -> Dict[int, LastRecord]:
    """``lastRecordsOfActiveProducers``: producer id → (last data offset or None, epoch)."""
    return {p: LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None, e.epoch)
            for p, e in state.items() if not is_expired(e, now_ms, expiration_ms)}


def first_unstable_offset(state: Mapping[int, ProducerEntry]) -> Optional[int]:
    opened = [e.current_txn_first_offset for e in state.values() if e.current_txn_first_offset >= 0]
    return min(opened) if opened else None
