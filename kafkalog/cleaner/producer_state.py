"""The producer state the cleaner needs (``ProducerStateManager`` as far as ``activeProducers`` and
the first unstable offset go), rebuilt offline from batch headers.

Per producer id (batches with producerId >= 0, in log order):

* data batch: epoch := batch epoch (a new epoch forgets the previous data offset),
  lastDataOffset := batch.lastOffset, lastTimestamp := batch.maxTimestamp, and a transactional
  batch opens a transaction at its baseOffset unless one is open;
* control batch (an end-transaction marker): epoch := batch epoch (a new epoch forgets the data
  offset), lastTimestamp := batch.maxTimestamp, the open transaction is closed.

A producer is active unless it has no open transaction and
``now - lastTimestamp >= producer.id.expiration.ms`` (``ProducerStateManager.isProducerExpired``).
APPROXIMATION: a broker drops expired producers only every
``producer.id.expiration.check.interval.ms`` (10 min), so for up to 10 minutes after expiry it
still treats a producer as active; offline the expiry is evaluated exactly at the given ``now_ms``.
The state can be seeded with a producer snapshot taken at or before the first segment.

The first unstable offset is the smallest first offset of the transactions still open at the
log end (the cleaner never passes it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional

import numpy as np

NO_OFFSET = -1


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


def seed_from_snapshot(entries: Iterable) -> Dict[int, ProducerEntry]:
    """Producer entries from ``ProducerSnapshotEntry`` objects (kafkalog.producer_snapshot)."""
    return {int(e.producer_id): ProducerEntry(int(e.producer_id), int(e.producer_epoch), int(e.last_offset),
                                              int(e.timestamp), int(e.current_txn_first_offset))
            for e in entries}


def replay(state: Dict[int, ProducerEntry], batches: Mapping) -> Dict[int, ProducerEntry]:
    """Apply batch headers (parallel columns as in the scan table: producerId, producerEpoch,
    baseOffset, lastOffset, maxTimestamp, isTransactional, isControl) to ``state`` in place."""
    pid = np.asarray(batches["producerId"])
    relevant = np.flatnonzero(pid >= 0)
    if not relevant.size:
        return state
    cols = {name: np.asarray(batches[name])[relevant].tolist()
            for name in ("producerId", "producerEpoch", "baseOffset", "lastOffset", "maxTimestamp",
                         "isTransactional", "isControl")}
    for p, epoch, base, last, ts, txn, control in zip(*(cols[n] for n in (
            "producerId", "producerEpoch", "baseOffset", "lastOffset", "maxTimestamp", "isTransactional",
            "isControl"))):
        e = state.get(p)
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
