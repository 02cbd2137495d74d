"""``spark-submit.sh compact --split``: one partition's compaction round split across tasks (issue 34) —
Spark plumbing only; the steps are ``kafkalog.cleaner.split_round``'s.

Three stages, then the driver:

* plan   — one task per candidate partition (``partition_run.run_or_split_partition``):
           a partition not cleanable, or with fewer cleanable bytes than the threshold, is done there as
           in the one-task path (its row comes back); the others come back as their ``SplitRound``;
* map    — one task per (partition, hash slice): ``slice_bits``, the bitsets of the records the
           slice's keys supersede (1 bit per record of the recopied range; no key leaves the task),
           within the per-task share of ``log.cleaner.dedupe.buffer.size``; the driver ORs them;
* recopy — one task per (partition, segment group), the merged bitsets broadcast:
           ``clean_split_group`` writes that group's ``.cleaned`` files, verified;
* swap   — on the driver, which holds the log dirs' locks: ``swap_in_split_round`` installs every
           group of a partition at once and writes its ``cleaner-offset-checkpoint`` entry.

Each map and recopy task measures its own worker's peak RssAnon above that worker's idle (``AnonPeak``,
as a one-task round does); the partition's row reports the largest (``rss_anon_above_idle_bytes``).

Only bitsets, plans and report rows cross the JVM, pickled in one binary column. A partition whose
task fails reports its error, its ``.cleaned`` files are removed and nothing of it is swapped in;
the others go on. A job killed before a swap-in leaves ``.cleaned`` files only, which ``kafkalog
recover`` (a broker's startup) drops.
"""
from __future__ import annotations

import os
import pickle
import time
from dataclasses import replace
from typing import Callable, Dict, Iterator, List, Sequence, Tuple

import pyarrow as pa

from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.partition_run import (ERROR, OUTCOME_FAILED, AnonPeak, SplitStart,
                                            run_or_split_partition)
from kafkalog.cleaner.split_round import (GroupDone, SliceBits, clean_split_group, discard_split_round, merge_bits,
                                          slice_bits, swap_in_split_round)
from kafkalog.errors import KafkalogError
from kafkalog.fs.durable import fenced
from kafkalog.fs.lock import attempt_lock, held_fences
from udfs.task_attempt import folder_row, run_claimed, task_is_retry

PAYLOAD = pa.schema([("task", pa.int64()), ("payload", pa.binary())])
_FAILED = "failed"
MAX_SPLIT_SLICES = 4     # a split map pass runs in at least min(task slots, this) slices: each reads the whole range
GROUP_TASKS_PER_SLOT = 2  # recopy tasks of a split partition per task slot (at most one per segment group)


def group_chunks(split, tasks: int) -> List[List[int]]:
    """The round's segment groups dealt to at most ``tasks`` recopy tasks, largest first onto the task
    with the fewest bytes so far (each task's groups then in log order)."""
    sizes = [sum(s.size for s in split.group_segments(g)) for g in range(len(split.groups))]
    chunks: List[List[int]] = [[] for _ in range(max(1, min(tasks, len(sizes))))]
    load = [0] * len(chunks)
    for g in sorted(range(len(sizes)), key=lambda g: -sizes[g]):
        k = load.index(min(load))
        chunks[k].append(g)
        load[k] += sizes[g]
    return [sorted(c) for c in chunks if c]


