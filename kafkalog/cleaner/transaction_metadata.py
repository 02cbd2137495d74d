"""What the cleaner knows about transactions while it walks batches (``CleanedTransactionMetadata``, Kafka's
``CleanedTransactionMetadata.java``): which transactional data is aborted, and whether a transaction marker
may be dropped.

The cleaner learns that a transaction was aborted ONLY from the ``.txnindex`` entries
(``AbortedTxn``: producerId, firstOffset, lastOffset = ABORT marker offset, lastStableOffset)
collected for the segments it reads; ABORT markers themselves never reveal aborted data.

Walk rules, batch by batch in log order:

* before each batch, every collected aborted transaction with firstOffset <= batch.lastOffset
  becomes "ongoing aborted" for its producer (``consumeAbortedTxnsUpTo``);
* data batch: transactional and its producer has an ongoing aborted transaction → aborted
  (discardable; the transaction is noted as observed in this pass); transactional otherwise →
  the producer has an ongoing committed transaction;
* ABORT marker: ends the producer's ongoing aborted transaction; discardable unless batches of that
  transaction were observed in this pass (then kept, and its AbortedTxn is re-recorded in the
  cleaned segment's ``.txnindex``);
* COMMIT marker: discardable unless batches of the transaction were observed in this pass;
* other control records: never discardable; a control batch with no record: discardable.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

from kafkalog.format import control_record as cr
from kafkalog.index.transaction_index import AbortedTxn


@dataclass
class _AbortedTxnMetadata:
    txn: AbortedTxn
    last_observed_batch_offset: Optional[int] = None


@dataclass
class CleanedTransactionMetadata:
    """The transaction tracker of one cleaning pass: one per map build, and one per cleaning round
    carried through every segment group in order (``Cleaner.doClean`` passes the same tracker to each
    group's ``cleanSegments``), so a marker whose transaction's data sits in an earlier group is
    judged by that data. Only ``cleaned_index`` is per group (``start_cleaned_segment``)."""

    _pending: List[Tuple[int, int, int, int, AbortedTxn]] = field(default_factory=list)
    _seen: Set[Tuple[int, int, int]] = field(default_factory=set)
    _ongoing_committed: Set[int] = field(default_factory=set)
    _ongoing_aborted: Dict[int, _AbortedTxnMetadata] = field(default_factory=dict)
    cleaned_index: List[AbortedTxn] = field(default_factory=list)   # entries for the cleaned .txnindex

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        """Queue aborted transactions (ordered by first offset). The same entry collected again for
        a later source segment is queued once; Kafka queues it twice with the same effect."""
        for t in txns:
            ident = (t.producer_id, t.first_offset, t.last_offset)
            if ident in self._seen:
                continue
            self._seen.add(ident)
            heapq.heappush(self._pending, (t.first_offset, t.last_offset, t.producer_id, len(self._seen), t))

    def start_cleaned_segment(self) -> List[AbortedTxn]:
        """A new cleaned segment (group) begins: later ABORT markers kept go to its fresh ``.txnindex``
        entry list, which is returned (Kafka's ``setCleanedIndex``). Ongoing transactions carry on."""
        self.cleaned_index = []
        return self.cleaned_index

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            t = heapq.heappop(self._pending)[-1]
            self._ongoing_aborted.setdefault(t.producer_id, _AbortedTxnMetadata(t))

    def on_control_batch(self, producer_id: int, last_offset: int, control_type: Optional[int]) -> bool:
        """A control batch was read; ``control_type`` is its record's type (None: no record).
        Returns whether the batch may be discarded."""
        self._consume_up_to(last_offset)
        if control_type is None:
            return True
        if control_type == cr.ABORT:
            meta = self._ongoing_aborted.pop(producer_id, None)
            if meta is not None and meta.last_observed_batch_offset is not None:
                self.cleaned_index.append(meta.txn)
                return False
            return True
        if control_type == cr.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_data_batch(self, producer_id: int, last_offset: int, is_transactional: bool) -> bool:
        """A data batch was read. Returns whether it belongs to an aborted transaction."""
        self._consume_up_to(last_offset)
        if not is_transactional:
            return False
        meta = self._ongoing_aborted.get(producer_id)
        if meta is not None:
            meta.last_observed_batch_offset = last_offset
            return True
        self._ongoing_committed.add(producer_id)
        return False
