"""Index verification: is each of a segment's ``.index``, ``.timeindex`` and ``.txnindex`` what
Kafka's recovery would build from the ``.log`` (``LogSegment.recover``), a valid index laid out
differently, missing, or corrupt — and, for the ``.log`` itself, where its valid bytes end.

Every index file gets one class (``IndexVerdict.status``):

``identical``
    byte-identical to the rebuild (``LogSegment.recover`` over the valid batches with the topic's
    ``index.interval.bytes``, trimmed, with the final roll/close time-index entry,
    ``LogSegment.onBecomeInactiveSegment``).
``valid``
    not identical, but every entry is consistent with the log, so every lookup a broker makes through
    it is right; ``reason`` says how it differs (``LogSegment.append`` indexes per append, recovery per
    batch): chunk-granular entries of follower fetches or cleaner output, entries where another
    ``index.interval.bytes`` puts them (the interval is inferred from the entries), a broker restart, an
    index that stops early, older brokers' time-index entries that hold the offset of the RECORD with the
    max timestamp instead of its batch's last offset (the ``pinterest__tiered-storage`` fixtures), the
    zero-padded preallocated file of an active segment.
``missing``
    no file. (``.txnindex`` only when an aborted transaction ends in the segment: Kafka creates that
    file for the first one, ``TransactionIndex.append``; an absent ``.txnindex`` with nothing to hold
    gets no verdict.)
``corrupt``
    some entry is not consistent with the log; ``first_bad_entry`` (slot number),
    ``first_bad_position`` (byte in the index file) and ``reason`` name the first one.

How many slots count (``AbstractIndex``'s entries and ``trimToValidSize``): a ROLLED segment's index is
trimmed by Kafka, and Kafka counts ``length // entry size`` entries, so every slot is an entry and a zero
slot (an untrimmed preallocated tail) is corrupt. An ACTIVE segment's files are preallocated to
``segment.index.bytes`` with a zero tail: its entries end at the first zero slot (DumpLogSegments' rule) and
every byte after must be zero; it needs no final time-index entry yet.

Offset index, entry ``i`` = (offset O, position P), checked in this order (``OffsetIndex.append``,
``OffsetIndex.sanityCheck``): the length is a multiple of 8; O ≥ base offset; P > 0 (Kafka never indexes the
first batch, so an all-zero slot is padding); O and P strictly increase; P < the valid bytes of the ``.log``
and is the start of a batch; O ≤ the log's last offset; the batch before P ends below O (else a lookup of an
offset between them would start after its batch).

Time index, entry ``i`` = (timestamp T, offset O) (``TimeIndex.maybeAppend``, ``TimeIndex.sanityCheck``,
``DumpLogSegments``'s index checks): the length is a multiple of 12; O ≥ base offset; T strictly and O
weakly increase; O ≤ the log's last offset and lies in a batch (v2: [baseOffset, lastOffset]; legacy: after
the previous batch's last offset); that batch's max timestamp is T (DumpLogSegments' timestamp check); no
earlier batch carries a timestamp ≥ T (else a lookup by timestamp would skip it). A rolled segment's last
entry must carry the segment's max timestamp (the final roll entry, ``LogSegment.onBecomeInactiveSegment``:
retention reads it as ``largestTimestamp``).

Transaction index (``TransactionIndex.java``, ``AbortedTxn.java``): whole 34-byte entries (a partial tail is
corrupt), version 0, lastOffset within the segment and strictly increasing, firstOffset ≤ lastOffset, an
ABORT marker of that producer at lastOffset, and no aborted transaction of the log left out. The rebuild
replays producer state (``kafkalog.index.builder.replay_transactions``) from the state at the segment's
start — the ``<base>.snapshot`` when there is one, else what the previous segments left. When that state is
unknown (the partition's first segment starts above 0 with no snapshot), an existing entry for a marker
whose transaction began earlier is kept, and differing first/last-stable offsets are ``valid``, not
``corrupt``.

The ``.log`` (``LogSegment.recover``): batches are walked with CRC checks as recovery does; ``LogTail`` holds the valid
bytes, the size and the first problem. Indexes are judged against the valid prefix only.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional

from kafkalog.errors import InvalidFileNameError, KafkalogError, OffsetOverflowError
from kafkalog.index.abstract_index import NAME_HINT
from kafkalog.index.builder import DEFAULT_INDEX_INTERVAL_BYTES, build_indexes
from kafkalog.index.verdicts import (CORRUPT, DEFAULT_SEGMENT_INDEX_BYTES, MISSING, OFFSET_INDEX, TIME_INDEX, TXN_INDEX,
                                     VALID, IndexVerdict, SegmentVerification, read_log)
from kafkalog.index.verify_offset_index import offset_index_interval, verify_offset_index
from kafkalog.index.verify_time_index import verify_time_index
from kafkalog.index.verify_txn_index import rebuild_txn_index, verify_txn_index
from kafkalog.fs.names import format_segment_file_name, offset_from_file_name


def verify_segment(
    log_path: os.PathLike | str,
    *,
    is_active: bool = False,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
    base_offset: Optional[int] = None,
    open_txns: Optional[Mapping[int, int]] = None,
    txn_state_known: bool = True,
) -> SegmentVerification:
    """Classify the three index files beside ``log_path`` (``<base>.index`` etc.).

    ``is_active``: the partition's last segment (zero-padded files allowed, no final time entry
    needed). ``open_txns`` (producer id → first offset of its open transaction) is the producer
    state at the segment's start; ``txn_state_known`` says whether it is complete (see the module
    docstring). The base offset comes from the file name unless given.
    """
    log_path = Path(log_path)
    base = int(base_offset) if base_offset is not None else offset_from_file_name(log_path.name)
    if base is None:
        raise InvalidFileNameError(f"file name {log_path.name!r} does not start with a base offset", path=log_path,
                                   hint=NAME_HINT)
    folder = log_path.parent
    batches, tail = read_log(log_path)

    rebuild_error = None
    offset_index = time_index = None
    try:
        offset_index, time_index = build_indexes(
            base_offset=base, positions=batches.position, sizes=batches.size, last_offsets=batches.last,
            max_timestamps=batches.max_ts, index_interval_bytes=index_interval_bytes)
    except OffsetOverflowError as exc:
        rebuild_error = (f"this segment's offsets do not fit its indexes ({exc.message}); Kafka's recovery "
                         "splits such a segment into segments that each fit (LogLoader.retryOnOffsetOverflow → "
                         "LocalLog.splitOverflowedSegment, KAFKA-6264; its cleaner does the same), which kafkalog "
                         "does not do, so its indexes are not rebuilt")
    except KafkalogError as exc:
        rebuild_error = (f"Kafka's recovery cannot index this log ({exc.message}); it would empty the segment, "
                         "so kafkalog does not rebuild it")

    txn_index, open_after, known_after, kept = rebuild_txn_index(base, batches, folder, open_txns, txn_state_known)

    verdicts = [
        verify_offset_index(folder / format_segment_file_name(base, OFFSET_INDEX), base, batches, tail,
                             offset_index, is_active, index_interval_bytes, segment_index_bytes),
    ]
    interval_range = offset_index_interval(verdicts[0], folder / format_segment_file_name(base, OFFSET_INDEX),
                                            base, batches, is_active)
    verdicts.append(verify_time_index(folder / format_segment_file_name(base, TIME_INDEX), base, batches,
                                       time_index, is_active, index_interval_bytes, segment_index_bytes,
                                       interval_range))
    txn_verdict = verify_txn_index(folder / format_segment_file_name(base, TXN_INDEX), base, batches,
                                    txn_index, txn_state_known, kept)
    if txn_verdict is not None:
        verdicts.append(txn_verdict)
    if rebuild_error:
        verdicts = [v if v.status in (CORRUPT, MISSING) or v.kind == TXN_INDEX else
                    IndexVerdict(v.kind, v.path, VALID, f"{v.reason}; {rebuild_error}".lstrip("; "),
                                 v.file_size, v.entries, None) for v in verdicts]
    return SegmentVerification(log_path=log_path, base_offset=base, is_active=is_active, log=tail,
                               verdicts=verdicts, offset_index=offset_index, time_index=time_index,
                               txn_index=txn_index, rebuild_error=rebuild_error, open_txns_after=open_after,
                               txn_state_known_after=known_after, txn_state_known=txn_state_known)
