"""Dumping a time index (.timeindex): its entries and Kafka's three checks against the .log."""
from __future__ import annotations

from typing import Iterator, List, Tuple

from kafkalog.errors import CorruptIndexError, KafkalogError
from kafkalog.format import record_batch as rb
from kafkalog.index.offset_index import parse_offset_index
from kafkalog.index.time_index import parse_time_index
from kafkalog.tools.dump.dump_run import DumpRun
from kafkalog.tools.dump.batch_walk import decode_records, read_batch, walk_batches
from kafkalog.tools.dump.file_names import absolute_path, beside
from kafkalog.tools.dump.index_file import load_index, open_log_for_index, sanity_check
from kafkalog.index.offset_index import OFFSET_ENTRY_SIZE
from kafkalog.tools.dump.output import NO_HINT, FileSummary, Line
from kafkalog.index.time_index import TIME_ENTRY_SIZE
from kafkalog.fs import filesystem


def dump_time_index(run: DumpRun, path: str, s: FileSummary) -> Iterator[Line]:
    o = run.options
    index, size_error = load_index(path, s, ".timeindex", TIME_ENTRY_SIZE, parse_time_index, "time")
    base = index.base_offset
    if o.index_sanity_check:
        yield sanity_check(run, index, path, size_error)
        return
    log, warning = (None, None) if len(index) == 0 else open_log_for_index(run, path, s)
    if warning is not None:
        yield warning
    offset_index = None
    index_path = beside(path, ".index")
    if log is not None and filesystem.isfile(index_path):
        raw = filesystem.read_bytes(index_path)
        try:
            offset_index = parse_offset_index(raw[:len(raw) - len(raw) % OFFSET_ENTRY_SIZE], base)
        except KafkalogError:
            offset_index = None   # scan from the start of the log instead
    mismatches: List[Tuple[int, int]] = []
    out_of_order: List[Tuple[int, int]] = []
    not_found: List[Tuple[int, int]] = []
    prev_timestamp = rb.NO_TIMESTAMP
    try:
        mv = memoryview(log.array) if log is not None else None
        for i, (timestamp, offset) in enumerate(zip(index.timestamps.tolist(), index.offsets.tolist())):
            if i > 0 and offset == base:   # zero padding
                break
            s.entries += 1
            if mv is not None:
                try:
                    found = time_entry_check(run, mv, offset_index, offset, log.path, index_path)
                except KafkalogError as e:
                    yield run.error(s, CorruptIndexError(
                        f"entry {i} (timestamp {timestamp}, offset {offset}): {e.message}", path=path,
                        position=i * TIME_ENTRY_SIZE, hint=NO_HINT))
                else:
                    batch_last, max_ts = found
                    if batch_last != offset:
                        not_found.append((offset, batch_last))
                    else:
                        if max_ts != timestamp:
                            mismatches.append((timestamp, max_ts))
                        if prev_timestamp >= timestamp:
                            out_of_order.append((timestamp, prev_timestamp))
            if not o.verify_index_only:
                yield (run.obj({"type": "time_index_entry", "file": path, "timestamp": timestamp,
                                  "offset": offset})
                       if o.json else run.out(f"timestamp: {timestamp} offset: {offset}"))
            prev_timestamp = timestamp
        if mv is not None:
            mv.release()
    finally:
        if log is not None:
            log.close()
    if o.json:
        for a, b in mismatches:
            yield run.obj({"type": "time_index_mismatch", "file": path, "indexTimestamp": a, "logTimestamp": b})
        for a, b in out_of_order:
            yield run.obj({"type": "time_index_out_of_order", "file": path, "indexTimestamp": a,
                             "previousTimestamp": b})
        for a, b in not_found:
            yield run.obj({"type": "time_index_offset_not_found", "file": path, "indexOffset": a,
                             "logOffset": b})
    else:
        key = absolute_path(path)
        for store, pairs in ((run.time_mismatches, mismatches), (run.time_out_of_order, out_of_order),
                             (run.time_not_found, not_found)):
            if pairs:
                store.setdefault(key, []).extend(pairs)
    if size_error is not None:
        yield run.error(s, size_error)


def time_entry_check(run: DumpRun, mv, offset_index, offset: int, log_path, offset_index_name=None) -> Tuple[int, int]:
    """(lastOffset of the first batch reaching ``offset``, max record timestamp of that batch);
    (-1, -1) when no batch reaches it. The walk starts at the offset index's lookup position."""
    position = offset_index.lookup(offset)[1] if offset_index is not None else 0
    if position < 0:
        raise CorruptIndexError(f"the offset index {offset_index_name} maps offset {offset} to byte position "
                                f"{position}, which is negative", hint=NO_HINT)
    if position > len(mv):
        position = 0
    for pos, size, magic in walk_batches(mv, position, len(mv), log_path):
        b = read_batch(mv, pos, size, magic, log_path)
        if b.last_offset < offset:
            continue
        if b.last_offset != offset:
            return b.last_offset, rb.NO_TIMESTAMP
        max_ts = rb.NO_TIMESTAMP
        for r in decode_records(mv, b, log_path, max_batch_bytes=run.options.max_batch_bytes):
            max_ts = max(max_ts, r.timestamp)
        return b.last_offset, max_ts
    return -1, rb.NO_TIMESTAMP
