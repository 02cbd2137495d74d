"""Compaction into a new place (``compact --output-dir DIR_OR_URI``): the cleaned copy of a whole log
dir written to a local folder or any ``pyarrow.fs`` URI, the source only read. Each partition's round
is the in-place one (``run_partition`` → ``clean_partition``: same plan, map and recopy, so the same
bytes); only its ending differs — the cleaned groups are written under their final names at the
destination (``PartitionOutput.install``, in place of ``swap.swap_in``), then every other file of the
folder is copied as it is, leaving out exactly what the in-place swap deletes (the replaced
segments' files, and the producer snapshots of the bases that disappear). A partition not due (or
not compacted, or left out by ``--topics``) is copied whole. The log dir's files (checkpoints,
``meta.properties``) are written at the end, ``cleaner-offset-checkpoint`` with the cleaned
partitions' new entries as the in-place rounds would leave it. A remote source's compacted partition
is first copied to a local folder under TMPDIR (streamed; the round then reads it through the page
cache, not this process's memory), and removed after.

Resuming after a kill: ``<out>/.kafkalog-output/job.json`` names the source and the run's ``now_ms``;
a partition is complete only once ``.kafkalog-output/<folder>.json`` exists, written after all its
files were written and read back (size and CRC-32C). A rerun skips complete partitions, removes and
rewrites the others; when every partition is complete, the log dir's files are written, then
``<out>/.kafkalog-output.json`` (the run's rows), then the ``.kafkalog-output/`` folder is removed
(a broker refuses a log dir holding a folder that is not a partition's). A destination that holds
another source's output, or anything that is not ours (a broker's log dir), is refused.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

from kafkalog.checkpoint.offset import format_offset_checkpoint, parse_offset_checkpoint
from kafkalog.cleaner.cleaned_segment import CleanedSink, GroupOutput
from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.partition_run import CLEANED, ERROR, SKIPPED, CompactionRow, run_partition
from kafkalog.cleaner.output_tree import OutputTree, TreeWriter
from kafkalog.errors import KafkalogError, UsageError
from kafkalog.fs import filesystem
from kafkalog.fs.lock import is_locked, locked_refusal
from kafkalog.fs.names import (CLEANER_OFFSET_CHECKPOINT, LOCK_FILE, SNAPSHOT_SUFFIX, format_segment_file_name,
                               parse_partition_dir_name)
from kafkalog.index.transaction_index import TransactionIndex
from kafkalog.row_types import as_row

MARKER_DIR = ".kafkalog-output"            # the run's state while it runs (removed at the end)
JOB_FILE = "job.json"
FINAL_MARKER = ".kafkalog-output.json"     # the finished run's rows (a file: a broker lists folders only)
FILE_SUFFIXES = ("log", "index", "timeindex", "txnindex")       # a segment's files (swap.FILE_SUFFIXES)
MTIME_SUFFIXES = ("log", "index", "timeindex")

# a partition's ``output`` in the report
WRITTEN, COPIED, SKIPPED_COMPLETE, NOT_WRITTEN = "written", "copied", "skipped-complete", "not written"

# Tests set this to fail (raise) at a named point of a partition's output: "group" (after a cleaned
# group was written), "copied" (after the rest was copied, before the manifest).
FAULT_HOOK = None


def _fault(point: str, folder: str) -> None:
    if FAULT_HOOK is not None:
        FAULT_HOOK(point, folder)


def _manifest_rel(name: str) -> str:
    return f"{MARKER_DIR}/{name}.json"


class OutputSink(CleanedSink):
    """A cleaned group's .log streamed to its final name at the destination (``CleanedSink``'s
    interface: ``write``, ``size``, ``digest``, ``close``, ``discard``)."""

    def __init__(self, writer: TreeWriter):     # not super().__init__: that opens a local .cleaned file
        self.path = None
        self.size = 0
        self._writer: Optional[TreeWriter] = writer

    def write(self, data: bytes) -> None:
        assert self._writer is not None
        self._writer.write(data)
        self.size += len(data)

    def digest(self) -> Optional[int]:
        return None if self._writer is None else self._writer.crc

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    def discard(self) -> None:
        if self._writer is not None:
            self._writer.abort()


@dataclass
class PartitionOutput:
    """One partition folder's copy while it is written: the cleaner's groups (``sink``, ``install``),
    then the rest of the folder (``copy_rest``); ``files`` holds each written file's (size, CRC-32C)."""
    tree: OutputTree
    name: str
    files: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    dropped: Set[str] = field(default_factory=set)
    _writers: Dict[int, TreeWriter] = field(default_factory=dict)

    def rel(self, file_name: str) -> str:
        return f"{self.name}/{file_name}"

    def sink(self, base_offset: int) -> OutputSink:
        writer = self.tree.writer(self.rel(format_segment_file_name(base_offset, "log")))
        self._writers[base_offset] = writer
        return OutputSink(writer)

    def install(self, g: GroupOutput) -> None:
        """The group's files under their final names (``swap_in`` without the renames): the .log
        (streamed already), .index, .timeindex, and .txnindex when it has entries; the .log, .index and
        .timeindex with the last source segment's mtime, as the swap gives them."""
        base, mtime = g.base_offset, g.sources[-1].mtime_ns
        offset_index, time_index = g.appender.finish()
        writer = self._writers.pop(base)
        g.sink.close()
        log_name = format_segment_file_name(base, "log")
        self.tree.set_mtime(self.rel(log_name), mtime)
        self.files[log_name] = (writer.size, writer.crc)
        contents = {"index": offset_index.to_bytes(), "timeindex": time_index.to_bytes()}
        if g.txn_entries:
            contents["txnindex"] = TransactionIndex(base, tuple(g.txn_entries)).to_bytes()
        for suffix, data in contents.items():
            name = format_segment_file_name(base, suffix)
            self.files[name] = self.tree.write(self.rel(name), data,
                                               mtime_ns=mtime if suffix in MTIME_SUFFIXES else None)
        for seg in g.sources:           # what the swap renames to .deleted and removes
            self.dropped.update(format_segment_file_name(seg.base_offset, s) for s in FILE_SUFFIXES)
            if seg.base_offset != base:
                self.dropped.add(format_segment_file_name(seg.base_offset, SNAPSHOT_SUFFIX))
        _fault("group", self.name)

    def copy_rest(self, folder: str) -> None:
        """Copy every file of the source folder the round neither wrote nor dropped, mtimes kept."""
        for entry in sorted(filesystem.scandir(folder), key=lambda e: e.name):
            if entry.is_dir() or entry.name in self.files or entry.name in self.dropped:
                continue
            self.files[entry.name] = self.tree.copy_in(entry.path, self.rel(entry.name),
                                                       mtime_ns=entry.stat().st_mtime_ns)

    def verify(self) -> None:
        for name, (size, crc) in self.files.items():
            self.tree.verify(self.rel(name), size, crc)
        self.tree.sync(self.name)
        self.tree.sync()               # the folder's own entry in the log dir


