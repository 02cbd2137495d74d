"""Dumping an offset index (.index): its entries, each checked against the batch it points at in the .log."""
from __future__ import annotations

from typing import Iterator, List, Tuple

from kafkalog.errors import CorruptIndexError, KafkalogError
from kafkalog.index.offset_index import parse_offset_index
from kafkalog.tools.dump.dump_run import DumpRun
from kafkalog.tools.dump.batch_walk import read_batch, walk_batches
from kafkalog.tools.dump.file_names import absolute_path
from kafkalog.tools.dump.index_file import load_index, open_log_for_index, sanity_check
from kafkalog.tools.dump.output import NO_HINT, FileSummary, Line
from kafkalog.index.offset_index import OFFSET_ENTRY_SIZE


def dump_offset_index(run: DumpRun, path: str, s: FileSummary) -> Iterator[Line]:

    o = run.options
    index, size_error = load_index(path, s, ".index", OFFSET_ENTRY_SIZE, parse_offset_index, "offset")
    base = index.base_offset
    if len(index) == 0:
        if not o.json:
            yield run.out(f"{path} is empty.")
        if size_error is not None:
            yield run.error(s, size_error)
        return
    if o.index_sanity_check:
        yield sanity_check(run, index, path, size_error)
        return
    log, warning = open_log_for_index(run, path, s)
    if warning is not None:
        yield warning
    mismatches: List[Tuple[int, int]] = []
    try:
        mv = memoryview(log.array) if log is not None else None
        offsets, positions = index.offsets.tolist(), index.positions.tolist()
        for i, (offset, position) in enumerate(zip(offsets, positions)):
            if i > 0 and offset == base:   # zero padding of a preallocated index
                break
            s.entries += 1
            if mv is not None:
                try:
                    log_offset = first_batch_last_offset(mv, position, o.max_message_size, log.path)
                except KafkalogError as e:
                    yield run.error(s, CorruptIndexError(
                        f"entry {i} (offset {offset}, position {position}): {e.message}", path=path,
                        position=i * OFFSET_ENTRY_SIZE, hint=NO_HINT))
                else:
                    if log_offset != offset:
                        mismatches.append((offset, log_offset))
            if o.verify_index_only:
                continue
            yield (run.obj({"type": "index_entry", "file": path, "offset": offset, "position": position})
                   if o.json else run.out(f"offset: {offset} position: {position}"))
        if mv is not None:
            mv.release()
    finally:
        if log is not None:
            log.close()
    if mismatches:
        if o.json:
            for index_offset, log_offset in mismatches:
                yield run.obj({"type": "index_mismatch", "file": path, "indexOffset": index_offset,
                                 "logOffset": log_offset})
        else:
            key = absolute_path(path)
            # Kafka: a TreeMap per absolute path in reverse order of the index offset
            run.index_mismatches.setdefault(key, {}).update(mismatches)
    if size_error is not None:
        yield run.error(s, size_error)


def first_batch_last_offset(mv, position: int, max_size: int, log_path) -> int:
    """lastOffset of the first batch of FileRecords.slice(position, max_size)."""
    if position < 0 or position > len(mv):
        raise CorruptIndexError(f"position is outside the log ({len(mv)} bytes)")
    end = min(len(mv), position + max_size)
    for pos, size, magic in walk_batches(mv, position, end, log_path):
        return read_batch(mv, pos, size, magic, log_path).last_offset
    raise CorruptIndexError(f"no complete batch starts there within --max-message-size {max_size} bytes "
                            f"of {log_path}")
