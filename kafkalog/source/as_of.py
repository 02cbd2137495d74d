"""A compacted topic as a table as of a time or offsets: where each partition is cut, whether the log
dirs can still answer there, and the read that answers (the records are turned into the table by
``kafkalog.source.as_of_table``). ``spark.read.format("kafkalog").option("asOf", T)`` and the ``asof``
job run this plan; nothing here imports Spark.

What "as of" means (the README's semantics table and docs/datasource.md say the same):

* **The cut.** ``asOf`` T: per partition, ListOffsets(T) — the earliest offset whose record timestamp
  is >= T (``UnifiedLog.fetchOffsetByTimestamp``), or the latest offset (the high watermark) when no
  record is that late. ``asOfOffsets``: the offsets given (-2 earliest, -1 latest). The table is what a
  consumer replaying the partition from its start holds once it has read every record below the cut,
  in offset order: the latest offset of each key wins (Kafka Streams' KTable order, which is the
  cleaner's too), a tombstone (null value) deletes its key, a null key is no table row.
* **Transactions**, as a ``read_committed`` consumer resolves them: a transaction's records count
  once its COMMIT marker lies below the cut; aborted data never counts; a transaction still open at
  the cut (no marker of its producer below it) does not count either, even where its records precede
  records that do. (A live read_committed consumer would have stopped at the last stable offset and
  not seen the non-transactional records after the open transaction's first offset yet; the as-of
  table counts every record that was decided at the cut.)
* **Timestamps out of order**: the cut is by offset, so a record below the cut counts whatever its
  timestamp, and a record at or past the cut does not, even with a timestamp before T (a late
  record). No record with a timestamp >= T lies below the cut: the cut is the first such offset.
  Cutting by offset keeps the table one that a consumer really held at some moment; a table of
  "records with timestamp < T" would mix states no consumer ever saw.
* **After compaction.** The cleaner's map for a round covers [firstDirty, endOffset) and every record
  below endOffset whose key has a later offset in the map is removed (``Cleaner.cleanInto`` with
  ``OffsetMap``); ``cleaner-offset-checkpoint`` then holds that endOffset (``LogCleanerManager.updateCheckpoints``). A cut at or past the
  checkpoint is answered exactly: a record removed had a later record of its key below the
  checkpoint, so below the cut; a tombstone removed after ``delete.retention.ms`` had already removed
  its key's earlier records in the round that first cleaned it; aborted data and markers are removed
  only when nothing of theirs is left. A cut below the checkpoint is not: the winner at the cut may
  be gone, superseded by a record between the cut and the checkpoint. Records below the log start
  offset (retention, DeleteRecords) are gone too: a key last written there is missing from every
  table, and a cut below the log start has nothing to answer from. Either is an error naming the
  partition, the cut and (for the cleaner) the earliest offset and time still answerable;
  ``asOfIncomplete=warn`` turns it into a warning and answers from what is held.
* A topic that is not compacted is allowed: the answer is as well defined (usually larger).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from kafkalog.format.file_records import scan_batches
from kafkalog.index.transaction_index import AbortedTxn
from kafkalog.log.last_stable_offset import transactions_below
from kafkalog.log.local_log import read_log_dir_checkpoints
from kafkalog.lookup import partition_log as lookup
from kafkalog.lookup.time_spec import format_epoch_ms
from kafkalog.source.options import (KIND_OFFSETS, KIND_TIMESTAMP, SourceOptionError, SourceOptions,
                                     TopicPartition)
from kafkalog.source.scan_plan import (Bounds, PartitionFacts, PartitionRange, Piece, ScanTask, check_listing,
                                       check_partitions_listed, check_subscribed_topics, list_partitions,
                                       load_partition_facts, plan_pieces, resolve_spec, all_topics)

LOG = logging.getLogger("kafkalog.asof")
WHOLE_PARTITION = 1 << 62           # a piece target no segment reaches: one task reads its partition whole


class AsOfIncompleteError(SourceOptionError):
    """The log dirs no longer hold what the table as of the cut needs (compaction or deletion)."""


@dataclass(frozen=True)
class AsOfPartition:
    """One partition's cut and the read that answers it.

    ``cut``: records with offsets below it count; ``requested``: what the user asked (a time or an
    offset, as text); ``cleaned_to``: the partition's ``cleaner-offset-checkpoint`` entry (None: never
    cleaned here); ``problem``: why the answer would be incomplete (None: exact); ``dropped``: the
    aborted transactions and those open at the cut, whose data never counts; ``pieces``: the byte
    ranges holding [log start, cut), in offset order."""

    topic: str
    partition: int
    cut: int
    requested: str
    log_start_offset: int
    latest: int
    cleaned_to: Optional[int]
    problem: Optional[str]
    open_transactions: int
    dropped: Tuple[AbortedTxn, ...]
    pieces: Tuple[Piece, ...]

    @property
    def task(self) -> ScanTask:
        return ScanTask(self.pieces)

    def to_dict(self) -> dict:
        """The report's row (no pieces)."""
        return dict(topic=self.topic, partition=self.partition, cut=self.cut, requested=self.requested,
                    log_start_offset=self.log_start_offset, latest=self.latest, cleaned_to=self.cleaned_to,
                    exact=self.problem is None, problem=self.problem, open_transactions=self.open_transactions,
                    aborted_transactions=len(self.dropped) - self.open_transactions,
                    bytes=sum(p.size for p in self.pieces))


