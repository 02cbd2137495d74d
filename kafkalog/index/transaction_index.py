"""The aborted-transaction index (``<base>.txnindex``): one entry per aborted transaction whose
ABORT marker lies in the segment, parsed, checked, searched and written as Kafka does.

Byte layout (Kafka ``AbortedTxn``): no header, never preallocated, fixed 34-byte entries,
big-endian::

    +0   int16  version           0; Kafka reads only the FIRST byte (signed) and rejects > 0
    +2   int64  producerId
    +10  int64  firstOffset       first offset of the transaction (possibly in an earlier segment)
    +18  int64  lastOffset        offset of the ABORT marker; strictly increasing in a file
    +26  int64  lastStableOffset  LSO when the marker was written: first offset of the earliest
                                  other open transaction, else marker offset + 1

A partial trailing entry (fewer than 34 bytes) is ignored, as Kafka's iterator does.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Optional, TYPE_CHECKING, Tuple
if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

import numpy as np

from kafkalog.errors import CorruptIndexError
from kafkalog.index.abstract_index import NAME_HINT, read_index_file
from kafkalog.fs.durable import replace_file
from kafkalog.fs.names import TXN_INDEX_SUFFIX, base_offset_of

TXN_ENTRY_SIZE = 34
VERSION_POS = 0
VERSION_SIZE = 2
PRODUCER_ID_POS = VERSION_POS + VERSION_SIZE
PRODUCER_ID_SIZE = 8
FIRST_OFFSET_POS = PRODUCER_ID_POS + PRODUCER_ID_SIZE
FIRST_OFFSET_SIZE = 8
LAST_OFFSET_POS = FIRST_OFFSET_POS + FIRST_OFFSET_SIZE
LAST_OFFSET_SIZE = 8
LAST_STABLE_OFFSET_POS = LAST_OFFSET_POS + LAST_OFFSET_SIZE
LAST_STABLE_OFFSET_SIZE = 8
assert LAST_STABLE_OFFSET_POS + LAST_STABLE_OFFSET_SIZE == TXN_ENTRY_SIZE

CURRENT_VERSION = 0

#: One on-disk entry as a numpy record. The version is split into the byte Kafka reads and the
#: byte it ignores.
TXN_ENTRY_DTYPE = np.dtype(
    [
        ("version", "i1"),
        ("version_low", "u1"),
        ("producer_id", ">i8"),
        ("first_offset", ">i8"),
        ("last_offset", ">i8"),
        ("last_stable_offset", ">i8"),
    ]
)
assert TXN_ENTRY_DTYPE.itemsize == TXN_ENTRY_SIZE
_ENTRY_STRUCT = struct.Struct(">bBqqqq")
assert _ENTRY_STRUCT.size == TXN_ENTRY_SIZE


@dataclass(frozen=True)
class AbortedTxn:
    """One aborted transaction. ``version`` is the signed first byte, as Kafka reads it."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION


@dataclass(frozen=True)
class TxnIndexSearchResult:
    """Kafka's ``TxnIndexSearchResult``: the matching entries, and whether the search can stop
    here (an entry's lastStableOffset reached the upper bound)."""

    aborted: Tuple[AbortedTxn, ...]
    is_complete: bool


@dataclass(frozen=True)
class TransactionIndex:
    """The entries of one ``.txnindex`` in file order."""

    base_offset: int
    entries: Tuple[AbortedTxn, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_offset", int(self.base_offset))
        object.__setattr__(self, "entries", tuple(self.entries))

    def __len__(self) -> int:
        return len(self.entries)

    def sanity_check(self, path: Optional[os.PathLike | str] = None) -> None:
        """Kafka's ``TransactionIndex.sanityCheck``: every entry's lastOffset must be >= the
        segment's base offset (the broker runs this at startup and recovers the segment if not)."""
        for i, txn in enumerate(self.entries):
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"last offset {txn.last_offset} of aborted transaction {i} (producer "
                    f"{txn.producer_id}) is less than the base offset {self.base_offset}",
                    path=path,
                    position=i * TXN_ENTRY_SIZE,
                )

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> TxnIndexSearchResult:
        """Kafka's ``collectAbortedTxns``: entries with lastOffset >= fetch_offset and
        firstOffset < upper_bound, in file order; the scan stops (``is_complete``) after the first
        entry whose lastStableOffset >= upper_bound, so later segments need not be searched."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return TxnIndexSearchResult(tuple(found), True)
        return TxnIndexSearchResult(tuple(found), False)

    def to_bytes(self) -> bytes:
        """The file content: 34 bytes per entry (the version as its byte followed by 0x00)."""
        out = bytearray()
        for i, t in enumerate(self.entries):
            try:
                out += _ENTRY_STRUCT.pack(
                    t.version, 0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
                )
            except struct.error as exc:
                raise CorruptIndexError(
                    f"aborted transaction {i} ({t}) does not fit the entry layout: {exc}",
                    position=i * TXN_ENTRY_SIZE,
                ) from None
        return bytes(out)


def parse_transaction_index(
    data: ReadableBuffer, base_offset: int, *, path: Optional[os.PathLike | str] = None
) -> TransactionIndex:
    """Decode ``.txnindex`` bytes. A partial trailing entry is ignored; an entry whose version
    byte is > 0 raises :class:`CorruptIndexError` (Kafka throws ``KafkaException`` there)."""
    view = memoryview(data).cast("B")
    whole = view.nbytes - view.nbytes % TXN_ENTRY_SIZE
    raw = np.frombuffer(view[:whole], dtype=TXN_ENTRY_DTYPE)
    bad = np.flatnonzero(raw["version"] > CURRENT_VERSION)
    if bad.size:
        i = int(bad[0])
        raise CorruptIndexError(
            f"unexpected aborted transaction version {int(raw['version'][i])} in entry {i}; "
            f"the current version is {CURRENT_VERSION}",
            path=path,
            position=i * TXN_ENTRY_SIZE,
        )
    entries = tuple(
        AbortedTxn(pid, first, last, lso, version)
        for version, pid, first, last, lso in zip(
            raw["version"].tolist(),
            raw["producer_id"].tolist(),
            raw["first_offset"].tolist(),
            raw["last_offset"].tolist(),
            raw["last_stable_offset"].tolist(),
        )
    )
    return TransactionIndex(int(base_offset), entries)


def read_transaction_index(
    path: os.PathLike | str, *, base_offset: Optional[int] = None
) -> TransactionIndex:
    """Read a ``.txnindex`` file; the base offset comes from its name unless given."""
    if base_offset is None:
        base_offset = base_offset_of(path, TXN_INDEX_SUFFIX, hint=NAME_HINT)
    return parse_transaction_index(read_index_file(path), base_offset, path=path)


def write_transaction_index(path: os.PathLike | str, index: TransactionIndex) -> None:
    """Write the index atomically (``durable.replace_file``)."""
    replace_file(path, index.to_bytes())
