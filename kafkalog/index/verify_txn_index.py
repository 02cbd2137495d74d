"""Verifying a segment's transaction index (``.txnindex``): rebuilding it by replaying producer state
from the segment's start, and judging the file against that rebuild (rules in
``kafkalog.index.verify``'s docstring)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple

import numpy as np

from kafkalog.errors import KafkalogError
from kafkalog.format import control_record as cr
from kafkalog.index.builder import replay_transactions
from kafkalog.index.transaction_index import TXN_ENTRY_SIZE, TransactionIndex, parse_transaction_index
from kafkalog.index.verdicts import CORRUPT, IDENTICAL, MISSING, TXN_INDEX, VALID, Batches, IndexVerdict
from kafkalog.fs.names import format_segment_file_name
from kafkalog.fs import filesystem


def _txn_columns(b: Batches, stop: Optional[int] = None) -> dict:
    s = slice(0, stop)
    return dict(base_offset=b.base[s], producer_id=b.producer_id[s], is_transactional=b.is_txn[s],
                is_control=b.is_control[s], control_type=b.control_type[s])


def rebuild_txn_index(base: int, b: Batches, folder: Path, open_txns: Optional[Mapping[int, int]],
                      known: bool) -> Tuple[TransactionIndex, Dict[int, int], bool, set]:
    """(rebuilt index, open transactions after, state known after, markers kept from the file)."""
    start = dict(open_txns or {})
    try:
        aborted, open_after = replay_transactions(batches=_txn_columns(b), open_txn_first_offsets=start)
    except KafkalogError:
        aborted, open_after = (), dict(start)
    kept: set = set()
    path = folder / format_segment_file_name(base, TXN_INDEX)
    if not known and filesystem.exists(path):
        # Entries for markers whose transaction began before the known state: keep them.
        try:
            existing = parse_transaction_index(filesystem.read_bytes(path), base, path=path)
        except KafkalogError:
            existing = None
        if existing is not None:
            found = {(t.producer_id, t.last_offset) for t in aborted}
            extra = []
            for t in existing.entries:
                if (t.producer_id, t.last_offset) in found:
                    continue
                i = _marker_index(b, t.producer_id, t.last_offset)
                if i is None or b.control_type[i] != cr.ABORT:
                    continue
                _, before = replay_transactions(batches=_txn_columns(b, i), open_txn_first_offsets=start)
                if t.producer_id not in before:
                    extra.append(t)
                    kept.add((t.producer_id, t.last_offset))
            if extra:
                aborted = tuple(sorted(list(aborted) + extra, key=lambda t: t.last_offset))
    return TransactionIndex(base, aborted), open_after, known, kept


def _marker_index(b: Batches, producer_id: int, offset: int) -> Optional[int]:
    hit = np.flatnonzero(b.is_control & (b.base == offset) & (b.producer_id == producer_id))
    return int(hit[0]) if hit.size else None


def verify_txn_index(path: Path, base: int, b: Batches, rebuilt: TransactionIndex, known: bool,
                      kept: set) -> Optional[IndexVerdict]:
    expected = len(rebuilt)
    if not filesystem.exists(path):
        if expected == 0:
            return None
        return IndexVerdict(TXN_INDEX, path, MISSING,
                            f"no .txnindex although {expected} aborted transaction(s) end in this segment: "
                            "read_committed consumers would get their records", None, 0, expected)
    data = filesystem.read_bytes(path)
    if data == rebuilt.to_bytes():
        note = f" ({len(kept)} entries kept for transactions that began before the known producer state)" if kept else ""
        return IndexVerdict(TXN_INDEX, path, IDENTICAL, "byte-identical to Kafka's recovery rebuild" + note,
                            len(data), expected, expected)
    whole = len(data) // TXN_ENTRY_SIZE
    try:
        index = parse_transaction_index(data, base, path=path)
    except KafkalogError as exc:
        i = (exc.position or 0) // TXN_ENTRY_SIZE
        return IndexVerdict(TXN_INDEX, path, CORRUPT, f"entry {i}: {exc.message}", len(data), whole, expected,
                            first_bad_entry=i, first_bad_position=i * TXN_ENTRY_SIZE)
    entries = index.entries
    log_last = int(b.last[-1]) if b.n else base - 1
    expected_by_marker = {(t.producer_id, t.last_offset): t for t in rebuilt.entries}
    prev_last = None
    for i, t in enumerate(entries):
        problem = None
        if t.last_offset < base:
            problem = f"last offset {t.last_offset} is below the base offset {base} (Kafka's startup sanity check fails)"
        elif t.last_offset > log_last:
            problem = f"last offset {t.last_offset} is past the log's last offset {log_last}"
        elif prev_last is not None and t.last_offset <= prev_last:
            problem = f"last offset {t.last_offset} is not above the previous entry's {prev_last} (out of order)"
        elif t.first_offset > t.last_offset:
            problem = f"first offset {t.first_offset} is above the last offset {t.last_offset}"
        else:
            m = _marker_index(b, t.producer_id, t.last_offset)
            if m is None or b.control_type[m] != cr.ABORT:
                problem = f"there is no ABORT marker of producer {t.producer_id} at offset {t.last_offset}"
            elif known:
                want = expected_by_marker.get((t.producer_id, t.last_offset))
                if want is None:
                    problem = (f"the ABORT marker at {t.last_offset} ends a transaction with no data, which Kafka "
                               "does not index")
                elif (want.first_offset, want.last_stable_offset) != (t.first_offset, t.last_stable_offset):
                    problem = (f"first/last stable offset {t.first_offset}/{t.last_stable_offset}, the producer "
                               f"state gives {want.first_offset}/{want.last_stable_offset}")
        prev_last = t.last_offset
        if problem:
            return IndexVerdict(TXN_INDEX, path, CORRUPT, f"entry {i}: {problem}", len(data), len(entries), expected,
                                first_bad_entry=i, first_bad_position=i * TXN_ENTRY_SIZE)
    present = {(t.producer_id, t.last_offset) for t in entries}
    for k, want in enumerate(rebuilt.entries):
        if (want.producer_id, want.last_offset) not in present:
            slot = sum(1 for t in entries if t.last_offset < want.last_offset)
            return IndexVerdict(TXN_INDEX, path, CORRUPT,
                                f"entry {slot}: the aborted transaction of producer {want.producer_id} ending at "
                                f"{want.last_offset} is not indexed: read_committed consumers would get its records",
                                len(data), len(entries), expected, first_bad_entry=slot,
                                first_bad_position=slot * TXN_ENTRY_SIZE)
    if len(data) % TXN_ENTRY_SIZE:
        return IndexVerdict(TXN_INDEX, path, CORRUPT,
                            f"entry {whole}: a partial entry of {len(data) % TXN_ENTRY_SIZE} bytes at the end (a "
                            "torn write; Kafka ignores it)", len(data), len(entries), expected,
                            first_bad_entry=whole, first_bad_position=whole * TXN_ENTRY_SIZE)
    reason = ("producer state before this segment is unknown (no producer snapshot, first segment above offset 0): "
              "first/last stable offsets cannot be checked" if not known else
              "laid out differently from Kafka's recovery rebuild")
    return IndexVerdict(TXN_INDEX, path, VALID, reason, len(data), len(entries), expected)