@dataclass
class AsOfPlan:
    partitions: List[AsOfPartition] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)


def _name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def max_timestamp_below(facts: PartitionFacts, offset: int) -> Optional[int]:
    """The largest record timestamp of the batches that start below ``offset`` (a batch that straddles
    it counts whole: an upper bound), None when there is none."""
    best: Optional[int] = None
    for seg in facts.segments:
        if seg.base_offset >= offset:
            break
        batches = scan_batches(seg.log, verify_crc=False, on_corrupt="stop").batches
        if batches.num_rows == 0:
            continue
        base = batches.column("baseOffset").to_numpy()
        control = batches.column("isControl").to_numpy(zero_copy_only=False)
        ts = batches.column("maxTimestamp").to_numpy()[(base < offset) & ~control]
        if len(ts):
            best = int(ts.max()) if best is None else max(best, int(ts.max()))
    return best


def answerable_problem(facts: PartitionFacts, cut: int, cleaned_to: Optional[int]) -> Optional[str]:
    """Why the table as of ``cut`` cannot be told exactly from the log dir (None: it can), by the rules
    of the module docstring.

    :param facts: the partition.
    :param cut: the cut offset.
    :param cleaned_to: its cleaner-offset-checkpoint entry (None: never cleaned)."""
    where = _name(facts.topic, facts.partition)
    if cut < facts.log_start_offset:
        return (f"{where}: the cut {cut} is below the log start offset {facts.log_start_offset}: the records it "
                "needs were deleted (retention or DeleteRecords)")
    if cleaned_to is not None and cut < cleaned_to:
        ts = max_timestamp_below(facts, cleaned_to)
        when = f" (asOf at or after {format_epoch_ms(ts + 1)})" if ts is not None else ""
        return (f"{where}: the cleaner compacted offsets below {cleaned_to} (cleaner-offset-checkpoint), past the "
                f"cut {cut}: a key's value at the cut may be gone, superseded by a record between the cut and "
                f"{cleaned_to}; the earliest answerable cut is offset {cleaned_to}{when}")
    if facts.log_start_offset > 0:
        return (f"{where}: records below the log start offset {facts.log_start_offset} were deleted (retention or "
                "DeleteRecords): a key last written there is missing from the table")
    return None


def dropped_transactions(facts: PartitionFacts, cut: int) -> Tuple[Tuple[AbortedTxn, ...], int]:
    """(the transactions whose data never counts as of ``cut``: aborted below it, or open at it; how
    many of them are open). An open one is given as if aborted at ``cut - 1``."""
    aborted, still_open = transactions_below([(s.base_offset, s.log) for s in facts.segments], cut)
    opened = tuple(AbortedTxn(pid, first, cut - 1, first) for pid, first in sorted(still_open.items()))
    return tuple(aborted) + opened, len(opened)


def _requested(options: SourceOptions, tp: TopicPartition) -> str:
    spec = options.as_of
    assert spec is not None
    if spec.kind == KIND_TIMESTAMP:
        return format_epoch_ms(int(spec.timestamp or 0))
    return f"offset {spec.offsets[tp]}"


