"""The plan of one cleaning round (Kafka's ``LogToClean`` as ``LogCleanerManager`` and ``Cleaner.doClean`` make
it, Kafka's ``LogCleanerManager.java`` and ``LogToClean.java``): a partition's segments opened, its offsets,
the producer state loaded as a broker loads it, and the cleanable range; everything decided before a byte is
rewritten.

The offsets follow :mod:`kafkalog.log.local_log` (log start offset, high watermark, log-dir checkpoints);
the plan stays its own type because it holds the opened, CRC-checked segments and the producer state
the round needs, which a loaded ``LocalLog`` does not.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import kafkalog.cleaner.producer_state as ps
from kafkalog.cleaner.cleanable import CleanableOffsets, cleanable_offsets
from kafkalog.cleaner.source_segments import batches_of, load_segments, read_windows, start_position
from kafkalog.cleaner.transaction_metadata import CleanedTransactionMetadata
from kafkalog.config import BrokerConfig, LogConfig
from kafkalog.errors import KafkalogError
from kafkalog.log import local_log
from kafkalog.log.local_log import collect_aborted_transactions, pending_swap_files, read_log_dir_checkpoints
from kafkalog.fs.names import parse_partition_dir_name, parse_segment_file_name
from kafkalog.log.producer_snapshot import read_producer_snapshot
from kafkalog.log.segment import LogSegment
from kafkalog.topic_partition import TopicPartition


# --- the plan --------------------------------------------------------------------------------

@dataclass
class PartitionPlan:
    """Everything decided before a byte is rewritten (pure data once built)."""

    path: Path
    topic: str
    partition: int
    config: LogConfig
    now_ms: int
    segments: List[LogSegment]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    checkpoint_offset: Optional[int]
    first_unstable_offset: Optional[int]
    active_producers: Dict[int, ps.LastRecord]
    offsets: CleanableOffsets

    @property
    def first_dirty_offset(self) -> int:
        return self.offsets.first_dirty_offset

    @property
    def upper_bound_offset(self) -> int:
        return self.offsets.upper_bound_offset

    def dirty_segments(self) -> List[LogSegment]:
        lo, hi = self.first_dirty_offset, self.upper_bound_offset
        return [s for i, s in enumerate(self.segments)
                if s.base_offset < hi and (i + 1 == len(self.segments) or self.segments[i + 1].base_offset > lo)]


def _seed_producer_state(partition_dir: Path, segment_bases: Sequence[int], log_start_offset: int,
                         log_end_offset: int, now_ms: int, expiration_ms: int
                         ) -> Tuple[Dict[int, ps.ProducerEntry], int]:
    """(seeded state, offset to replay from), as a broker loads producer state
    (``UnifiedLog.rebuildProducerState``): ``removeStraySnapshots`` keeps the snapshots at segment
    base offsets plus the newest other one if it is past the last segment's base;
    ``truncateAndReload`` drops those at or below the log start offset or past the log end;
    ``loadFromSnapshot`` loads the newest left (a corrupt one is skipped — Kafka deletes it — and the next older tried),
    without its expired producers. No snapshot: empty state, replay from the log start offset."""
    snapshots: Dict[int, Path] = {}
    for p in partition_dir.glob("*.snapshot"):
        try:
            snapshots[parse_segment_file_name(p.name).base_offset] = p
        except KafkalogError:
            continue
    bases = set(segment_bases)
    candidates = {o for o in snapshots if o in bases}
    strays = [o for o in snapshots if o not in bases]
    if strays and max(strays) > max(bases):
        candidates.add(max(strays))
    for off in sorted((o for o in candidates if log_start_offset < o <= log_end_offset), reverse=True):
        try:
            entries = read_producer_snapshot(snapshots[off]).entries
        except KafkalogError:
            continue
        return ps.seed_from_snapshot(entries, now_ms, expiration_ms), off
    return {}, log_start_offset


def plan_partition(partition_dir, *, config: LogConfig, now_ms: int, broker: BrokerConfig = BrokerConfig(),
                   high_watermark: Optional[int] = None, log_start_offset: Optional[int] = None,
                   checkpoint_offset: Optional[int] = -1) -> PartitionPlan:
    """Read a partition folder and decide the round (``LogCleanerManager.cleanableOffsets``). Offsets not given come from the
    log dir's checkpoints (``checkpoint_offset=-1`` means "read cleaner-offset-checkpoint")."""
    path = Path(partition_dir)
    topic, partition, _kind = parse_partition_dir_name(path.name)
    pending = pending_swap_files(path)
    if pending:
        raise KafkalogError(
            f"an interrupted compaction is pending ({', '.join(pending[:3])}): a broker completes it at startup, "
            "and cleaning again on top of it would lose records", path=path,
            hint=f"run `kafkalog recover --log-dirs {path.parent}` first, then compact again")
    segments = load_segments(path)
    if not segments:
        raise KafkalogError("the partition folder holds no segment", path=path)
    log_dir = path.parent
    tp = TopicPartition(topic, partition)
    checkpoints = None
    if log_start_offset is None or high_watermark is None or checkpoint_offset == -1:
        checkpoints = read_log_dir_checkpoints(log_dir, cleaner=True).require()
    if log_start_offset is None:
        log_start_offset = local_log.log_start_offset(checkpoints.log_start_offsets.get(tp), segments[0].base_offset)
    leo = segments[-1].next_offset
    if high_watermark is None:
        high_watermark = checkpoints.high_watermarks.get(tp)
    high_watermark = local_log.high_watermark(high_watermark, log_start_offset=log_start_offset, log_end_offset=leo)
    if checkpoint_offset == -1:
        checkpoint_offset = checkpoints.cleaner_offsets.get(tp)
    expiration = int(broker.setting("producer.id.expiration.ms"))
    state, replay_from = _seed_producer_state(path, [s.base_offset for s in segments], log_start_offset, leo,
                                              now_ms, expiration)
    for s in segments:
        ps.replay(state, s.scan().batches.to_pydict(), from_offset=replay_from)
    active = ps.active_producers(state, now_ms, expiration)
    fuo = ps.first_unstable_offset(state)
    if fuo is not None:         # UnifiedLog.maybeIncrementFirstUnstableOffset: never below the log start
        fuo = max(fuo, log_start_offset)
    offsets = cleanable_offsets(segments=[s.segment for s in segments], log_start_offset=log_start_offset,
                                log_end_offset=leo, checkpoint_offset=checkpoint_offset,
                                high_watermark=high_watermark, first_unstable_offset=fuo, now_ms=now_ms,
                                config=config)
    return PartitionPlan(path, topic, partition, config, now_ms, segments, log_start_offset, leo, high_watermark,
                         checkpoint_offset, fuo, active, offsets)


def max_batch_bytes(config: LogConfig) -> int:
    return max(config.max_message_bytes, 1) * 4 + (64 << 20)


def dirty_batches(plan: PartitionPlan):
    """The dirty range batch by batch (the reference engine's view of ``dirty_windows``)."""
    return batches_of(dirty_windows(plan))


def dirty_windows(plan: PartitionPlan):
    """The map pass's walk: the dirty segments, the first from ``offsetIndex.lookup(firstDirty)``."""
    first = True
    for s in plan.dirty_segments():
        pos = start_position(s, plan.first_dirty_offset) if first else 0
        first = False
        yield from read_windows(s, max_batch_bytes=max_batch_bytes(plan.config), from_position=pos)


def map_tracker(plan: PartitionPlan) -> CleanedTransactionMetadata:
    tracker = CleanedTransactionMetadata()
    tracker.add_aborted_transactions(collect_aborted_transactions(
        plan.segments, plan.first_dirty_offset, plan.upper_bound_offset, plan.log_start_offset))
    return tracker