def _run_tasks(spark, count: int, work: Callable[[int], object]) -> Dict[int, object]:
    """``work(i)`` for i in [0, count), one Spark task each; the answers (or ``(_FAILED, message)``
    for a task whose data failed it), by i."""
    from pyspark.sql.pandas.types import from_arrow_schema

    if not count:
        return {}

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ids, out = [], []
            for i in batch.column(0).to_pylist():
                try:
                    answer = work(i)
                except (KafkalogError, OSError, MemoryError, ValueError) as e:
                    answer = (_FAILED, str(e) or type(e).__name__)
                ids.append(i)
                out.append(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
            if ids:
                yield pa.RecordBatch.from_arrays([pa.array(ids, pa.int64()), pa.array(out, pa.binary())],
                                                 schema=PAYLOAD)

    table = spark.range(0, count, numPartitions=count).mapInArrow(run, from_arrow_schema(PAYLOAD)).toArrow()
    return {i: pickle.loads(p) for i, p in zip(table.column("task").to_pylist(), table.column("payload").to_pylist())}


def _failed(answer) -> str | None:
    return answer[1] if isinstance(answer, tuple) and len(answer) == 2 and answer[0] == _FAILED else None


def compact_split(spark, folders: Sequence[Tuple[str, str]], *, configs, now: int, options: CleanOptions,
                  threshold: int) -> List[dict]:
    """The report rows of ``folders``, each cleaned by a round split across tasks when its cleanable
    bytes reach ``threshold``, else as ``run_partition`` cleans it (in the plan stage's task).

    :param spark: the session.
    :param folders: (log dir, partition folder) pairs; the driver holds each log dir's lock.
    :param configs: the broker's and the topics' configs.
    :param now: the time every time-based rule is evaluated at.
    :param options: ``dry_run`` and ``map_budget_bytes`` (the per-task share of the dedupe buffer).
    :param threshold: cleanable bytes from which a round is split (0: every cleanable partition).
    """
    if not folders:
        return []
    fences = held_fences()
    slots = max(1, spark.sparkContext.defaultParallelism)
    min_slices = min(slots, MAX_SPLIT_SLICES)
    started = time.monotonic()

    def plan(i: int):
        log_dir, folder = folders[i]
        with fenced([fences.get(log_dir)]):
            return run_claimed(log_dir, folder, lambda: run_or_split_partition(
                log_dir, folder, configs=configs, now_ms=now, options=options, split_at_bytes=threshold,
                min_slices=min_slices, max_slices=slots), retry=task_is_retry() and not options.dry_run)

    planned = _run_tasks(spark, len(folders), plan)
    rows: List[dict] = []
    splits: List[Tuple[str, SplitStart]] = []
    for i, (log_dir, folder) in enumerate(folders):
        answer = planned[i]
        if isinstance(answer, SplitStart):
            splits.append((log_dir, answer))
        elif isinstance(answer, dict):
            rows.append(answer)
        else:            # run_or_split_partition reports its data's errors: this is the task's own failure
            rows.append(folder_row(log_dir, folder, status=ERROR, outcome=OUTCOME_FAILED,
                                   reason=f"the plan task failed: {_failed(answer)}"))
    if not splits:
        return rows
    # map: (partition, slice)
    slice_tasks = [(p, s) for p, (_d, start) in enumerate(splits) for s in range(start.split.slices)]
    rounds = spark.sparkContext.broadcast([start.split for _d, start in splits])

    def one_slice(i: int) -> SliceBits:
        p, s = slice_tasks[i]
        with AnonPeak() as memory:       # this worker's RssAnon above its idle, as a one-task round reports it
            answer = slice_bits(rounds.value[p], s)
        return replace(answer, rss_anon_above_idle_bytes=memory.above_idle)

    sliced = _run_tasks(spark, len(slice_tasks), one_slice)
    failed: Dict[int, str] = {}
    merged: Dict[int, tuple] = {}
    for p, (_d, start) in enumerate(splits):
        parts = [sliced[i] for i, (q, _s) in enumerate(slice_tasks) if q == p]
        errors = [e for e in map(_failed, parts) if e is not None]
        if errors:
            failed[p] = errors[0]
            continue
        try:
            merged[p] = merge_bits(start.split, parts)  # type: ignore[arg-type]
        except KafkalogError as e:
            failed[p] = str(e)
    # recopy: (partition, group), the merged bits broadcast
    # recopy: a few tasks per partition, each some of its segment groups (a task per group cost more in
    # Spark's per-task work than a group of 48 MiB takes), the merged bits broadcast
    group_tasks = [(p, gs) for p, (_d, start) in enumerate(splits) if p in merged
                   for gs in group_chunks(start.split, GROUP_TASKS_PER_SLOT * slots)]
    bits = spark.sparkContext.broadcast({p: merged[p] for p in {p for p, _gs in group_tasks}})

    def some_groups(i: int) -> List[GroupDone]:
        p, gs = group_tasks[i]
        log_dir = splits[p][0]
        split = rounds.value[p]
        answers = []
        for g in gs:
            first = split.group_segments(g)[0]           # the group's claim (see udfs.task_attempt)
            with AnonPeak() as memory, fenced([fences.get(log_dir)]), \
                    attempt_lock(first.log_path, what=f"group {g} of {os.path.basename(split.path)}"):
                superseded, found, stats = bits.value[p]
                done = clean_split_group(split, g, superseded, found, dry_run=options.dry_run, stats=stats)
            answers.append(replace(done, rss_anon_above_idle_bytes=memory.above_idle))
        return answers

    recopied = _run_tasks(spark, len(group_tasks), some_groups)
    # swap-in, per partition, on the driver (it holds the locks)
    for p, (log_dir, start) in enumerate(splits):
        elapsed = time.monotonic() - started
        if p in failed:
            rows.append(start.fail(failed[p], elapsed))
            continue
        answers = [recopied[i] for i, (q, _gs) in enumerate(group_tasks) if q == p]
        done = [d for a in answers if _failed(a) is None for d in a] + [a for a in answers if _failed(a) is not None]
        errors = [e for e in map(_failed, done) if e is not None]
        if errors:
            if not options.dry_run:
                discard_split_round(start.split)
            rows.append(start.fail(errors[0], elapsed))
            continue
        with fenced([fences.get(log_dir)]):
            result = swap_in_split_round(start.split, done, merged[p][2],  # type: ignore[arg-type]
                                         options=CleanOptions(dry_run=options.dry_run, lock=False))
        tasks = [sliced[i] for i, (q, _s) in enumerate(slice_tasks) if q == p] + done
        rows.append(start.finish(result, options.dry_run, time.monotonic() - started,
                                 [t.rss_anon_above_idle_bytes for t in tasks]))  # type: ignore[union-attr]
    rounds.unpersist()
    bits.unpersist()
    return rows


__all__ = ["MAX_SPLIT_SLICES", "compact_split"]
