"""Dumping a producer state snapshot (.snapshot): one line per producer, as DumpLogSegments prints them."""
from __future__ import annotations

import os
from typing import Iterator

from kafkalog.errors import CheckpointError
from kafkalog.java_types import INT32_MAX
from kafkalog.log.producer_snapshot import parse_producer_snapshot
from kafkalog.tools.dump.dump_run import DumpRun
from kafkalog.tools.dump.output import FileSummary, Line, optional_long
from kafkalog.fs.names import offset_from_file_name
from kafkalog.fs import filesystem


def decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence (wraps below zero to Integer.MAX_VALUE)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def dump_producer_snapshot(run: DumpRun, path: str, s: FileSummary) -> Iterator[Line]:

    data = filesystem.read_bytes(path)
    offset = offset_from_file_name(os.path.basename(path))
    s.base_offset = offset
    try:
        snapshot = parse_producer_snapshot(data, -1 if offset is None else offset, path=path)
    except CheckpointError as e:
        e.hint = "Kafka discards a corrupt snapshot and rebuilds the producer state from the log"
        e.args = (str(e),)
        raise
    s.valid_bytes = len(data)
    for entry in snapshot.entries:
        s.entries += 1
        has_batch = entry.last_offset >= 0
        first_seq = decrement_sequence(entry.last_sequence, entry.offset_delta) if has_batch else None
        txn_first = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
        if run.options.json:
            yield run.obj({"type": "producer_snapshot_entry", "file": path, "producerId": entry.producer_id,
                             "producerEpoch": entry.producer_epoch, "coordinatorEpoch": entry.coordinator_epoch,
                             "currentTxnFirstOffset": txn_first, "lastTimestamp": entry.timestamp,
                             "firstSequence": first_seq, "lastSequence": entry.last_sequence if has_batch else None,
                             "lastOffset": entry.last_offset if has_batch else None,
                             "offsetDelta": entry.offset_delta if has_batch else None,
                             "timestamp": entry.timestamp if has_batch else None})
            continue
        text = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {optional_long(txn_first)} "
                f"lastTimestamp: {entry.timestamp} ")
        if has_batch:
            text += (f"firstSequence: {first_seq} lastSequence: {entry.last_sequence} lastOffset: {entry.last_offset} "
                     f"offsetDelta: {entry.offset_delta} timestamp: {entry.timestamp}")
        yield run.out(text)