# --- one partition -----------------------------------------------------------------------------

def _complete_row(tree: OutputTree, name: str) -> Optional[dict]:
    """The stored row of a partition whose manifest says it is complete (and whose files are all
    there with their sizes), else None."""
    data = tree.read(_manifest_rel(name))
    if data is None:
        return None
    try:
        manifest = json.loads(data)
        files = manifest["files"]
        row = manifest["row"]
    except (ValueError, KeyError, TypeError):
        return None
    for file_name, (size, _crc) in files.items():
        if tree.size_of(f"{name}/{file_name}") != size:
            return None
    return row


def run_partition_to(log_dir: str, folder: str, out: str, *, configs, now_ms: int,
                     options: CleanOptions = CleanOptions(), clean: bool = True, explain=()) -> dict:
    """One partition folder's cleaned copy at ``out`` (its report row, with ``output`` written /
    copied / skipped-complete / not written). A partition a previous run completed is skipped; one it
    left incomplete is removed and written again. Never raises for a problem of this partition (the
    row says it; nothing of it looks complete).

    :param log_dir: the source log dir (for the row).
    :param folder: the source partition folder (read only).
    :param out: the destination log dir (local path or URI).
    :param configs: the broker's and the topics' configs.
    :param now_ms: the time every time-based rule is evaluated at.
    :param options: as for ``run_partition`` (``dry_run`` is not allowed here).
    :param clean: False: copy the folder as it is (a topic ``--topics`` leaves out).
    :param explain: offsets whose fate the row's ``explain`` says.
    """
    tree = OutputTree(out)
    name = os.path.basename(folder.rstrip("/"))
    try:
        done = _complete_row(tree, name)
        if done is not None:
            done.update(output=SKIPPED_COMPLETE, explain=[f"offset {o}: written by an earlier run" for o in explain])
            return done
        tree.remove(name)
        part = PartitionOutput(tree, name)
        if not clean:
            row = _copy_only_row(log_dir, folder, explain)
            part.copy_rest(folder)
        elif filesystem.is_uri(folder) and _compacted(configs, name):
            with tempfile.TemporaryDirectory(prefix="kafkalog-stage-") as stage:
                local = _stage(log_dir, folder, stage)
                row = run_partition(log_dir, local, configs=configs, now_ms=now_ms, options=options,
                                    explain=explain, output=part)
                row.update(partition_dir=folder, reason=(row["reason"] or "").replace(local, folder) or None)
                if row["status"] != ERROR:
                    part.copy_rest(local)
        else:
            row = run_partition(log_dir, folder, configs=configs, now_ms=now_ms, options=options, explain=explain,
                                output=part)
            if row["status"] != ERROR:
                part.copy_rest(folder)
        if row["status"] == ERROR:
            tree.remove(name)
            row["output"] = NOT_WRITTEN
            return row
        _fault("copied", name)
        part.verify()
        row["output"] = WRITTEN if row["status"] == CLEANED else COPIED
        manifest = dict(files={k: list(v) for k, v in sorted(part.files.items())},
                        row={k: v for k, v in row.items() if k != "explain"})
        tree.publish(_manifest_rel(name), json.dumps(manifest, sort_keys=True).encode())
        return row
    except (KafkalogError, OSError) as exc:
        try:
            tree.remove(name)
        except (KafkalogError, OSError):
            pass                      # no manifest was written: a rerun removes what is left
        return _error_row(log_dir, folder, f"writing the copy at {filesystem.uri_for_display(tree.path(name))}: "
                                           f"{exc}", explain)


