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
    for e in snapshot.entries:
        s.entries += 1
        has_batch = e.last_offset >= 0
        first_seq = decrement_sequence(e.last_sequence, e.offset_delta) if has_batch else None
        txn_first = e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None
        if run.options.json:
            yield run.obj({"type": "producer_snapshot_entry", "file": path, "producerId": e.producer_id,
                             "producerEpoch": e.producer_epoch, "coordinatorEpoch": e.coordinator_epoch,
                             "currentTxnFirstOffset": txn_first, "lastTimestamp": e.timestamp,
                             "firstSequence": first_seq, "lastSequence": e.last_sequence if has_batch else None,
                             "lastOffset": e.last_offset if has_batch else None,
                             "offsetDelta": e.offset_delta if has_batch else None,
                             "timestamp": e.timestamp if has_batch else None})
            continue
        text = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} "
                f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {optional_long(txn_first)} "
                f"lastTimestamp: {e.timestamp} ")
        if has_batch:
            text += (f"firstSequence: {first_seq} lastSequence: {e.last_sequence} lastOffset: {e.last_offset} "
                     f"offsetDelta: {e.offset_delta} timestamp: {e.timestamp}")
        yield run.out(text)
