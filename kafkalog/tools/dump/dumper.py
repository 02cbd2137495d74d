"""A dump run: each file to the dumper of its type, errors reported and the run going on, Kafka's end-of-run reports."""
from __future__ import annotations

import os
import struct
from typing import Iterable, Iterator, List, Optional

from kafkalog.errors import CorruptRecordError, KafkalogError
from kafkalog.tools.dump.dump_run import DumpRun
from kafkalog.tools.dump.file_names import RECORD_SUFFIXES, file_suffix
from kafkalog.tools.dump.log_segment import dump_record_file
from kafkalog.tools.dump.offset_index import dump_offset_index
from kafkalog.tools.dump.options import DumpOptions
from kafkalog.tools.dump.output import (NO_HINT, STDERR, STDOUT, DumpResult, FileSummary, Line, drop_generic_hint)
from kafkalog.tools.dump.producer_snapshot import dump_producer_snapshot
from kafkalog.tools.dump.time_index import dump_time_index
from kafkalog.tools.dump.txn_index import dump_txn_index

# suffix -> (summary kind, dumper); record files (RECORD_SUFFIXES) go to dump_record_file
_READERS = {
    ".index": ("index", dump_offset_index),
    ".timeindex": ("timeindex", dump_time_index),
    ".txnindex": ("txnindex", dump_txn_index),
    ".snapshot": ("snapshot", dump_producer_snapshot),
}


class Dumper(DumpRun):
    """Dumps files one after another, each to the dumper of its type, and keeps Kafka's end-of-run
    reports (the state and the output helpers are :class:`DumpRun`'s).

    ``dump_files`` yields every line of a run (the reports last); ``exit_code`` is 1 once any file
    had a problem. ``summaries`` holds one :class:`FileSummary` per file dumped.
    """

    # -- the run --

    def dump_files(self, paths: Iterable[str]) -> Iterator[Line]:
        for path in paths:
            yield from self.dump_file(path)
        yield from self.finish()

    def dump_file(self, path) -> Iterator[Line]:
        path = os.fspath(path)
        suffix = file_suffix(os.path.basename(path))
        if suffix in RECORD_SUFFIXES:
            kind, handler = "log", dump_record_file
        else:
            kind, handler = _READERS.get(suffix, ("unknown", None))
        summary = FileSummary(path, kind)
        self.summaries.append(summary)
        if not self.options.json:
            yield self.out(f"Dumping {path}")
        if handler is None:
            yield Line(STDERR, f"Ignoring unknown file {path}")
        else:
            try:
                yield from handler(self, path, summary)
            except KafkalogError as e:
                yield self.error(summary, drop_generic_hint(e))
            except OSError as e:
                yield self.error(summary, KafkalogError(e.strerror or str(e), path=path))
            except (ValueError, IndexError, struct.error, OverflowError) as e:   # never a traceback on bad bytes
                yield self.error(summary, CorruptRecordError(f"unreadable content ({type(e).__name__}: {e})",
                                                              path=path, hint=NO_HINT))
        if self.options.json:
            yield self.obj(summary.to_json())

    def finish(self) -> Iterator[Line]:
        """Kafka's end-of-run reports on stderr (text mode; JSON mode emitted them per file)."""
        for name in java_hash_map_order(self.index_mismatches):
            yield Line(STDERR, f"Mismatches in :{name}")
            for index_offset, log_offset in sorted(self.index_mismatches[name].items(), reverse=True):
                yield Line(STDERR, f"  Index offset: {index_offset}, log offset: {log_offset}")
        for name in java_hash_map_order(self.time_mismatches):
            yield Line(STDERR, f"Found timestamp mismatch in :{name}")
            for index_ts, log_ts in self.time_mismatches[name]:
                yield Line(STDERR, f"  Index timestamp: {index_ts}, log timestamp: {log_ts}")
        for name in java_hash_map_order(self.time_out_of_order):
            yield Line(STDERR, f"Found out of order timestamp in :{name}")
            for index_ts, prev_ts in self.time_out_of_order[name]:
                yield Line(STDERR, f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}")
        for name in java_hash_map_order(self.time_not_found):
            yield Line(STDERR, "The following indexed offsets are not found in the log.")
            for index_offset, log_offset in self.time_not_found[name]:
                yield Line(STDERR, f"Indexed offset: {index_offset}, found log offset: {log_offset}")
        for name in java_hash_map_order(self.non_consecutive):
            yield Line(STDERR, f"Non-consecutive offsets in {name}")
            for first, second in sorted(self.non_consecutive[name].items()):
                yield Line(STDERR, f"  {first} is followed by {second}")
        self.index_mismatches, self.time_mismatches, self.time_out_of_order = {}, {}, {}
        self.time_not_found, self.non_consecutive = {}, {}


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(keys: Iterable[str]) -> List[str]:
    """The order a java.util.HashMap<String, _> filled by ``computeIfAbsent`` with ``keys`` (in this
    order) iterates them, as DumpLogSegments prints its end-of-run reports per file: by bucket (the
    spread hash ``h ^ h >>> 16`` masked by the table size: 16, doubled when an insertion finds more
    than 3/4 of it used), and within a bucket newest first (computeIfAbsent puts a new key at the
    head of its bin; a resize keeps the order)."""
    keys = list(keys)
    capacity = 16
    for inserted in range(len(keys)):
        if inserted > capacity * 3 // 4:
            capacity *= 2

    def place(item):
        index, key = item
        h = java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1), -index
    return [key for _, key in sorted(enumerate(keys), key=place)]


def dump(paths: Iterable[str], options: Optional[DumpOptions] = None, *, prog: str = "kafkalog dump",
         bulk: bool = True) -> DumpResult:
    """Run a whole dump and collect its output (what the CLI would print, split by stream into lines;
    ``bulk``: as Dumper's — its blocks are split at every newline, so a key or value holding one is
    two entries there, one entry with ``bulk=False``; the printed text is the same)."""
    dumper = Dumper(options, prog=prog, bulk=bulk)
    stdout: List[str] = []
    stderr: List[str] = []
    for line in dumper.dump_files(paths):
        if isinstance(line.text, bytes):          # STDOUT_BYTES
            stdout.extend(line.text.decode("utf-8").split("\n")[:-1])
        else:
            (stdout if line.stream == STDOUT else stderr).append(line.text)
    return DumpResult(stdout, stderr, dumper.exit_code, dumper.summaries)