def _compacted(configs, name: str) -> bool:
    try:
        return bool(configs.for_topic(parse_partition_dir_name(name)[0]).compact)
    except KafkalogError:
        return False


def _stage(log_dir: str, folder: str, stage: str) -> str:
    """A remote partition folder (and its log dir's files: the checkpoints the plan reads) copied to
    a local folder, streamed: the round reads local files through mmap (the page cache), never a
    whole segment in this process's memory. Needs free disk for the partition under TMPDIR."""
    tree = OutputTree(stage)
    for entry in filesystem.scandir(log_dir):
        if not entry.is_dir():
            tree.copy_in(entry.path, entry.name)
    name = os.path.basename(folder.rstrip("/"))
    for entry in filesystem.scandir(folder):
        if not entry.is_dir():
            tree.copy_in(entry.path, f"{name}/{entry.name}", mtime_ns=entry.stat().st_mtime_ns)
    return tree.path(name)


def _copy_only_row(log_dir: str, folder: str, explain) -> dict:
    name = os.path.basename(folder)
    try:
        topic, partition, _kind = parse_partition_dir_name(name)
    except KafkalogError:
        topic, partition = name, -1
    return as_row(CompactionRow(log_dir=log_dir, partition_dir=folder, topic=topic, partition=partition,
                                status=SKIPPED, outcome="not needed", reason="not in --topics: copied as it is",
                                explain=[f"offset {o}: partition not cleaned (not in --topics)" for o in explain]))


