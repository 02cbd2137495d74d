"""What index verification decides and reads (``kafkalog.index.verify`` describes the rules): the
verdict types, a segment's valid batches that every index is judged against, and the opening every
verifier shares (reading slots, the active segment's zero tail, the first entry breaking a rule)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from kafkalog.errors import KafkalogError
from kafkalog.format import control_record as cr
from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES
from kafkalog.format.file_records import recovery_valid_bytes, scan_buffer
from kafkalog.format.records_reference import decode_v2_batch
from kafkalog.index.abstract_index import valid_prefix
from kafkalog.index.offset_index import OffsetIndex
from kafkalog.index.time_index import TimeIndex
from kafkalog.index.transaction_index import TransactionIndex
from kafkalog.fs import filesystem

IDENTICAL, VALID, MISSING, CORRUPT = "identical", "valid", "missing", "corrupt"
CLASSES = (IDENTICAL, VALID, MISSING, CORRUPT)
OFFSET_INDEX, TIME_INDEX, TXN_INDEX = "index", "timeindex", "txnindex"
INDEX_KINDS = (OFFSET_INDEX, TIME_INDEX, TXN_INDEX)
DEFAULT_SEGMENT_INDEX_BYTES = 10_485_760


# --- data structures -------------------------------------------------------------------------

@dataclass(frozen=True)
class IndexVerdict:
    """The class of one index file. ``entries`` counts the entries read (an active segment's valid
    prefix); ``expected_entries`` those of the rebuild (None when the log allows none)."""

    kind: str                           # index / timeindex / txnindex
    path: Path
    status: str                         # one of CLASSES
    reason: str
    file_size: Optional[int]            # None when missing
    entries: int = 0
    expected_entries: Optional[int] = None
    first_bad_entry: Optional[int] = None
    first_bad_position: Optional[int] = None


@dataclass(frozen=True)
class LogTail:
    """Where the ``.log``'s valid bytes end (recovery truncates there) and why."""

    size: int
    valid_bytes: int
    error: Optional[str] = None
    kafka_keeps_tail: bool = False      # Kafka's recovery keeps bytes past where our walk stopped
    recovery_valid_bytes: Optional[int] = None   # where Kafka's recovery truncates (file_records)

    @property
    def corrupt(self) -> bool:
        return self.valid_bytes < self.size

    @property
    def first_bad_position(self) -> Optional[int]:
        return self.valid_bytes if self.corrupt else None


@dataclass
class SegmentVerification:
    """The verdicts for one segment, and the rebuilt indexes (None when the log forbids a rebuild:
    ``rebuild_error`` says why: offsets beyond 32 bits of the base, which Kafka's recovery splits
    into new segments, or offsets that make it empty the segment)."""

    log_path: Path
    base_offset: int
    is_active: bool
    log: LogTail
    verdicts: List[IndexVerdict]
    offset_index: Optional[OffsetIndex] = None
    time_index: Optional[TimeIndex] = None
    txn_index: Optional[TransactionIndex] = None
    rebuild_error: Optional[str] = None
    open_txns_after: Dict[int, int] = field(default_factory=dict)
    txn_state_known_after: bool = True
    txn_state_known: bool = True     # the producer state at the segment's start was complete

    def verdict(self, kind: str) -> Optional[IndexVerdict]:
        return next((v for v in self.verdicts if v.kind == kind), None)


