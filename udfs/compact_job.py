"""``spark-submit.sh compact``: Kafka's log compaction (spec §7) for every compacted partition of the
log dirs at once, with the key map built by Spark instead of a bounded in-memory table.

Three steps, the first two read-only:

1. **Plan** (one task per few folders, collected): every partition folder runs
   ``kafkalog.cleaner.plan_partition`` (cleaner checkpoint, log start offset, high watermark, open
   transactions, min/max compaction lag) → the dirty range [firstDirty, upperBound), the dirty ratio
   and whether it is cleanable, or why not. Every partition whose ``cleanup.policy`` contains
   ``compact`` and whose plan says cleanable is cleaned — all of them, in parallel (a broker cleans one
   "filthiest" log at a time).
2. **Key map, as a Spark aggregation over the exact key bytes.** For each eligible partition one task
   walks the segments the round recopies (base < upperBound) and emits a row ``(pid, key, offset,
   dirty)`` per data record with a non-null key; ``dirty`` is true exactly for the records that enter
   Kafka's offset map (§7.4: offset >= firstDirty, walked from the offset index's position for
   firstDirty, not in an aborted transaction per the ``.txnindex`` entries, not a control batch —
   the same walk as ``offset_map_entries``). Spark then computes, over a window partitioned by
   ``(pid, key)``, ``latest = max(offset) where dirty`` and classifies every record:
   ``offset < latest`` → SUPERSEDED, ``offset == latest`` → LATEST (it is the map's entry), else no
   row (the key is not in the map). Keys are compared byte for byte: no hash collisions, and no
   dedupe-buffer limit, so a round always reaches upperBound (the new cleaner checkpoint).
3. **Rewrite** (the one side-effecting action, collected): the verdict rows ``(pid, offset,
   status)`` are hash-partitioned by ``pid`` (pids are chosen so that partitions spread evenly over
   the tasks) and sorted by ``(pid, offset)``, so the task that rewrites a partition receives its
   verdicts as a stream in log order. ``kafkalog.cleaner.clean_partition`` runs with a cursor over
   that stream as its offset map (``latest_offset_at(key, offset)``: the cleaner asks in ascending
   offset order), so per-batch/record retention (§7.6-7.8, ``record_filter``), the grouping, the
   ``.cleaned`` → ``.swap`` swap-in and the ``cleaner-offset-checkpoint`` update are exactly the
   single-process cleaner's.

Memory bound: no component holds a partition's keys. The emitting task streams Arrow batches of
at most ``EMIT_BATCH_ROWS`` rows; the window and the sort are Spark's external (spilling) sort and
window operators; the rewriting task holds one Arrow batch of verdicts (``maxRecordsPerBatch``), the
batch being filtered and the segment headers, and streams the cleaned ``.log`` to its
``.log.cleaned`` file (the cleaner's ``_Sink``). So a partition with more distinct keys than an
executor's memory compacts with memory independent of the key count (disk for the shuffle instead).
The cost: every record of the recopied range crosses one shuffle as (key, offset) and every
superseded or latest one a second as (pid, offset).

Safety: a log dir whose ``.lock`` a live process holds (a running broker) is refused unless
``--dry-run`` (then planned with a warning); otherwise the driver holds each dir's lock for the whole
run (the executors' cleaner calls are told so: ``lock=False``). Each rewriting task re-plans its
partition and refuses it if the dirty range moved since step 1. ``--dry-run`` computes everything,
writes nothing in the log dirs (no ``.cleaned`` files, no checkpoint); the report is written and, when
``--audit`` is given, the audit rows too, flagged ``dry_run``.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from kafkalog.errors import KafkalogError
from kafkalog.logdir import parse_partition_dir_name

from . import delta_tables
from .job import (EXIT_OK, EXIT_PARTIAL, add_config_arguments, base_parser, locked_log_dirs, parse_time_ms,
                  progress, start_job, UsageError, write_report)
from .partitions import folders_frame, partition_folders_of, topics_option
from .session import build_session

JOB = "compact"
DESCRIPTION = ("Compact every compacted partition of the log dirs as Kafka's log cleaner would (spec §7), in "
               "parallel, with an exact key map computed by Spark; --dry-run writes nothing but the report.")

# statuses of a partition in the report
CLEANED, WOULD_CLEAN, SKIPPED, ERROR = "cleaned", "would-clean", "skipped", "error"
ELIGIBLE = "eligible"
# verdict rows (step 2 → 3)
V_DONE, V_FAILED, V_SUPERSEDED, V_LATEST = 0, 1, 2, 3
DONE_OFFSET, FAILED_OFFSET = -2, -1          # the marker row sorts before every record of its pid
EMIT_BATCH_ROWS = 1 << 16

PLAN_SCHEMA = pa.schema([
    pa.field("log_dir", pa.string()), pa.field("partition_dir", pa.string()), pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()), pa.field("status", pa.string()), pa.field("reason", pa.string()),
    pa.field("cleanable_ratio", pa.float64()), pa.field("min_cleanable_dirty_ratio", pa.float64()),
    pa.field("first_dirty_offset", pa.int64()), pa.field("upper_bound_offset", pa.int64()),
    pa.field("clean_bytes", pa.int64()), pa.field("cleanable_bytes", pa.int64()), pa.field("total_bytes", pa.int64()),
    pa.field("log_start_offset", pa.int64()), pa.field("log_end_offset", pa.int64()),
    pa.field("high_watermark", pa.int64()), pa.field("checkpoint_offset", pa.int64()),
    pa.field("first_unstable_offset", pa.int64()), pa.field("need_compaction_now", pa.bool_()),
    pa.field("plan", pa.string()),
])
ENTRY_SCHEMA = pa.schema([pa.field("pid", pa.int32()), pa.field("key", pa.binary()), pa.field("offset", pa.int64()),
                          pa.field("dirty", pa.bool_())])
COUNT_FIELDS = ("batches_read", "batches_copied", "batches_rewritten", "batches_emptied", "batches_removed",
                "records_read", "records_kept", "records_superseded", "records_null_key", "tombstones_kept",
                "tombstones_removed", "aborted_records_removed", "markers_kept", "markers_removed",
                "horizons_stamped", "bytes_read", "bytes_written")
RESULT_SCHEMA = pa.schema(
    [pa.field("pid", pa.int32()), pa.field("status", pa.string()), pa.field("reason", pa.string()),
     pa.field("end_offset", pa.int64()), pa.field("map_size", pa.int64()), pa.field("groups", pa.int32()),
     pa.field("bytes_removed", pa.int64()), pa.field("duration_s", pa.float64()),
     pa.field("explain", pa.list_(pa.string()))]
    + [pa.field(name, pa.int64()) for name in COUNT_FIELDS])
AUDIT_SCHEMA = pa.schema([
    pa.field("run_id", pa.string()), pa.field("run_at", pa.timestamp("ms", tz="UTC")),
    pa.field("now", pa.timestamp("ms", tz="UTC")), pa.field("dry_run", pa.bool_()),
    pa.field("log_dir", pa.string()), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("status", pa.string()), pa.field("reason", pa.string()), pa.field("cleanable_ratio", pa.float64()),
    pa.field("first_dirty_offset", pa.int64()), pa.field("end_offset", pa.int64()),
    pa.field("bytes_before", pa.int64()), pa.field("bytes_after", pa.int64()),
    pa.field("records_before", pa.int64()), pa.field("records_after", pa.int64()),
    pa.field("records_removed", pa.int64()), pa.field("records_superseded", pa.int64()),
    pa.field("tombstones_removed", pa.int64()), pa.field("aborted_records_removed", pa.int64()),
    pa.field("markers_removed", pa.int64()), pa.field("null_key_records_removed", pa.int64()),
    pa.field("map_size", pa.int64()), pa.field("duration_s", pa.float64()),
])


# --- command line ----------------------------------------------------------------------------

def _explain_target(text: str) -> Tuple[str, int, int]:
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not TOPIC:PARTITION:OFFSET")
    try:
        partition, offset = int(parts[1]), int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: PARTITION and OFFSET must be integers") from None
    if partition < 0 or offset < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: PARTITION and OFFSET must be >= 0")
    return parts[0], partition, offset


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Which partitions: cleanup.policy contains compact, and Kafka's rules say the partition is cleanable\n"
        "(dirty ratio above min.cleanable.dirty.ratio, or max.compaction.lag.ms passed) — every such partition\n"
        "is cleaned in this run. The dirty range ends at the active segment, the high watermark, the first\n"
        "open transaction and min.compaction.lag.ms, rounded down to a segment boundary.\n\n"
        "Report: {\"partitions\": [{topic, partition, status, reason, cleanable_ratio, bytes_before, ...}],\n"
        "\"summary\": {...}, \"explain\": [...]}. Exit 0 done, 1 some partitions or log dirs failed, 2 bad arguments."))
    parser.add_argument("--topics", metavar="T[,T...]", help="only these topics")
    parser.add_argument("--now-ms", type=parse_time_ms, metavar="T",
                        help="clean as of this time (epoch ms or ISO-8601; default: now): delete horizons, "
                             "compaction lags, producer expiry")
    parser.add_argument("--dry-run", action="store_true", help="compute everything, write nothing but the report "
                        "(and the audit rows, flagged dry_run)")
    parser.add_argument("--audit", metavar="PATH", help="Delta table to append one row per partition to")
    parser.add_argument("--explain", action="append", default=[], type=_explain_target,
                        metavar="TOPIC:PARTITION:OFFSET", help="print why that record was kept or removed (repeatable)")
    add_config_arguments(parser)
    return parser


# --- step 1: plan ----------------------------------------------------------------------------

def _plan_row(log_dir: str, folder: str, configs, now: int) -> dict:
    from kafkalog.cleaner import NotCleanableReason, plan_partition

    row = {f.name: None for f in PLAN_SCHEMA}
    row.update(log_dir=log_dir, partition_dir=folder)
    name = Path(folder).name
    try:
        topic, partition, kind = parse_partition_dir_name(name)
    except KafkalogError as exc:
        row.update(topic=name, partition=-1, status=ERROR, reason=f"{exc}; a broker refuses a log dir holding it")
        return row
    row.update(topic=topic, partition=partition)
    try:
        config = configs.for_topic(topic)
        row["min_cleanable_dirty_ratio"] = float(config.min_cleanable_dirty_ratio)
        if kind != "live":
            row.update(status=SKIPPED, reason=f"{kind} partition folder (only live partitions are cleaned)")
            return row
        if not config.compact:
            row.update(status=SKIPPED, reason=NotCleanableReason.NOT_COMPACTED.value)
            return row
        plan = plan_partition(folder, config=config, now_ms=now, broker=configs.broker)
        o = plan.offsets
        row.update(cleanable_ratio=o.cleanable_ratio, first_dirty_offset=o.first_dirty_offset,
                   upper_bound_offset=o.upper_bound_offset, clean_bytes=o.clean_bytes,
                   cleanable_bytes=o.cleanable_bytes, total_bytes=o.total_bytes,
                   log_start_offset=plan.log_start_offset, log_end_offset=plan.log_end_offset,
                   high_watermark=plan.high_watermark, checkpoint_offset=plan.checkpoint_offset,
                   first_unstable_offset=plan.first_unstable_offset, need_compaction_now=o.need_compaction_now,
                   plan=o.describe())
        if not o.cleanable:
            row.update(status=SKIPPED, reason=o.reason.value)
        elif any(s.has_legacy for s in plan.segments if s.base_offset < o.upper_bound_offset):
            row.update(status=SKIPPED,
                       reason="segments hold v0/v1 messages; the legacy compaction rules are not implemented")
        else:
            row.update(status=ELIGIBLE, reason="cleanable: " + (
                "max.compaction.lag.ms has passed" if o.need_compaction_now and
                o.cleanable_ratio <= config.min_cleanable_dirty_ratio else
                f"dirty ratio {o.cleanable_ratio:.4f} > min.cleanable.dirty.ratio {config.min_cleanable_dirty_ratio}"))
    except (KafkalogError, OSError) as exc:
        row.update(status=ERROR, reason=str(exc))
    return row


def plan_partitions(spark, folders: Sequence[Tuple[str, str]], *, configs, now: int) -> List[dict]:
    from pyspark.sql.pandas.types import from_arrow_schema

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = [_plan_row(d, f, configs, now)
                    for d, f in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist())]
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=PLAN_SCHEMA)

    if not folders:
        return []
    df = folders_frame(spark, folders).mapInArrow(run, from_arrow_schema(PLAN_SCHEMA))
    return df.toArrow().to_pylist()


# --- step 2: the (key, offset) rows of a partition -------------------------------------------

def key_offset_rows(plan) -> Iterator[Tuple[pa.Array, np.ndarray, np.ndarray]]:
    """(keys, offsets, dirty) chunks for every data record with a non-null key of the segments the
    round recopies (base < upperBound), in log order; ``dirty`` marks exactly the records that enter
    the offset map (the walk of ``kafkalog.cleaner.offset_map_entries``). Works a decode window at a
    time on columns: the transaction tracker runs per batch, the record masks are numpy."""
    from kafkalog.cleaner.cleaner import _map_tracker, _max_batch_bytes
    from kafkalog.cleaner.local_log import read_windows, start_position

    upper, first_dirty = plan.upper_bound_offset, plan.first_dirty_offset
    dirty_segments = plan.dirty_segments()
    first_dirty_base = dirty_segments[0].base_offset if dirty_segments else upper
    tracker = _map_tracker(plan)
    max_bytes = _max_batch_bytes(plan.config)
    for seg in plan.segments:
        if seg.base_offset >= upper:
            break
        if seg.base_offset < first_dirty_base:
            walk_from = None                   # wholly before the map's walk
        elif seg.base_offset == first_dirty_base:
            walk_from = start_position(seg, first_dirty)
        else:
            walk_from = 0
        for win in read_windows(seg, max_batch_bytes=max_bytes):
            nb = len(win.headers)
            data = np.zeros(nb, dtype=np.bool_)
            enters = np.zeros(nb, dtype=np.bool_)
            for b, h in enumerate(win.headers):
                in_walk = walk_from is not None and win.positions[b] >= walk_from
                if h.is_control:
                    if in_walk:
                        tracker.on_control_batch(h.producer_id, h.last_offset, win.control_type(b))
                    continue
                data[b] = True
                enters[b] = in_walk and not tracker.on_data_batch(h.producer_id, h.last_offset, h.is_transactional)
            counts = np.diff(win.record_start)
            emit = np.repeat(data, counts) & win.key_valid
            if not emit.any():
                continue
            idx = np.flatnonzero(emit)
            dirty = (np.repeat(enters, counts) & (win.offsets >= first_dirty))[idx]
            for start in range(0, len(idx), EMIT_BATCH_ROWS):
                part = idx[start:start + EMIT_BATCH_ROWS]
                yield (win.keys.take(pa.array(part)), win.offsets[part],
                       dirty[start:start + EMIT_BATCH_ROWS])


def _same_range(plan, expected: dict) -> Optional[str]:
    got = (plan.first_dirty_offset, plan.upper_bound_offset)
    want = (expected["first_dirty_offset"], expected["upper_bound_offset"])
    if got != want or not plan.offsets.cleanable:
        return (f"the partition changed since it was planned (dirty range {list(got)} now, {list(want)} planned); "
                "nothing was changed — run the job again")
    return None


def _emit_partition(pid: int, p: dict, configs, now: int) -> Iterator[pa.RecordBatch]:
    from kafkalog.cleaner import plan_partition

    def marker(offset: int, note: Optional[str]) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [pa.array([pid], pa.int32()), pa.array([note.encode() if note else None], pa.binary()),
             pa.array([offset], pa.int64()), pa.array([False])], schema=ENTRY_SCHEMA)

    try:
        plan = plan_partition(p["partition_dir"], config=configs.for_topic(p["topic"]), now_ms=now,
                              broker=configs.broker)
        moved = _same_range(plan, p)
        if moved:
            yield marker(FAILED_OFFSET, moved)
            return
        for keys, offsets, dirty in key_offset_rows(plan):
            yield pa.RecordBatch.from_arrays(
                [pa.array(np.full(len(keys), pid, np.int32)), keys.cast(pa.binary()), pa.array(offsets, pa.int64()),
                 pa.array(dirty, pa.bool_())], schema=ENTRY_SCHEMA)
    except (KafkalogError, OSError) as exc:
        yield marker(FAILED_OFFSET, f"reading the dirty range failed: {exc}")
        return
    yield marker(DONE_OFFSET, None)


# --- step 3: the rewrite, fed by a sorted stream of verdicts ---------------------------------

class _VerdictRows:
    """The task's (pid, offset, status, note) rows, sorted by (pid, offset), read once, one Arrow
    batch at a time."""

    def __init__(self, batches: Iterable[pa.RecordBatch]):
        self._batches = iter(batches)
        self._i = self._n = 0
        self._pids: list = []
        self._offsets: list = []
        self._status: list = []
        self._notes = None

    def _ensure(self) -> bool:
        while self._i >= self._n:
            batch = next(self._batches, None)
            if batch is None:
                return False
            self._pids = batch.column(0).to_pylist()
            self._offsets = batch.column(1).to_pylist()
            self._status = batch.column(2).to_pylist()
            self._notes = batch.column(3)
            self._i, self._n = 0, batch.num_rows
        return True

    def head(self) -> Optional[Tuple[int, int, int]]:
        """(pid, offset, status) of the next row, or None at the end."""
        if not self._ensure():
            return None
        i = self._i
        return self._pids[i], self._offsets[i], self._status[i]

    def note(self) -> Optional[str]:
        value = self._notes[self._i].as_py()
        return value.decode() if value is not None else None

    def advance(self) -> None:
        self._i += 1


class StreamedOffsetMap:
    """The offset map of one partition as a cursor over its verdicts sorted by offset (see
    ``kafkalog.cleaner.offset_map.OffsetMap``): ``latest_offset_at(key, offset)`` answers offset + 1
    for a superseded record, the offset itself for a record that is its key's latest, None when the
    key is not in the map. Valid only for ascending offsets — the order the cleaner asks in."""

    def __init__(self, rows: _VerdictRows, pid: int, end_offset: int):
        self._rows, self._pid, self.end_offset = rows, pid, end_offset
        self.latest_rows = 0
        self._last_asked = -1

    def latest_offset(self, key: bytes) -> Optional[int]:   # pragma: no cover - the cleaner uses latest_offset_at
        raise TypeError("a streamed offset map answers only latest_offset_at(key, offset)")

    def latest_offset_at(self, key: bytes, offset: int) -> Optional[int]:
        if offset < self._last_asked:
            raise KafkalogError(f"offset map cursor asked for offset {offset} after {self._last_asked}")
        self._last_asked = offset
        rows = self._rows
        while True:
            head = rows.head()
            if head is None or head[0] != self._pid or head[1] > offset:
                return None
            rows.advance()
            if head[2] == V_LATEST:
                self.latest_rows += 1
            if head[1] == offset:
                return offset + 1 if head[2] == V_SUPERSEDED else offset

    def drain(self) -> None:
        rows = self._rows
        while True:
            head = rows.head()
            if head is None or head[0] != self._pid:
                return
            if head[2] == V_LATEST:
                self.latest_rows += 1
            rows.advance()


def _result_row(pid: int, status: str, reason: Optional[str], **values) -> dict:
    row = {f.name: None for f in RESULT_SCHEMA}
    row.update(pid=pid, status=status, reason=reason, **values)
    return row


def _rewrite_partition(pid: int, p: dict, rows: _VerdictRows, *, configs, now: int, dry_run: bool,
                       explain: Sequence[int]) -> dict:
    from kafkalog.cleaner import clean_partition, plan_partition

    started = time.monotonic()
    head = rows.head()                         # the caller saw a row of this pid: its marker comes first
    if head[2] != V_DONE:
        note = (rows.note() if head[2] == V_FAILED else None) or \
            "the key map of this partition is incomplete; nothing was changed"
        StreamedOffsetMap(rows, pid, 0).drain()
        return _result_row(pid, ERROR, note, explain=[f"offset {o}: partition not cleaned ({note})" for o in explain])
    rows.advance()
    config = configs.for_topic(p["topic"])
    offset_map = StreamedOffsetMap(rows, pid, p["upper_bound_offset"])
    try:
        moved = _same_range(plan_partition(p["partition_dir"], config=config, now_ms=now, broker=configs.broker), p)
    except (KafkalogError, OSError) as exc:
        moved = str(exc)
    if moved:
        offset_map.drain()
        return _result_row(pid, ERROR, moved, explain=[f"offset {o}: partition not cleaned ({moved})" for o in explain])
    result = clean_partition(p["partition_dir"], config=config, now_ms=now, broker=configs.broker,
                             offset_map=offset_map, dry_run=dry_run, record_decisions=set(explain) or False,
                             lock=False, update_checkpoint=False)      # the driver writes the checkpoints
    offset_map.drain()
    counts = result.counts.as_dict()
    if result.error is not None:
        status, reason = ERROR, result.error
    elif result.skipped_reason is not None:
        status, reason = SKIPPED, result.skipped_reason
    else:
        status, reason = (WOULD_CLEAN if dry_run else CLEANED), p["reason"]
    return _result_row(
        pid, status, reason, end_offset=result.end_offset, map_size=offset_map.latest_rows, groups=len(result.groups),
        bytes_removed=sum(g.bytes_before - g.bytes_after for g in result.groups),
        duration_s=round(time.monotonic() - started, 3), explain=[result.explain(o) for o in explain],
        **{k: counts[k] for k in COUNT_FIELDS})


def _rewrite_task(eligible: Dict[int, dict], configs, now: int, dry_run: bool, explain: Dict[int, List[int]]):
    from kafkalog.durable import fenced
    from kafkalog.logdir import held_fences

    fences = held_fences()       # the driver's locks: a worker changes nothing once they are gone

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = _VerdictRows(batches)
        while True:
            head = rows.head()
            if head is None:
                return
            pid = head[0]
            with fenced([fences.get(eligible[pid]["log_dir"])]):
                out = _rewrite_partition(pid, eligible[pid], rows, configs=configs, now=now, dry_run=dry_run,
                                         explain=explain.get(pid, []))
            yield pa.RecordBatch.from_pylist([out], schema=RESULT_SCHEMA)
    return run


def _balanced_pids(spark, eligible: List[dict], tasks: int) -> List[int]:
    """A pid per eligible partition such that Spark's hash partitioning of ``pid`` into ``tasks``
    spreads them evenly (largest dirty ranges first, each to the least loaded task)."""
    from pyspark.sql import functions as F

    candidates = spark.range(0, max(64, 16 * len(eligible)) * tasks).select(
        F.col("id").cast("int").alias("pid"), F.expr(f"pmod(hash(cast(id as int)), {tasks})").alias("slot")).collect()
    free: Dict[int, List[int]] = {}
    for r in candidates:
        free.setdefault(r["slot"], []).append(r["pid"])
    for pids in free.values():
        pids.reverse()
    load = [0] * tasks
    out = [0] * len(eligible)
    for i in sorted(range(len(eligible)), key=lambda i: -(eligible[i]["total_bytes"] or 0)):
        slot = min(range(tasks), key=lambda s: (load[s], s))
        load[slot] += max(eligible[i]["total_bytes"] or 0, 1)
        out[i] = free[slot].pop()
    return out


def compact_partitions(spark, eligible: List[dict], *, configs, now: int, dry_run: bool,
                       explain: Dict[Tuple[str, str, int], List[int]]) -> Dict[str, dict]:
    """Steps 2 and 3 for the eligible partitions (plan rows): {partition_dir: result row}."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    if not eligible:
        return {}
    tasks = max(1, min(len(eligible), spark.sparkContext.defaultParallelism * 2))
    pids = _balanced_pids(spark, eligible, tasks)
    by_pid = {pid: p for pid, p in zip(pids, eligible)}
    by_folder = {p["partition_dir"]: pid for pid, p in by_pid.items()}
    explain_by_pid = {by_folder[folder]: offs for (_d, folder, _p), offs in explain.items() if folder in by_folder}

    def emit(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for folder in batch.column(1).to_pylist():
                pid = by_folder[folder]
                yield from _emit_partition(pid, by_pid[pid], configs, now)

    order = sorted(eligible, key=lambda p: -(p["total_bytes"] or 0))
    entries = folders_frame(spark, [(p["log_dir"], p["partition_dir"]) for p in order], tasks=len(order)) \
        .mapInArrow(emit, from_arrow_schema(ENTRY_SCHEMA))
    latest = F.max(F.when(F.col("dirty"), F.col("offset"))).over(Window.partitionBy("pid", "key"))
    status = (F.when(F.col("offset") == DONE_OFFSET, F.lit(V_DONE))
              .when(F.col("offset") == FAILED_OFFSET, F.lit(V_FAILED))
              .when(F.col("offset") < F.col("latest"), F.lit(V_SUPERSEDED))
              .when(F.col("offset") == F.col("latest"), F.lit(V_LATEST)))
    verdicts = entries.withColumn("latest", latest) \
        .select("pid", "offset", status.cast("byte").alias("status"),
                F.when(F.col("offset") < 0, F.col("key")).alias("note")) \
        .where(F.col("status").isNotNull()) \
        .repartition(tasks, "pid").sortWithinPartitions("pid", "offset")
    results = verdicts.mapInArrow(_rewrite_task(by_pid, configs, now, dry_run, explain_by_pid),
                                  from_arrow_schema(RESULT_SCHEMA)).toArrow().to_pylist()
    return {by_pid[r["pid"]]["partition_dir"]: r for r in results}


# --- the job ---------------------------------------------------------------------------------

def _merge(plan: dict, result: Optional[dict], dry_run: bool) -> dict:
    out = dict(plan)
    counts = {k: None for k in COUNT_FIELDS}
    out.update(end_offset=None, map_size=None, groups=None, duration_s=None, bytes_removed=None, **counts)
    if plan["status"] == ELIGIBLE:
        if result is None:
            out.update(status=ERROR, reason="the executors returned no result for this partition")
        else:
            out.update({k: v for k, v in result.items() if k not in ("pid", "explain")})
    total = plan.get("total_bytes")
    out["bytes_before"] = total
    out["bytes_after"] = (total - out["bytes_removed"]) if total is not None and out["bytes_removed"] is not None \
        else total
    return out


def audit_rows(partitions: List[dict], *, run_id: str, run_at: int, now: int, dry_run: bool) -> List[dict]:
    rows = []
    for p in partitions:
        read, kept = p.get("records_read"), p.get("records_kept")
        rows.append(dict(
            run_id=run_id, run_at=run_at, now=now, dry_run=dry_run, log_dir=p["log_dir"], topic=p["topic"],
            partition=p["partition"], status=p["status"], reason=p["reason"], cleanable_ratio=p["cleanable_ratio"],
            first_dirty_offset=p["first_dirty_offset"], end_offset=p["end_offset"], bytes_before=p["bytes_before"],
            bytes_after=p["bytes_after"], records_before=read, records_after=kept,
            records_removed=None if read is None else read - kept, records_superseded=p["records_superseded"],
            tombstones_removed=p["tombstones_removed"], aborted_records_removed=p["aborted_records_removed"],
            markers_removed=p["markers_removed"], null_key_records_removed=p["records_null_key"],
            map_size=p["map_size"], duration_s=p["duration_s"]))
    return rows


def _summary(partitions: List[dict]) -> dict:
    def total(key):
        return sum(p[key] or 0 for p in partitions)
    statuses: Dict[str, int] = {}
    for p in partitions:
        statuses[p["status"]] = statuses.get(p["status"], 0) + 1
    return dict(partitions=len(partitions), statuses=statuses, bytes_before=total("bytes_before"),
                bytes_after=total("bytes_after"), bytes_removed=total("bytes_removed"),
                records_read=total("records_read"), records_kept=total("records_kept"),
                records_superseded=total("records_superseded"), tombstones_removed=total("tombstones_removed"),
                aborted_records_removed=total("aborted_records_removed"), markers_removed=total("markers_removed"))


def _explain_text(topic: str, partition: int, offset: int, partitions: List[dict], results: Dict[str, dict],
                  explain_keys: dict) -> str:
    matches = [p for p in partitions if p["topic"] == topic and p["partition"] == partition]
    if not matches:
        return f"offset {offset}: no partition {topic}-{partition} in the log dirs"
    p = matches[0]
    result = results.get(p["partition_dir"])
    if result is not None:
        offs = explain_keys.get((p["log_dir"], p["partition_dir"], partition), [])
        if offset in offs:
            return result["explain"][offs.index(offset)]
    return f"offset {offset}: partition not cleaned ({p['reason']})"


def main(argv: Sequence[str], *, spark=None) -> int:
    args, configs, log_dirs, now, run_id, run_at, started = start_job(build_parser(), argv)
    topics = topics_option(args.topics)
    if topics is not None and not topics:
        raise UsageError("--topics names no topic")

    note = "dry run only — a real run refuses it"
    with locked_log_dirs(log_dirs, modifying=not args.dry_run, read_only_note=note) as (usable, refused):
        folders = partition_folders_of(usable, topics)
        spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
        progress(f"planning compaction of {len(folders)} folders in {len(usable)} log dir(s) as of {now}")
        plans = plan_partitions(spark, folders, configs=configs, now=now)
        eligible = [p for p in plans if p["status"] == ELIGIBLE]
        explain_keys: Dict[Tuple[str, str, int], List[int]] = {}
        for topic, partition, offset in args.explain:
            for p in eligible:
                if p["topic"] == topic and p["partition"] == partition:
                    explain_keys.setdefault((p["log_dir"], p["partition_dir"], partition), []).append(offset)
        progress(f"{len(eligible)} of {len(plans)} partitions to {'dry-run' if args.dry_run else 'clean'}")
        results = compact_partitions(spark, eligible, configs=configs, now=now, dry_run=args.dry_run,
                                     explain=explain_keys)
        if not args.dry_run:
            _write_cleaner_checkpoints(eligible, results, refused)

    partitions = sorted((_merge(p, results.get(p["partition_dir"]), args.dry_run) for p in plans),
                        key=lambda p: (p["log_dir"], p["topic"], p["partition"]))
    explained = [dict(topic=t, partition=n, offset=o,
                      explanation=_explain_text(t, n, o, partitions, results, explain_keys))
                 for t, n, o in args.explain]
    audit = None
    if args.audit and partitions:
        rows = audit_rows(partitions, run_id=run_id, run_at=run_at, now=now, dry_run=args.dry_run)
        audit = delta_tables.append_rows(spark, rows, AUDIT_SCHEMA, args.audit, engine=args.delta_engine,
                                         metadata={"job": JOB, "run_id": run_id, "dry_run": str(args.dry_run).lower()})
        progress(f"{len(rows)} partition rows appended to {args.audit} (Delta version {audit['version']})")
    summary = _summary(partitions)
    summary.update(log_dirs_refused=refused, dry_run=bool(args.dry_run), now_ms=now,
                   duration_s=round(time.monotonic() - started, 3))
    report = dict(job=JOB, run_id=run_id, now_ms=now, dry_run=bool(args.dry_run), summary=summary,
                  partitions=partitions, explain=explained, audit=audit)
    _print_summary(report)
    write_report(args.report, report)
    failed = summary["statuses"].get(ERROR, 0) or refused
    return EXIT_PARTIAL if failed else EXIT_OK


def _write_cleaner_checkpoints(eligible: list, results: dict, refused: list) -> None:
    """``cleaner-offset-checkpoint``: one atomic rewrite per log dir, on the driver (which holds the
    lock), with the end offset of every partition cleaned there. The rewriting tasks run in parallel
    and must not each rewrite the shared file."""
    from kafkalog.cleaner.cleaner import update_cleaner_checkpoints

    by_log_dir: Dict[str, Dict[Tuple[str, int], int]] = {}
    for p in eligible:
        r = results.get(p["partition_dir"])
        if r is not None and r["status"] == CLEANED and r.get("end_offset") is not None:
            by_log_dir.setdefault(p["log_dir"], {})[(p["topic"], p["partition"])] = r["end_offset"]
    for log_dir, offsets in by_log_dir.items():
        try:
            update_cleaner_checkpoints(log_dir, offsets)
        except (KafkalogError, OSError) as exc:
            refused.append(dict(log_dir=log_dir, message=(
                f"cannot update its cleaner-offset-checkpoint ({exc}); the cleaned segments are in place, and the "
                "next run cleans those partitions again from the old checkpoint, which is safe")))


def _print_summary(report: dict) -> None:
    s = report["summary"]
    dry = report["dry_run"]
    done = s["statuses"].get(WOULD_CLEAN if dry else CLEANED, 0)
    print(f"compaction {'plan (dry run)' if dry else 'done'} as of now_ms={report['now_ms']}: {done} of "
          f"{s['partitions']} partitions {'would be ' if dry else ''}cleaned, {s['bytes_removed']:,} bytes and "
          f"{s['records_read'] - s['records_kept']:,} records {'to be ' if dry else ''}removed")
    for p in report["partitions"]:
        ratio = "-" if p["cleanable_ratio"] is None else f"{p['cleanable_ratio']:.3f}"
        line = f"  {p['topic']}-{p['partition']}: {p['status']} (dirty ratio {ratio}): {p['reason']}"
        if p["status"] in (CLEANED, WOULD_CLEAN):
            line += (f"; {p['bytes_before']:,} -> {p['bytes_after']:,} bytes, {p['records_read']:,} -> "
                     f"{p['records_kept']:,} records")
        print(line)
    for r in s["log_dirs_refused"]:
        print(f"  refused: {r['message']}")
    for e in report["explain"]:
        print(f"explain {e['topic']}-{e['partition']}@{e['offset']}: {e['explanation']}")
    if dry and done:
        print("  (dry run: nothing was changed)")


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from .job import run
    return run(JOB, main, argv)