def _error_row(log_dir: str, folder: str, reason: str, explain) -> dict:
    row = _copy_only_row(log_dir, folder, explain)
    row.update(status=ERROR, outcome="failed", reason=reason, output=NOT_WRITTEN)
    return row


# --- the whole run -----------------------------------------------------------------------------

@dataclass
class OutputRun:
    """The destination of a run and what it already holds: ``rows`` set when an earlier run
    finished it (nothing left to do), ``resumed`` when an earlier run started it."""
    out: str
    source: str
    now_ms: int
    resumed: bool = False
    rows: Optional[List[dict]] = None


def _identity(path: str) -> str:
    return filesystem.uri_for_display(path) if filesystem.is_uri(path) else os.path.realpath(path)


def _inside(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/")


def prepare_output(out: str, source: str, *, now_ms: int, now_given: bool, topics: Optional[Iterable[str]] = None
                   ) -> OutputRun:
    """Check the destination before anything is written, and start (or resume) the run there.
    UsageError: the destination is or holds the source (or the reverse), holds another source's
    output or a run as of another ``--now-ms``, or holds anything that is not a kafkalog output (a
    broker's log dir, other data); LogDirLockedError: a process holds its ``.lock`` (a broker).
    Without ``now_given``, a resumed run keeps the ``now_ms`` of the run it resumes.

    :param out: the destination log dir (local path or URI).
    :param source: the source log dir.
    :param now_ms: the run's time (the wall clock's unless given).
    :param now_given: whether the user gave ``--now-ms``.
    :param topics: the topics cleaned (None: all), recorded with the run.
    """
    src, dst = _identity(source), _identity(out)
    if _inside(dst, src) or _inside(src, dst):
        raise UsageError(f"--output-dir {filesystem.uri_for_display(out)} and the log dir {src} overlap",
                         hint="write the compacted copy to a folder outside the log dir (and not holding it)")
    if not filesystem.is_uri(out) and os.path.isdir(out) and is_locked(out):
        raise locked_refusal(out, doing="writing a compacted copy into")
    tree = OutputTree(out)
    wanted = dict(source=src, topics=None if topics is None else sorted(topics))
    for rel, finished in ((FINAL_MARKER, True), (f"{MARKER_DIR}/{JOB_FILE}", False)):
        data = tree.read(rel)
        if data is None:
            continue
        try:
            held = json.loads(data)
            held_source, held_now = held["source"], int(held["now_ms"])
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"--output-dir {filesystem.uri_for_display(out)}: {rel} is not a kafkalog output marker",
                             hint="choose an empty or new folder") from None
        if held_source != src or held.get("topics") != wanted["topics"]:
            raise UsageError(f"--output-dir {filesystem.uri_for_display(out)} holds the compacted copy of "
                             f"{held_source} (topics {held.get('topics') or 'all'}), not of {src} (topics "
                             f"{wanted['topics'] or 'all'})", hint="choose an empty or new folder")
        if now_given and held_now != now_ms:
            raise UsageError(f"--output-dir {filesystem.uri_for_display(out)} holds a run as of --now-ms {held_now}, "
                             f"not {now_ms}", hint=f"rerun with --now-ms {held_now} (or no --now-ms) to finish it, "
                             "or choose an empty folder")
        run = OutputRun(out, src, held_now, resumed=True)
        if finished:
            run.rows = [dict(r, output=SKIPPED_COMPLETE, explain=[]) for r in held["rows"]]
            tree.remove(MARKER_DIR)          # a run killed after its final marker: only this was left
        return run
    present = [n for n in tree.names() if n != LOCK_FILE]
    if present:
        what = "a broker's log dir (meta.properties)" if "meta.properties" in present else f"{len(present)} entries"
        raise UsageError(f"--output-dir {filesystem.uri_for_display(out)} is not empty and holds no kafkalog output: "
                         f"{what}", hint="choose an empty or new folder; compacting a log dir in place is "
                         "`compact` without --output-dir")
    tree.make_root()
    tree.publish(f"{MARKER_DIR}/{JOB_FILE}", json.dumps(dict(wanted, now_ms=now_ms)).encode())
    return OutputRun(out, src, now_ms)


