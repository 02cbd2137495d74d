"""Dumping a transaction index (.txnindex): one line per aborted transaction."""
from __future__ import annotations

from typing import Iterator

from kafkalog.errors import CorruptIndexError
from kafkalog.index.transaction_index import parse_transaction_index
from kafkalog.tools.dump.dump_run import DumpRun
from kafkalog.tools.dump.file_names import base_offset_or_raise
from kafkalog.tools.dump.output import NO_HINT, FileSummary, Line
from kafkalog.index.transaction_index import TXN_ENTRY_SIZE
from kafkalog.fs import filesystem


def dump_txn_index(run: DumpRun, path: str, s: FileSummary) -> Iterator[Line]:

    base = base_offset_or_raise(path, ".txnindex")
    s.base_offset = base
    data = filesystem.read_bytes(path)
    whole = len(data) - len(data) % TXN_ENTRY_SIZE
    s.valid_bytes, s.invalid_bytes = whole, len(data) - whole
    index = parse_transaction_index(data, base, path=path)
    for t in index.entries:
        s.entries += 1
        if run.options.json:
            yield run.obj({"type": "txn_index_entry", "file": path, "version": t.version,
                             "producerId": t.producer_id, "firstOffset": t.first_offset,
                             "lastOffset": t.last_offset, "lastStableOffset": t.last_stable_offset})
        else:
            yield run.out(f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                            f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")
    if whole != len(data):
        yield run.error(s, CorruptIndexError(
            f"{len(data) - whole} trailing bytes do not form a whole {TXN_ENTRY_SIZE}-byte entry "
            "(Kafka's reader ignores them)", path=path, position=whole, hint=NO_HINT))
