"""What the index dumpers share: an index file read as Kafka counts it, the .log beside it, the sanity check."""
from __future__ import annotations

from kafkalog.errors import CorruptIndexError, KafkalogError
from kafkalog.tools.dump.dump_run import DumpRun
from kafkalog.tools.dump.file_names import base_offset_or_raise, beside
from kafkalog.tools.dump.output import FileSummary, Line
from kafkalog.fs import filesystem


def open_log_for_index(run: DumpRun, path: str, s: FileSummary):
    """The .log beside an index (Kafka: <abs dir>/<name before first dot>.log), or None with a
    warning (an error with --verify-index-only)."""
    log_path = beside(path, ".log")
    if filesystem.isfile(log_path):
        return filesystem.open_view(log_path), None
    if run.options.verify_index_only:
        raise KafkalogError(f"cannot verify the index: its log {log_path} does not exist", path=path)
    return None, run.warning(f"{log_path} not found; the entries of {path} are not checked against it")


def load_index(path: str, s: FileSummary, suffix: str, entry_size: int, parse, kind: str):
    """An index file as Kafka counts it (length / entry size, zero slots included) and, when its
    size is not a multiple of the entry size, the error to report."""
    base = base_offset_or_raise(path, suffix)
    s.base_offset = base
    data = filesystem.read_bytes(path)
    whole = len(data) - len(data) % entry_size
    s.valid_bytes, s.invalid_bytes = whole, len(data) - whole
    index = parse(data[:whole], base, path=path, stop_at_zero_slot=False)
    size_error = None
    if whole != len(data):
        size_error = CorruptIndexError(
            f"{kind} index file size {len(data)} bytes is not a multiple of the entry size {entry_size} "
            f"({len(data) - whole} trailing bytes)", path=path, position=whole,
            hint="Kafka counts only the whole entries; rebuild the index from its .log")
    return index, size_error


def sanity_check(run: DumpRun, index, path: str, size_error) -> Line:
    """--index-sanity-check: Kafka's sanityCheck() (a size error counts as failing it)."""
    if size_error is not None:
        raise size_error
    index.sanity_check(path)
    return (run.obj({"type": "sanity_check", "file": path, "passed": True}) if run.options.json
            else run.out(f"{path} passed sanity check."))

