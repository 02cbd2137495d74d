"""Clean one partition folder end to end, as a broker's cleaner thread does one round
(``Cleaner.doClean``/``cleanSegments``/``cleanInto`` and ``LocalLog.replaceSegments``; Kafka's ``Cleaner.java``, ``LocalLog.java``).

Round, with ``now_ms`` explicit for every time-based rule:

1. plan   — segments, log start offset (``log-start-offset-checkpoint``, else first base), high
            watermark (``replication-offset-checkpoint``, default 0, clamped to [logStart, LEO]),
            cleaner checkpoint, producer state loaded as a broker loads it (the newest
            ``.snapshot`` in (log start, log end], expired producers dropped, then the batch
            headers from its offset replayed; empty control batches change nothing) → first
            unstable offset (clamped to the log start) and the active producers, then
            ``cleanable_offsets`` (``LogCleanerManager.cleanableOffsets``).
2. map    — over [firstDirty, upperBound) (``Cleaner.buildOffsetMap``): the compiled map (``key_walk``) within
            ``map_budget`` bytes, in hash-slice passes if the keys do not fit (engine "compiled"), or
            the reference dict (``build_offset_map``), or a map passed in.
3. recopy — every segment with base < map.end_offset, from the start of the log, grouped by
            ``group_segments_by_size``; ONE transaction tracker for the round, carried through the
            groups in order (``Cleaner.doClean``), with a fresh ``.txnindex`` entry list per group;
            per source segment the aborted transactions of [its base, next base or its next
            offset) are added to it; batches are
            filtered (record_filter) in read chunks of log.cleaner.io.buffer.size / threads / 2
            bytes (grown for an oversized batch); each chunk's output appended at once, its index
            entries per batch (Kafka 4.4's ``LogSegment.append``: (lastOffset, position) once
            more than index.interval.bytes were appended since the last entry).
4. swap   — per group, in this order (each step fsynced; ``on_step`` is called after each):
              a. write ``<base>.log.cleaned`` (+ ``.index``/``.timeindex`` trimmed with the final
                 time entry, ``.txnindex`` if any entry), mtime of .log/.index/.timeindex = the
                 LAST source segment's; re-read and verify the new .log        [STEP_CLEANED]
              b. rename each ``.cleaned`` → ``.swap`` (log, index, timeindex, txnindex) [STEP_SWAP]
              c. rename each old segment's files ``+.deleted`` (ascending), and the ``.snapshot``
                 of every old segment whose base is not the new base             [STEP_MARK_DELETED]
              d. rename each ``.swap`` → final name                                [STEP_INSTALL]
              e. remove the ``.deleted`` files                                     [STEP_PURGE]
            then ``cleaner-offset-checkpoint[tp] = map.end_offset``, atomically    [STEP_CHECKPOINT]
            A crash anywhere is repaired by a broker's startup, or ``kafkalog recover`` (``LogLoader.load``):
            before b. completes, the .swap/.cleaned files are dropped (old data intact); after,
            the swap is completed. A job that loses the log dir's lock mid-swap changes nothing
            more (not even this repair): the next ``recover`` does it. Known window inherited from Kafka: a crash inside c. keeps an
            old segment whose base is >= the new segment's next offset (all its records were
            removed) — the log then holds the cleaned data plus that old, uncleaned segment;
            nothing is lost.

Deviations, all on the safe side: CRCs of every source batch are checked (Kafka does not) and a
corrupt or torn segment refuses the partition; v0/v1 data refuses the partition; the offset map
compares exact key bytes and, when full, is refilled in hash-slice passes instead of ending the round
early; producer expiry is evaluated exactly at ``now_ms``; the cleaner-offset
checkpoint is never rewritten in dry-run mode (a broker rewrites an out-of-range one at once).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT, KRAFT_METADATA_TOPIC
from kafkalog.cleaner.key_map import dedupe_budget
from kafkalog.cleaner.clean_options import CleanOptions, RecordDecisions
from kafkalog.cleaner.cleaned_segment import CleanedSink, GroupOutput
from kafkalog.cleaner.key_walk import KeyVerdicts, build_key_verdicts, segment_ordinals
from kafkalog.cleaner.offset_map import ExactOffsetMap, OffsetMap, build_offset_map, map_entries
from kafkalog.cleaner.plan import PartitionPlan, dirty_batches, map_tracker, max_batch_bytes, plan_partition
from kafkalog.cleaner.record_filter import FilterCounts, FilteredBatch, filter_batch, is_batch_last_record_of_producer
from kafkalog.cleaner.results import BatchAudit, GroupResult, PartitionCleanResult
from kafkalog.cleaner.segment_grouping import group_segments_by_size
from kafkalog.cleaner.source_segments import read_batches, read_windows
from kafkalog.cleaner.swap import STEP_CHECKPOINT, report_step, swap_in, update_cleaner_checkpoint
from kafkalog.cleaner.transaction_metadata import CleanedTransactionMetadata
from kafkalog.config import BrokerConfig, KafkaConfigs, LogConfig
from kafkalog.engine import COMPILED, resolve as resolve_engine
from kafkalog.errors import FenceLostError, KafkalogError
from kafkalog.index.builder import IndexAppender
from kafkalog.fs import durable
from kafkalog.log.local_log import collect_aborted_transactions
from kafkalog.log.logdir import scan_log_dir
from kafkalog.log.recover import recover_partition
from kafkalog.fs.lock import is_locked
from kafkalog.fs.names import parse_partition_dir_name
from kafkalog.fs.lock import lock_log_dir, locked_refusal
from kafkalog.fs.names import CLEANED_SUFFIX, format_segment_file_name
from kafkalog.log.segment import LogSegment
from kafkalog.topic_partition import TopicPartition
import kafkalog.cleaner.filter_to as filter_to

# Tests set this to hash every key by its length only: collisions everywhere, told apart by the bytes.
KEY_HASH_WEAK = False


# --- map pass (Cleaner.buildOffsetMap) -------------------------------------------------------

def offset_map_entries(plan: PartitionPlan) -> Iterable[Tuple[bytes, int]]:
    """The (key, offset) pairs of the dirty range that enter the map, in log order (``Cleaner.buildOffsetMapForSegment``): the
    reference walk, for a caller that builds a map of its own (e.g. Kafka's bounded one, in tests)."""
    return map_entries(dirty_batches(plan), map_tracker(plan), plan.first_dirty_offset)


def map_budget(broker: BrokerConfig, concurrent_cleaners: Optional[int] = None) -> int:
    """Bytes one cleaner's key map may take: ``log.cleaner.dedupe.buffer.size`` split across the
    cleaners running at once (``log.cleaner.threads`` unless the caller runs another number, as the
    Spark job does with its task slots)."""
    threads = concurrent_cleaners if concurrent_cleaners is not None else int(broker.setting("log.cleaner.threads"))
    return dedupe_budget(int(broker.setting("log.cleaner.dedupe.buffer.size")), threads)


def build_key_map(plan: PartitionPlan, broker: BrokerConfig = BrokerConfig(), *, budget: Optional[int] = None
                  ) -> KeyVerdicts:
    """Pass 1 of the round (the compiled engine): the compiled map within ``budget`` bytes (default
    ``map_budget(broker)``), in hash-slice passes when the keys do not fit."""
    return build_key_verdicts(plan, budget=budget or map_budget(broker),
                              load_factor=float(broker.setting("log.cleaner.io.buffer.load.factor")),
                              max_batch_bytes=max_batch_bytes(plan.config), weak_hash=KEY_HASH_WEAK)


def build_partition_offset_map(plan: PartitionPlan) -> ExactOffsetMap:
    """Pass 1 of the round as the reference engine builds it: a dict of the exact keys."""
    return build_offset_map(dirty_batches(plan), map_tracker(plan), first_dirty_offset=plan.first_dirty_offset,
                            upper_bound_offset=plan.upper_bound_offset)


# --- chunking --------------------------------------------------------------------------------

def read_chunks(positions: Sequence[int], sizes: Sequence[int], *, buffer_size: int, max_buffer_size: int,
                max_message_bytes: int) -> List[Tuple[int, int]]:
    """Split one source segment's batches into the cleaner's read chunks: [(first, end) batch
    index ranges]. A chunk holds the complete batches inside min(capacity, bytes left) from its
    start; when none fits, the capacity doubles (up to max(max.message.bytes or the batch's size,
    max buffer)). Capacity resets per segment (``Cleaner.cleanInto``)."""
    chunks = []
    cap = max(buffer_size, 1)
    i, n = 0, len(positions)
    while i < n:
        start = positions[i]
        j = i
        while j < n and positions[j] + sizes[j] - start <= cap:
            j += 1
        if j == i:
            limit = max(max_message_bytes if cap < max_message_bytes else sizes[i], max_buffer_size)
            if cap >= limit:
                cap = sizes[i]          # Kafka would fail here; the batch is whole, so read it alone
            else:
                cap = min(cap * 2, limit)
            continue
        chunks.append((i, j))
        i = j
    return chunks


# --- one group -------------------------------------------------------------------------------

def _clean_group(plan: PartitionPlan, sources: List[LogSegment], offset_map: OffsetMap,
                 io_buffer_size: int, result: PartitionCleanResult, record_decisions: RecordDecisions,
                 sink: CleanedSink, tracker: CleanedTransactionMetadata, ordinals: Dict[int, int], engine: str) -> GroupOutput:
    """Recopy one group into ``sink``. ``tracker`` is the round's: the groups of a round are cleaned
    in order with the same tracker (a COMMIT/ABORT is judged by its data in earlier groups).
    ``ordinals``: each recopied segment's first record in the round's recopied range."""
    cfg = plan.config
    base = sources[0].base_offset
    appender = IndexAppender(base, index_interval_bytes=cfg.index_interval_bytes, engine=engine)
    out = GroupOutput(base, sources, sink, appender, tracker.start_cleaned_segment(), FilterCounts())
    want_reasons = bool(record_decisions)
    for k, seg in enumerate(sources):
        seg_upper = sources[k + 1].base_offset if k + 1 < len(sources) else seg.next_offset
        tracker.add_aborted_transactions(collect_aborted_transactions(
            plan.segments, seg.base_offset, seg_upper, plan.log_start_offset))
        h = seg.scan().headers
        chunks = read_chunks(h.position.tolist(), h.size.tolist(), buffer_size=io_buffer_size,
                             max_buffer_size=cfg.max_message_bytes, max_message_bytes=cfg.max_message_bytes)
        if engine == COMPILED:           # decoded windows as columns (filter_to); else a RecordRow per record
            _clean_segment_fast(plan, seg, chunks, tracker, offset_map, result, record_decisions, out,
                                ordinals[seg.base_offset])
            continue
        batches = read_batches(seg, max_batch_bytes=max_batch_bytes(cfg))     # streamed, in file order
        for first, end in chunks:
            chunk = out.begin_chunk()
            for _ in range(end - first):
                batch = next(batches)
                header = batch.header
                if header.is_control:
                    can_discard = tracker.on_control_batch(header.producer_id, header.last_offset, batch.control_type)
                else:
                    can_discard = tracker.on_data_batch(header.producer_id, header.last_offset, header.is_transactional)
                fb = filter_batch(batch, can_discard_batch=can_discard,
                                  is_last_of_active_producer=is_batch_last_record_of_producer(header, plan.active_producers),
                                  high_watermark=plan.high_watermark, offset_map=offset_map,
                                  now_ms=plan.now_ms, delete_retention_ms=cfg.delete_retention_ms,
                                  record_decisions=want_reasons)
                _record_audit(result, fb, record_decisions)
                out.counts.add(fb.counts)
                out.write(chunk, fb.output, fb.max_offset, fb.max_timestamp, fb.shallow_offset_of_max_timestamp)
            out.end_chunk(chunk)
    return out


def _clean_segment_fast(plan: PartitionPlan, seg: LogSegment, chunks, tracker: CleanedTransactionMetadata,
                        offset_map: OffsetMap, result: PartitionCleanResult, record_decisions: RecordDecisions,
                        out: GroupOutput, ordinal: int) -> None:
    """The chunk loop of ``_clean_group`` for one source segment, over decoded windows; ``ordinal``:
    the index of the segment's first record in the recopied range (for a map kept as bitsets)."""
    cfg = plan.config
    if not record_decisions and filter_to.available(offset_map):
        _recopy_compiled(plan, seg, chunks, tracker, offset_map, out, ordinal)  # type: ignore[arg-type]  # KeyVerdicts is not an OffsetMap (no latest_offset); callers check isinstance
        return
    asked = None
    if record_decisions is not True and record_decisions:
        asked = np.sort(np.fromiter((int(o) for o in record_decisions), dtype=np.int64))
    max_bytes = max_batch_bytes(cfg)
    windows = read_windows(seg, max_batch_bytes=max_bytes)
    pending: List[filter_to.BatchOutput] = []
    taken = 0

    def next_batch() -> filter_to.BatchOutput:
        nonlocal pending, taken, ordinal
        while taken == len(pending):
            win = next(windows)
            pending = filter_to.filter_window(
                win, tracker=tracker, active=plan.active_producers,
                high_watermark=plan.high_watermark, offset_map=offset_map, now_ms=plan.now_ms,
                delete_retention_ms=cfg.delete_retention_ms, counts=out.counts, record_decisions=record_decisions,
                asked=asked, max_batch_bytes=max_bytes, ordinal_base=ordinal)
            ordinal += int(win.record_start[-1])
            taken = 0
        taken += 1
        return pending[taken - 1]

    for first, end in chunks:
        chunk = out.begin_chunk()
        for _ in range(end - first):
            bo = next_batch()
            if bo.filtered is not None:
                _record_audit(result, bo.filtered, record_decisions)
            out.write(chunk, bo.output, bo.max_offset, bo.max_timestamp, bo.shallow_offset_of_max_timestamp)
        out.end_chunk(chunk)


def _recopy_compiled(plan: PartitionPlan, seg: LogSegment, chunks, tracker: CleanedTransactionMetadata,
                     offset_map: KeyVerdicts, out: GroupOutput, ordinal: int) -> None:
    """The loop over ``filter_to``'s windows: what each window's batches wrote, one write each. The
    read chunks (``chunks``) change nothing in the output: the indexes are kept per batch, as Kafka
    4.4's ``LogSegment.append`` keeps them for a chunk of several batches."""
    windows = filter_to.filtered_windows(
        seg, tracker=tracker, active=plan.active_producers, high_watermark=plan.high_watermark,
        offset_map=offset_map, now_ms=plan.now_ms, delete_retention_ms=plan.config.delete_retention_ms,
        counts=out.counts, max_batch_bytes=max_batch_bytes(plan.config), ordinal=ordinal)
    for win in windows:
        out.write_batches(win.data, win.start, win.end)


def _record_audit(result: PartitionCleanResult, fb: FilteredBatch, record_decisions: RecordDecisions) -> None:
    if not fb.output:
        written = "removed"
    elif fb.verbatim:
        written = "original"
    elif fb.counts.records_kept == 0:
        written = "empty"
    else:
        written = "rewritten"
    if record_decisions is True:
        result.batches.append(BatchAudit(fb.base_offset, fb.last_offset, fb.decision.retention, fb.decision.reason,
                                         written))
        for off, why in fb.decisions:
            result.record_reasons[off] = why
    elif record_decisions:          # only the batches and records of the offsets asked about
        if any(fb.base_offset <= o <= fb.last_offset for o in record_decisions):
            result.batches.append(BatchAudit(fb.base_offset, fb.last_offset, fb.decision.retention,
                                             fb.decision.reason, written))
            for off, why in fb.decisions:
                if off in record_decisions:
                    result.record_reasons[off] = why


# --- entry points ----------------------------------------------------------------------------

def default_io_buffer_size(broker: BrokerConfig) -> int:
    """log.cleaner.io.buffer.size / log.cleaner.threads / 2 (262,144 by default)."""
    threads = max(int(broker.setting("log.cleaner.threads")), 1)
    return max(int(broker.setting("log.cleaner.io.buffer.size")) // threads // 2, 1)


def _clean_locked(partition_dir: Path, *, config: LogConfig, now_ms: int, broker: BrokerConfig,
                  options: CleanOptions, offset_map: Optional[OffsetMap] = None,
                  plan: Optional[PartitionPlan] = None, output=None) -> PartitionCleanResult:
    dry_run, force, record_decisions = options.dry_run, options.force, options.record_decisions
    if output is not None and dry_run:
        raise ValueError("a dry run writes nothing: no output to write to")
    engine = resolve_engine(options.engine)
    try:
        topic, partition, kind = parse_partition_dir_name(partition_dir.name)
    except KafkalogError as e:
        return PartitionCleanResult(partition_dir, "", -1, error=str(e))
    result = PartitionCleanResult(partition_dir, topic, partition, dry_run=dry_run)
    if kind != "live":
        result.skipped_reason = f"{kind} partition folder (only live partitions are cleaned)"
        return result
    try:
        if plan is None:
            plan = plan_partition(partition_dir, config=config, now_ms=now_ms, broker=broker,
                                  high_watermark=options.high_watermark)
        result.offsets = plan.offsets
        if not plan.offsets.cleanable and not (force and config.compact
                                               and plan.upper_bound_offset > plan.first_dirty_offset):
            result.skipped_reason = plan.offsets.reason.value
            return result
        if any(s.has_legacy for s in plan.segments if s.base_offset < plan.upper_bound_offset):
            result.skipped_reason = "segments hold v0/v1 messages; the legacy compaction rules are not implemented"
            return result
        if offset_map is None:
            if engine == COMPILED:
                verdicts = build_key_map(plan, broker, budget=options.map_budget_bytes)
                result.map_stats = verdicts.stats
                offset_map = verdicts  # type: ignore[assignment]  # KeyVerdicts: see _clean_segment_fast
            else:
                offset_map = build_partition_offset_map(plan)
        end_offset = min(offset_map.end_offset, plan.upper_bound_offset)
        result.map_size = len(offset_map) if hasattr(offset_map, "__len__") else 0  # type: ignore[arg-type]
        result.end_offset = end_offset
        recopied = [s for s in plan.segments if s.base_offset < end_offset]
        ordinals, _records = segment_ordinals(recopied)    # each recopied segment's first record's ordinal
        groups = group_segments_by_size(
            [s.segment for s in recopied],
            max_size=config.segment_bytes, max_index_size=config.segment_index_bytes,
            first_uncleanable_offset=plan.upper_bound_offset)
        io_size = options.io_buffer_size or default_io_buffer_size(broker)
        outputs: List[GroupOutput] = []
        sinks: List[CleanedSink] = []
        tracker = CleanedTransactionMetadata()   # one per round (Cleaner.doClean), never one per group
        try:
            for idx in groups:
                sources = [recopied[i] for i in idx]
                sink = (output.sink(sources[0].base_offset) if output is not None else   # output_dir: final names there
                        CleanedSink(None if dry_run else partition_dir / format_segment_file_name(sources[0].base_offset, "log", CLEANED_SUFFIX)))
                sinks.append(sink)
                g = _clean_group(plan, sources, offset_map, io_size, result, record_decisions, sink, tracker,
                                 ordinals, engine)
                result.counts.add(g.counts)
                result.groups.append(GroupResult(g.base_offset, [s.base_offset for s in sources],
                                                 sum(s.size for s in sources), g.sink.size,
                                                 len(g.txn_entries), g.counts))
                if dry_run:
                    g.appender.finish()          # raises here if the indexes could not be built
                elif output is not None:         # written at once: one group's stream open at a time
                    output.install(g)
                    result.groups_committed += 1
                else:
                    outputs.append(g)
        except BaseException:
            for sink in sinks:                   # nothing swapped yet: drop the partial .cleaned files
                sink.discard()
            raise
        if dry_run:
            return result
        if output is not None:          # a copy elsewhere: no swap, and the caller writes the checkpoints
            result.cleaned = True
            return result
        # Kafka swaps each group right after cleaning it; all groups were computed first here (their
        # .log.cleaned streamed to disk, which recovery drops) so that a problem found in any group
        # changes nothing in the live segments.
        try:
            for g in outputs:
                swap_in(partition_dir, g, options.on_step)
                result.groups_committed += 1
        except FenceLostError as e:
            _stop_after_lost_fence(result, e)
            return result
        except (KafkalogError, OSError) as e:
            _recover_after_failed_swap(partition_dir, result, e)
            return result
        if options.update_checkpoint:
            update_cleaner_checkpoint(partition_dir.parent, topic, partition, end_offset)
            report_step(options.on_step, STEP_CHECKPOINT, partition_dir.parent / CLEANER_OFFSET_CHECKPOINT)
        result.cleaned = True
        return result
    except KafkalogError as e:
        result.error = str(e)
        return result
    except OSError as e:
        result.error = _os_error_text(e, partition_dir)
        return result


def _os_error_text(e: OSError, partition_dir: Path) -> str:
    return f"{e.filename or partition_dir}: {e.strerror or e}"


def _stop_after_lost_fence(result: "PartitionCleanResult", e: FenceLostError) -> None:
    """The log dir's lock was lost in the middle of a swap-in (the job that held it is gone): the
    partition is left exactly as it is — another job or a broker may own the dir now, so neither
    finishing nor rolling back the group is ours to do. ``kafkalog recover``, or the next run under a
    held lock (which refuses to clean on top of a pending swap), finishes it as a broker's startup does."""
    result.error = (f"{e}; the swap-in of group {result.groups_committed + 1} of {len(result.groups)} was left as it "
                    "was (nothing changed after the lock was lost): run `kafkalog recover` on the log dir, then "
                    "the job again")


def _recover_after_failed_swap(partition_dir: Path, result: "PartitionCleanResult", e: Exception) -> None:
    """A swap-in step failed: finish or roll back the interrupted group as a broker's startup would
    (``recover_partition``), so no temporary file stays behind, and say what was committed. Only
    while the log dir's lock is still held (``durable.fences_hold``): a job that lost it leaves the
    dir alone, and each of the recovery's changes checks the fences again."""
    why = _os_error_text(e, partition_dir) if isinstance(e, OSError) else str(e)
    if not durable.fences_hold():
        _stop_after_lost_fence(result, FenceLostError(f"{why}; and the log dir's lock is no longer held"))
        return
    rec = recover_partition(partition_dir)
    if rec.error is not None:
        result.error = (f"{why}; recovering the interrupted swap failed too ({rec.error}): run `kafkalog recover` "
                        "(or start the broker) to finish or roll it back")
        return
    if rec.swap_range is not None:          # the interrupted group was past its point of no return
        result.groups_committed += 1
    committed = result.groups_committed
    result.rolled_back = committed == 0
    result.error = (f"{why}; " + ("the interrupted swap was rolled back, the partition is as before" if committed == 0
                                  else f"{committed} of {len(result.groups)} segment groups were swapped in, "
                                       "the rest rolled back"))

def clean_partition(partition_dir, *, config: LogConfig, now_ms: int, broker: BrokerConfig = BrokerConfig(),
                    options: CleanOptions = CleanOptions(), offset_map: Optional[OffsetMap] = None,
                    plan: Optional[PartitionPlan] = None, output=None) -> PartitionCleanResult:
    """Clean one partition folder (one round). Refuses (``LogDirLockedError``) a log dir whose
    ``.lock`` another process holds, and holds that lock while it works (unless ``options.lock`` is
    False: the caller holds it in another process). Problems with the data are reported in
    ``result.error``; nothing is changed then, and a swap-in that fails midway is finished or rolled
    back before this returns (``result.outcome``) — unless the log dir's lock was lost
    (``durable.fenced``): then nothing at all is changed after the loss, and the interrupted swap is
    left to ``kafkalog recover`` or the next run under a held lock.

    :param partition_dir: the partition folder (``<topic>-<partition>``).
    :param config: the topic's config.
    :param now_ms: the time every time-based rule is evaluated at.
    :param broker: the broker's settings (the cleaner's buffers and threads).
    :param options: how the round runs (``CleanOptions``: dry run, lock, reasons, budgets, engine).
    :param offset_map: a precomputed map (the Spark job's), instead of the round's map pass.
    :param plan: the partition's plan, when the caller made it already.
    :param output: write the cleaned groups there instead of swapping them in (``output_dir.PartitionOutput``:
        the partition folder is only read, and no checkpoint is written).

    Example::

        import kafkalog
        config = kafkalog.configs_from_mappings(topics={"orders": {"cleanup.policy": "compact"}}).for_topic("orders")
        result = kafkalog.clean_partition("logs/orders-0", config=config, now_ms=1767841200000,
                                          options=kafkalog.CleanOptions(dry_run=True))
    """
    partition_dir = Path(partition_dir)
    log_dir = partition_dir.parent
    resolve_engine(options.engine)          # an unknown engine is refused before the lock or any file

    def run() -> PartitionCleanResult:
        return _clean_locked(partition_dir, config=config, now_ms=now_ms, broker=broker, options=options,
                             offset_map=offset_map, plan=plan, output=output)
    if not options.lock:
        return run()
    if is_locked(log_dir):
        raise locked_refusal(log_dir)
    if options.dry_run:
        return run()
    with lock_log_dir(log_dir):
        return run()


def clean_log_dir(log_dir, *, configs: KafkaConfigs, now_ms: int,
                  options: CleanOptions = CleanOptions(record_decisions=False),
                  partitions: Optional[Iterable[TopicPartition]] = None) -> List[PartitionCleanResult]:
    """Clean every compacted live partition of a log dir (all eligible ones, not only the
    filthiest), holding the dir's lock.

    :param log_dir: the log dir.
    :param configs: the broker's and the topics' configs.
    :param now_ms: the time every time-based rule is evaluated at.
    :param options: how each round runs. The dir's lock is always taken here (``lock=False`` is
        refused), and each partition has its own high watermark (``high_watermark`` is refused).
    :param partitions: only these (topic, partition)s (None: every one).

    Example::

        import kafkalog
        configs = kafkalog.configs_from_mappings(topics={"orders": {"cleanup.policy": "compact"}})
        results = kafkalog.clean_log_dir("logs", configs=configs, now_ms=1767841200000)
        print([r.outcome for r in results])
    """
    if not options.lock or options.high_watermark is not None:
        raise ValueError("clean_log_dir takes the log dir's lock itself and reads each partition's high watermark: "
                         "CleanOptions(lock=False) and CleanOptions(high_watermark=...) are for clean_partition")
    options = replace(options, lock=False)          # held here, once for the whole dir
    log_dir = Path(log_dir)
    if is_locked(log_dir):
        raise locked_refusal(log_dir)
    wanted = None if partitions is None else set(partitions)
    scanned = scan_log_dir(log_dir)
    results = []

    def run():
        for p in scanned.partitions:
            if p.kind != "live" or (wanted is not None and (p.topic, p.partition) not in wanted):
                continue
            if p.topic == KRAFT_METADATA_TOPIC:      # METADATA_LOG_NOT_CLEANED
                continue
            config = configs.for_topic(p.topic)
            if not config.compact:
                continue
            results.append(_clean_locked(p.path, config=config, now_ms=now_ms, broker=configs.broker,
                                         options=options))
    if options.dry_run:
        run()
    else:
        with lock_log_dir(log_dir):
            run()
    return results


# The recopy of one group and the swap-in's failure handling, for a round whose groups are recopied
# in separate tasks and swapped in at once (``split_round``).
clean_group = _clean_group
os_error_text = _os_error_text
stop_after_lost_fence = _stop_after_lost_fence
recover_after_failed_swap = _recover_after_failed_swap
