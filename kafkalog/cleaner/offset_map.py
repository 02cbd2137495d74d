"""The key → latest offset map of one cleaning round (``SkimpyOffsetMap`` and
``Cleaner.buildOffsetMap``, Kafka's ``SkimpyOffsetMap.java`` and
``Cleaner.java``), exact instead of Kafka's MD5 table.

Which records enter the map (dirty range [firstDirty, upperBound), batches in log order, the first
segment read from ``offsetIndex.lookup(firstDirty).position``):

* control batches: only update the transaction tracker (their keys never enter);
* transactional data batches of an aborted transaction (known from the ``.txnindex`` entries
  collected for [firstDirty, upperBound)) are skipped;
* every other record with a NON-NULL key and offset >= firstDirty: map[key] = offset (later
  records overwrite earlier ones: the map holds each exact key's LATEST offset).

This dict is the reference engine's map (and the twin the tests compare against). The fast
engine's map is compiled and bounded by ``log.cleaner.dedupe.buffer.size`` (``key_map``,
``key_walk``): the same exact keys, and where Kafka's full map ends the round early, hash-slice
passes clean the whole range, so ``end_offset`` (the new cleaner checkpoint) is always the upper
bound in both.

The map is an object with ``latest_offset(key) -> int | None`` and ``end_offset`` (``OffsetMap``);
a caller that computed the map elsewhere passes ``ExactOffsetMap.from_mapping(mapping, end_offset=…)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, Optional, Protocol, Tuple

from kafkalog.cleaner.source_segments import SourceBatch
from kafkalog.cleaner.transaction_metadata import CleanedTransactionMetadata


class OffsetMap(Protocol):
    """Kafka's ``OffsetMap`` interface (``OffsetMap.java``), as much of it as the record filter needs:
    ``latest_offset`` is its ``get``, ``end_offset`` the round's end (Kafka's ``latestOffset`` + 1 in
    ``Cleaner.doClean``). Implemented by :class:`ExactOffsetMap`; the compiled engine's bounded table,
    in ``SkimpyOffsetMap``'s role, is ``key_map.KeyMap``."""

    end_offset: int           # exclusive: records at or beyond it are not covered (kept)

    def latest_offset(self, key: bytes) -> Optional[int]:
        ...


@dataclass
class ExactOffsetMap(OffsetMap):
    """An :class:`OffsetMap` over a dict of exact key bytes, unbounded: the reference engine's map (like
    the ``FakeOffsetMap`` of Kafka's ``LogCleanerTest``, a hash map, where ``SkimpyOffsetMap`` keeps
    MD5 digests in a fixed buffer). ``end_offset`` = the round's upper bound (exclusive)."""

    end_offset: int
    offsets: Dict[bytes, int] = field(default_factory=dict)

    def latest_offset(self, key: bytes) -> Optional[int]:
        return self.offsets.get(key)

    def put(self, key: bytes, offset: int) -> None:
        self.offsets[key] = offset

    def __len__(self) -> int:
        return len(self.offsets)

    @classmethod
    def from_mapping(cls, mapping, *, end_offset: int) -> "ExactOffsetMap":
        return cls(end_offset, {bytes(k): int(v) for k, v in mapping.items()})


def map_entries(batches: Iterable[SourceBatch], tracker: CleanedTransactionMetadata,
                first_dirty_offset: int) -> Iterator[Tuple[bytes, int]]:
    """The (key, offset) pairs that enter the map, in log order (``Cleaner.buildOffsetMapForSegment``). ``tracker`` holds the
    aborted transactions collected for the dirty range."""
    for batch in batches:
        h = batch.header
        if h.is_control:
            tracker.on_control_batch(h.producer_id, h.last_offset, batch.control_type)
            continue
        if tracker.on_data_batch(h.producer_id, h.last_offset, h.is_transactional):
            continue
        for r in batch.records:
            if r.key is not None and r.offset >= first_dirty_offset:
                yield r.key, r.offset


def build_offset_map(batches: Iterable[SourceBatch], tracker: CleanedTransactionMetadata, *,
                     first_dirty_offset: int, upper_bound_offset: int) -> ExactOffsetMap:
    """Build the exact map over the dirty range (batches past ``upper_bound_offset`` must not be
    passed)."""
    m = ExactOffsetMap(upper_bound_offset)
    for key, offset in map_entries(batches, tracker, first_dirty_offset):
        m.offsets[key] = offset
    return m