@dataclass
class Batches:
    """The valid batches of a segment as int64 arrays (file order)."""

    position: np.ndarray
    size: np.ndarray
    base: np.ndarray
    last: np.ndarray
    max_ts: np.ndarray
    magic: np.ndarray
    producer_id: np.ndarray
    is_txn: np.ndarray
    is_control: np.ndarray
    control_type: np.ndarray

    @property
    def n(self) -> int:
        return int(self.position.shape[0])

    def first_offsets(self) -> np.ndarray:
        """The first offset each batch covers: v2 baseOffset; legacy: one past the previous batch."""
        prev = np.concatenate(([np.iinfo(np.int64).min // 2], self.last[:-1] + 1)) if self.n else self.last
        return np.where(self.magic == 2, self.base, prev)


@dataclass(frozen=True)
class OpenedIndex:
    """An index file's bytes and the slots that count as its entries (an active segment's valid prefix)."""

    data: bytes
    slots: np.ndarray
    entries: int
    padding_note: Optional[str]     # an active segment's zero tail, described for the verdict


# --- reading the log -------------------------------------------------------------------------

def read_log(log_path: Path) -> Tuple[Batches, LogTail]:
    with filesystem.open_view(log_path) as f:
        scan = scan_buffer(f.array, path=log_path, verify_crc=True, on_corrupt="stop")
        kafka_end = scan.valid_bytes if scan.error is None else recovery_valid_bytes(f.array, path=log_path)[0]
        t = scan.batches
        col = {name: t.column(name).to_numpy(zero_copy_only=False) for name in
               ("position", "size", "baseOffset", "lastOffset", "maxTimestamp", "magic", "producerId",
                "isTransactional", "isControl")}
        control_type = np.full(t.num_rows, -1, np.int64)
        for i in np.flatnonzero(col["isControl"]).tolist():
            try:
                _, records = decode_v2_batch(f.array, int(col["position"][i]), path=log_path,
                                             max_batch_bytes=DEFAULT_MAX_BATCH_BYTES)
                if records:
                    control_type[i] = cr.parse_control_type(records[0].key)
            except KafkalogError:
                control_type[i] = cr.UNKNOWN
    batches = Batches(
        position=col["position"].astype(np.int64), size=col["size"].astype(np.int64),
        base=col["baseOffset"].astype(np.int64), last=col["lastOffset"].astype(np.int64),
        max_ts=col["maxTimestamp"].astype(np.int64), magic=col["magic"].astype(np.int64),
        producer_id=col["producerId"].astype(np.int64), is_txn=col["isTransactional"].astype(bool),
        is_control=col["isControl"].astype(bool), control_type=control_type)
    error = None if scan.error is None else str(scan.error.message if isinstance(scan.error, KafkalogError)
                                                 else scan.error)
    tail = LogTail(size=scan.file_size, valid_bytes=scan.valid_bytes, error=error,
                   kafka_keeps_tail=kafka_end > scan.valid_bytes, recovery_valid_bytes=kafka_end)
    return batches, tail


# --- what every verifier opens with ----------------------------------------------------------

def read_slots(path: Path, dtype: np.dtype, entry_size: int,
               kind: str) -> Tuple[bytes, np.ndarray, Optional[IndexVerdict]]:
    """(raw bytes, slots array, None), or (raw bytes, no slots, a corrupt verdict) for a length that is not
    a multiple of the entry."""
    data = filesystem.read_bytes(path)
    if len(data) % entry_size:
        whole = len(data) // entry_size
        return data, np.empty(0, dtype), IndexVerdict(
            kind, path, CORRUPT,
            f"file size {len(data)} bytes is not a multiple of the {entry_size}-byte entry: a partial entry of "
            f"{len(data) % entry_size} bytes at the end (Kafka's sanity check rejects it)",
            len(data), whole, first_bad_entry=whole, first_bad_position=whole * entry_size)
    return data, np.frombuffer(data, dtype=dtype), None


def active_prefix(path: Path, kind: str, data: bytes, slots: np.ndarray, n_valid: int, entry_size: int,
                   segment_index_bytes: int) -> Tuple[Optional[IndexVerdict], Optional[str]]:
    """For an active segment: every byte after the valid prefix must be zero. Returns (corrupt verdict,
    padding note)."""
    tail = np.frombuffer(data, dtype=np.uint8)[n_valid * entry_size:]
    if tail.size == 0:
        return None, None
    nonzero = np.flatnonzero(tail)
    if nonzero.size:
        slot = n_valid + int(nonzero[0]) // entry_size
        return IndexVerdict(
            kind, path, CORRUPT,
            f"slot {slot} holds data after the zero slot {n_valid} that ends the active segment's entries "
            "(a torn preallocated file; a broker rebuilds the active segment after an unclean shutdown)",
            len(data), n_valid, first_bad_entry=slot, first_bad_position=slot * entry_size), None
    prealloc = (segment_index_bytes // entry_size) * entry_size
    size_note = "preallocated to segment.index.bytes" if len(data) == prealloc else f"zero-padded to {len(data)} bytes"
    return None, (f"active segment's file is {size_note} ({len(slots) - n_valid} zero slots after {n_valid} "
                  "entries), as while a broker owns it")


def first_true(mask: np.ndarray) -> Optional[int]:
    hit = np.flatnonzero(mask)
    return int(hit[0]) if hit.size else None


def with_expected(v: IndexVerdict, expected: Optional[int]) -> IndexVerdict:
    return IndexVerdict(v.kind, v.path, v.status, v.reason, v.file_size, v.entries, expected, v.first_bad_entry,
                        v.first_bad_position)


def first_violation(rules: Iterable[Tuple[np.ndarray, Callable[[int], str]]], n: int) -> Optional[Tuple[int, str]]:
    """The smallest entry breaking any rule, with the message of the first rule it breaks."""
    best = None
    for mask, _ in rules:
        i = first_true(mask[:n]) if n else None
        if i is not None and (best is None or i < best):
            best = i
    if best is None:
        return None
    for mask, message in rules:
        if mask[best]:
            return best, message(best)
    return None  # pragma: no cover


def open_index(path: Path, kind: str, dtype: np.dtype, second_field: str, *, expected: Optional[int], missing: str,
               is_active: bool, segment_index_bytes: int, rebuilt: Optional[bytes]) -> Union[IndexVerdict, OpenedIndex]:
    """The opening the offset and time index verifiers share: a verdict when the file is missing
    (``missing`` says what a broker does then), has a partial entry, has data after an active
    segment's zero tail, or is byte-identical to the ``rebuilt`` file; else the entries to check."""
    if not filesystem.exists(path):
        return IndexVerdict(kind, path, MISSING, missing, None, 0, expected)
    data, slots, bad = read_slots(path, dtype, dtype.itemsize, kind)
    if bad is not None:
        return with_expected(bad, expected)
    n, padding_note = len(slots), None
    if is_active:
        n = valid_prefix(slots["relative_offset"].astype(np.int64), slots[second_field].astype(np.int64))
        bad, padding_note = active_prefix(path, kind, data, slots, n, dtype.itemsize, segment_index_bytes)
        if bad is not None:
            return with_expected(bad, expected)
    if rebuilt is not None and data == rebuilt:
        return IndexVerdict(kind, path, IDENTICAL, "byte-identical to Kafka's recovery rebuild", len(data), n,
                            expected)
    return OpenedIndex(data, slots[:n], n, padding_note)