def finish_output(run: OutputRun, source: str, rows: List[dict]) -> Optional[str]:
    """After every partition: when all are complete, write the log dir's files (each verified), then
    the final marker, then remove the run's state. Returns None, or why the copy is not finished
    (a rerun finishes it).

    :param run: ``prepare_output``'s.
    :param source: the source log dir.
    :param rows: the partitions' rows.
    """
    if run.rows is not None:
        return None
    unfinished = [r for r in rows if r.get("output") not in (WRITTEN, COPIED, SKIPPED_COMPLETE)]
    if unfinished:
        names = ", ".join(os.path.basename(str(r["partition_dir"])) for r in unfinished[:5])
        return (f"{len(unfinished)} partition(s) not written ({names}): the log dir's checkpoints were not written; "
                "rerun the same command to finish")
    tree = OutputTree(run.out)
    cleaned = {(r["topic"], int(r["partition"])): int(r["end_offset"]) for r in rows
               if r["status"] == CLEANED and r.get("end_offset") is not None}
    for entry in sorted(filesystem.scandir(source), key=lambda e: e.name):
        if entry.is_dir() or entry.name == LOCK_FILE or entry.name.endswith(".tmp") or entry.name == FINAL_MARKER:
            continue
        if entry.name == CLEANER_OFFSET_CHECKPOINT and cleaned:
            continue
        size, crc = tree.copy_in(entry.path, entry.name, mtime_ns=entry.stat().st_mtime_ns)
        tree.verify(entry.name, size, crc)
    if cleaned:              # the in-place rounds' update_cleaner_checkpoints, all at once
        held = filesystem.read_bytes(os.path.join(source, CLEANER_OFFSET_CHECKPOINT)) \
            if filesystem.exists(os.path.join(source, CLEANER_OFFSET_CHECKPOINT)) else b""
        entries = parse_offset_checkpoint(held.decode("utf-8"), path=CLEANER_OFFSET_CHECKPOINT)
        entries.update(cleaned)
        size, crc = tree.write(CLEANER_OFFSET_CHECKPOINT, format_offset_checkpoint(entries).encode("utf-8"))
        tree.verify(CLEANER_OFFSET_CHECKPOINT, size, crc)
    tree.sync()
    stored = [{k: v for k, v in r.items() if k not in ("explain", "output")} for r in rows]
    tree.publish(FINAL_MARKER, json.dumps(dict(source=run.source, now_ms=run.now_ms, rows=stored,
                                               topics=_topics_of(tree)), sort_keys=True).encode())
    tree.remove(MARKER_DIR)
    tree.sync()
    return None


def output_summary(run: OutputRun, partitions: List[dict], problem: Optional[str]) -> dict:
    """The report summary's output fields: where, partitions by output, and why not finished (or None)."""
    counts: Dict[str, int] = {}
    for p in partitions:
        counts[p.get("output") or NOT_WRITTEN] = counts.get(p.get("output") or NOT_WRITTEN, 0) + 1
    return dict(output_dir=filesystem.uri_for_display(run.out), output=counts, output_unfinished=problem)


def _topics_of(tree: OutputTree):
    data = tree.read(f"{MARKER_DIR}/{JOB_FILE}")
    return None if data is None else json.loads(data).get("topics")


__all__ = ["COPIED", "FINAL_MARKER", "MARKER_DIR", "NOT_WRITTEN", "OutputRun", "OutputSink", "PartitionOutput",
           "SKIPPED_COMPLETE", "WRITTEN", "finish_output", "output_summary", "prepare_output", "run_partition_to"]