def _listed(options: SourceOptions):
    """The partitions read: the subscribed ones; with asOfOffsets and no subscription, those it names."""
    spec = options.as_of
    listed = list_partitions(options)
    tps = [TopicPartition(p.topic, p.partition) for _, p in listed]
    if spec is not None and spec.kind == KIND_OFFSETS:
        if options.subscribe is None and options.subscribe_pattern is None and options.assign is None:
            missing = sorted(set(spec.offsets) - set(tps))
            if missing:
                raise SourceOptionError(f"option asOfOffsets: {', '.join(_name(*tp) for tp in missing)} not found in "
                                        f"the log dirs {', '.join(options.log_dirs)}")
            listed = [(d, p) for d, p in listed if (p.topic, p.partition) in spec.offsets]
            return listed
        check_partitions_listed("asOfOffsets", spec, tps)
    return listed


def plan_as_of(options: SourceOptions) -> AsOfPlan:
    """Every partition's cut, answerability and read (``options.as_of`` must be set). Raises
    :class:`AsOfIncompleteError` naming every partition that cannot be answered exactly, unless
    ``asOfIncomplete=warn`` (then each is a warning, logged and kept in the plan); SourceOptionError
    for an offset past a partition's latest."""
    if options.as_of is None:
        raise ValueError("plan_as_of needs options with asOf or asOfOffsets")
    listed = _listed(options)
    check_listing(options, [TopicPartition(p.topic, p.partition) for _, p in listed])
    check_subscribed_topics(options, {p.topic for _, p in listed}, lambda: all_topics(options))
    cache: Dict[str, object] = {}
    cleaner: Dict[str, Dict[TopicPartition, int]] = {}
    logs: Dict[str, lookup.PartitionLog] = {}
    plan = AsOfPlan()
    problems = []
    try:
        for log_dir, pdir in listed:
            facts = load_partition_facts(log_dir, pdir, cache)
            tp = TopicPartition(facts.topic, facts.partition)
            cut = resolve_spec(facts, options.as_of, starting=False, options=options, log_cache=logs)
            if cut > facts.latest:
                raise SourceOptionError(f"option asOfOffsets: {_name(*tp)} is cut at offset {cut}, past its latest "
                                        f"offset {facts.latest}")
            key = str(log_dir)
            if key not in cleaner:
                cleaner[key] = dict(read_log_dir_checkpoints(log_dir, cleaner=True).cleaner_offsets)
            cleaned_to = cleaner[key].get(tp)
            problem = answerable_problem(facts, cut, cleaned_to)
            if problem:
                problems.append(problem)
            start = min(facts.log_start_offset, cut)
            dropped, n_open = dropped_transactions(facts, cut) if cut > start else ((), 0)
            pieces = tuple(plan_pieces(PartitionRange(facts, start, cut, dropped), Bounds(), WHOLE_PARTITION)) \
                if cut > start else ()
            plan.partitions.append(AsOfPartition(
                facts.topic, facts.partition, cut, _requested(options, tp), facts.log_start_offset, facts.latest,
                cleaned_to, problem, n_open, dropped, pieces))
    finally:
        for log in logs.values():
            log.close()
    if problems:
        if options.as_of_incomplete != "warn":
            raise AsOfIncompleteError("the log dirs cannot answer the table as of the cut exactly:\n  "
                                      + "\n  ".join(problems)
                                      + "\nSet asOfIncomplete=warn to answer from the records still held")
        for p in problems:
            LOG.warning("as-of table incomplete: %s", p)
        plan.warnings.extend(problems)
    return plan


def drop_mask(pid: np.ndarray, transactional: np.ndarray, base: np.ndarray,
              dropped: Sequence[AbortedTxn]) -> np.ndarray:
    """True for the records (given per record: producer id, isTransactional, batch base offset) of the
    ``dropped`` transactions."""
    drop = np.zeros(len(pid), np.bool_)
    for a in dropped:
        drop |= (pid == a.producer_id) & transactional & (base >= a.first_offset) & (base <= a.last_offset)
    return drop


__all__ = ["AsOfIncompleteError", "AsOfPartition", "AsOfPlan", "answerable_problem", "drop_mask",
           "dropped_transactions", "max_timestamp_below", "plan_as_of"]
