"""Retention decisions (``cleanup.policy`` delete) exactly as a broker's ``UnifiedLog.deleteOldSegments``
makes them: pure functions from a partition's segments, offsets, config and "now" to a plan.

Kafka's ``UnifiedLog.deleteOldSegments`` (``UnifiedLog.java``). Three passes, each over the segments the
previous one left:

1. log-start-offset breach: delete S while its successor's base offset <= log start offset;
2. size breach (``retention.bytes``, skipped when < 0 or when the log is smaller): with
   diff = total size - retention.bytes, delete S while diff - S.size >= 0 (then diff -= S.size);
3. time breach (``retention.ms``, skipped when < 0): delete S while now - S.largestTimestamp > retention.ms.

Pass 1 runs for every policy; passes 2 and 3 only when the policy contains ``delete``. Within a pass
(``deletableSegments``) the walk goes oldest first and STOPS at the first segment that may not be
deleted; a segment may be deleted only if the high watermark >= its upper bound (the next segment's
base offset, or the log end offset for the last one), and a last segment that is empty never is.
When a pass would delete every segment the log is first ROLLED: a new empty active segment at the log
end offset replaces it, and the log start offset moves to the base offset of the first segment kept.

Kafka runs no retention at all for ``compact,delete`` topics when ``log.cleaner.enable=false``; tiered
topics (remote copy enabled) delete locally only what remote storage holds, which is not on disk here,
so their plan is "skip" with that reason.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

from kafkalog.config import LogConfig
from kafkalog.log.segment import SegmentInfo
from kafkalog.format.record_batch import NO_TIMESTAMP

LOG_START_OFFSET = "log_start_offset"
RETENTION_BYTES = "retention.bytes"
RETENTION_MS = "retention.ms"
RULES = (LOG_START_OFFSET, RETENTION_BYTES, RETENTION_MS)
# Not Kafka's: the active segment kept because the roll that would delete it cannot be done as a
# broker does it (the producer snapshot its roll writes is not on disk); kafkalog.retention.run.
NO_PRODUCER_SNAPSHOT = "no-producer-snapshot"

DELETE, KEEP = "delete", "keep"


# --- data structures -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LogState:
    """A partition's log as retention's passes see it: ``segments`` ascending by base offset, the last
    one active, and the offsets with the high watermark already resolved
    (:func:`kafkalog.log.local_log.high_watermark`, under the caller's choice for a missing entry). Kept
    apart from the loaded ``LocalLog`` because the passes rewrite it (each pass drops a prefix and may
    roll), and because the catalog-table path builds it from Arrow rows, with no folder behind it.

    Example::

        import kafkalog
        log = kafkalog.load_partition_path("logs/orders-0")
        state = kafkalog.LogState(tuple(log.segments), log.log_start_offset, log.log_end_offset,
                                  log.high_watermark())
        config = kafkalog.configs_from_mappings(topics={"orders": {"retention.ms": "3600000"}}).for_topic("orders")
        plan = kafkalog.plan_retention(state, config, now_ms=1767841200000)
        print(len(plan.deleted), "segments,", plan.bytes_freed, "bytes; log start ->", plan.new_log_start_offset)
    """

    segments: tuple[SegmentInfo, ...]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


@dataclass(frozen=True)
class SegmentDecision:
    """The verdict on one segment: ``rule`` names the pass that deleted it (None when kept);
    ``reason`` says in words why, including why the walk stopped at a kept segment."""

    base_offset: int
    size: int
    decision: str
    rule: Optional[str]
    reason: str


@dataclass(frozen=True)
class RetentionPlan:
    """Every segment's decision, in offset order, and what deleting them does to the log: ``decisions``
    (base offset, size, delete or keep, the rule and the reason in words), the log start offset
    before and after, ``roll_at`` (when the active segment is rolled to be deleted) and ``skipped``
    (why no pass ran). Made by :func:`plan_retention`.

    Example::

        import kafkalog
        log = kafkalog.load_partition_path("logs/orders-0")
        state = kafkalog.LogState(tuple(log.segments), log.log_start_offset, log.log_end_offset,
                                  log.high_watermark())
        config = kafkalog.configs_from_mappings(topics={"orders": {"retention.ms": "3600000"}}).for_topic("orders")
        plan = kafkalog.plan_retention(state, config, now_ms=1767841200000)
        print(len(plan.deleted), "segments,", plan.bytes_freed, "bytes; log start ->", plan.new_log_start_offset)
    """

    decisions: tuple[SegmentDecision, ...]
    log_start_offset: int                 # before
    new_log_start_offset: int             # after (== before when nothing moves it)
    roll_at: Optional[int] = None         # base offset of the new empty active segment, when rolled
    skipped: Optional[str] = None         # why no pass ran (policy, tiered storage, cleaner disabled)
    high_watermark: int = 0

    @property
    def deleted(self) -> tuple[SegmentDecision, ...]:
        return tuple(d for d in self.decisions if d.decision == DELETE)

    @property
    def bytes_freed(self) -> int:
        return sum(d.size for d in self.deleted)


# --- predicates (deleteOldSegments' three passes) ---------------------------------------------------

Predicate = Callable[[SegmentInfo, Optional[SegmentInfo]], bool]


def log_start_offset_breached(log_start_offset: int) -> Predicate:
    """Pass 1: the whole segment lies below the log start offset."""
    return lambda segment, successor: successor is not None and successor.base_offset <= log_start_offset


def retention_size_breached(total_size: int, retention_bytes: int) -> Predicate:
    """Pass 2 (stateful): deleting the segment keeps the log at or above retention.bytes."""
    diff = total_size - retention_bytes

    def predicate(segment: SegmentInfo, successor: Optional[SegmentInfo]) -> bool:
        nonlocal diff
        if diff - segment.size >= 0:
            diff -= segment.size
            return True
        return False
    return predicate


def retention_ms_breached(now_ms: int, retention_ms: int) -> Predicate:
    """Pass 3: the segment's largest timestamp is more than retention.ms before now (strictly)."""
    return lambda segment, successor: now_ms - segment.largest_timestamp_ms > retention_ms


def deletable_segments(log: LogState, predicate: Predicate) -> int:
    """``UnifiedLog.deletableSegments``: how many leading segments may go. The high-watermark test
    comes first (the size predicate is stateful); the walk stops at the first segment that fails."""
    segments = log.segments
    count = 0
    for i, segment in enumerate(segments):
        successor = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = successor.base_offset if successor is not None else log.log_end_offset
        if not log.high_watermark >= upper_bound:
            break
        if not predicate(segment, successor):
            break
        if successor is None and segment.size == 0:
            break
        count += 1
    return count


# --- the plan ------------------------------------------------------------------------------------

def _delete_prefix(log: LogState, count: int) -> tuple[LogState, Optional[int]]:
    """Drop ``count`` leading segments, rolling first when that is all of them."""
    segments = list(log.segments)
    roll_at = None
    if count == len(segments):
        roll_at = log.log_end_offset
        segments.append(SegmentInfo(log.log_end_offset, 0, NO_TIMESTAMP))
    kept = tuple(segments[count:])
    # maybeIncrementLogStartOffset: only forward; never past the HW, which the deletable walk ensures
    new_start = max(log.log_start_offset, kept[0].base_offset)
    return replace(log, segments=kept, log_start_offset=new_start), roll_at


def _stop_reason(rule: str, log: LogState, segment: SegmentInfo, successor: Optional[SegmentInfo], config: LogConfig,
                 now_ms: int, remaining: int) -> str:
    """Why the walk of ``rule`` stopped at ``segment``; ``remaining`` is the log size at that point."""
    upper = successor.base_offset if successor is not None else log.log_end_offset
    if log.high_watermark < upper:
        return f"not fully below the high watermark ({log.high_watermark} < {upper})"
    if successor is None and segment.size == 0:
        return "the active segment is empty"
    if rule == LOG_START_OFFSET:
        return f"holds offsets at or above the log start offset {log.log_start_offset}"
    if rule == RETENTION_BYTES:
        return (f"deleting it would leave {remaining - segment.size} bytes, below retention.bytes "
                f"{config.retention_bytes}")
    age = now_ms - segment.largest_timestamp_ms
    return f"newest record {age} ms old, not more than retention.ms {config.retention_ms}"


def plan_retention(log: LogState, config: LogConfig, now_ms: int, *, cleaner_enabled: bool = True) -> RetentionPlan:
    """Decide every segment of one partition as ``deleteOldSegments`` would at ``now_ms`` (a pure
    function: nothing is read or changed). ``log``: the partition's LogState; ``config``: its topic's
    LogConfig (retention.ms, retention.bytes, cleanup.policy, ...); ``now_ms``: 'now' in epoch ms;
    ``cleaner_enabled``: ``log.cleaner.enable`` (a compact,delete topic is retained only with it).

    Example::

        import kafkalog
        log = kafkalog.load_partition_path("logs/orders-0")
        state = kafkalog.LogState(tuple(log.segments), log.log_start_offset, log.log_end_offset,
                                  log.high_watermark())
        config = kafkalog.configs_from_mappings(topics={"orders": {"retention.ms": "3600000"}}).for_topic("orders")
        plan = kafkalog.plan_retention(state, config, now_ms=1767841200000)
        print(len(plan.deleted), "segments,", plan.bytes_freed, "bytes; log start ->", plan.new_log_start_offset)
    """
    original = log
    rules: dict[int, str] = {}
    stop: dict[int, list[str]] = {}
    roll_at: Optional[int] = None
    skipped: Optional[str] = None

    if config.remote_copy_enabled:
        skipped = ("tiered storage: a broker deletes local segments only once remote storage holds them, "
                   "which cannot be known from the log dir")
    elif config.compact and not cleaner_enabled:
        skipped = "log.cleaner.enable=false: a broker runs no retention for compacted topics"
    else:
        passes: list[tuple[str, Callable[[LogState], Optional[Predicate]]]] = [
            (LOG_START_OFFSET, lambda s: log_start_offset_breached(s.log_start_offset))]
        if config.delete:
            passes.append((RETENTION_BYTES, lambda s: (
                None if config.retention_bytes < 0 or sum(x.size for x in s.segments) < config.retention_bytes
                else retention_size_breached(sum(x.size for x in s.segments), config.retention_bytes))))
            passes.append((RETENTION_MS, lambda s: (
                None if config.retention_ms < 0 else retention_ms_breached(now_ms, config.retention_ms))))
        for rule, make in passes:
            predicate = make(log)
            if predicate is None:
                continue
            count = deletable_segments(log, predicate)
            if count < len(log.segments):
                segment = log.segments[count]
                successor = log.segments[count + 1] if count + 1 < len(log.segments) else None
                remaining = sum(x.size for x in log.segments[count:])
                why = _stop_reason(rule, log, segment, successor, config, now_ms, remaining)
                stop.setdefault(segment.base_offset, []).append(f"{rule}: {why}")
            for segment in log.segments[:count]:
                rules[segment.base_offset] = rule
            if count:
                log, rolled = _delete_prefix(log, count)
                roll_at = rolled if rolled is not None else roll_at

    decisions = []
    for segment in original.segments:
        rule = rules.get(segment.base_offset)
        if rule is not None:
            decisions.append(SegmentDecision(segment.base_offset, segment.size, DELETE, rule, _delete_reason(
                rule, segment, config, now_ms, original)))
        else:
            reason = skipped or "; ".join(stop.get(segment.base_offset, ())) or "a pass stopped at an earlier segment"
            if skipped is None and not config.delete and segment.base_offset not in stop:
                reason = "cleanup.policy has no delete: only the log-start-offset pass runs"
            decisions.append(SegmentDecision(segment.base_offset, segment.size, KEEP, None, reason))
    return RetentionPlan(decisions=tuple(decisions), log_start_offset=original.log_start_offset,
                         new_log_start_offset=log.log_start_offset, roll_at=roll_at, skipped=skipped,
                         high_watermark=original.high_watermark)


def _delete_reason(rule: str, segment: SegmentInfo, config: LogConfig, now_ms: int, log: LogState) -> str:
    if rule == LOG_START_OFFSET:
        return f"entirely below the log start offset {log.log_start_offset}"
    if rule == RETENTION_BYTES:
        return f"the partition stays at or above retention.bytes {config.retention_bytes} without it"
    return f"newest record {now_ms - segment.largest_timestamp_ms} ms old > retention.ms {config.retention_ms}"


def keep_active_segment(plan: RetentionPlan, reason: str, rule: Optional[str] = None) -> RetentionPlan:
    """The plan without its roll: the active (last) segment is kept with ``reason`` (and ``rule``, the
    name of the decision that kept it) and the log start offset moves only to its base offset. (For
    when the roll cannot be done as a broker does it.)"""
    if plan.roll_at is None:
        return plan
    *rest, last = plan.decisions
    kept = SegmentDecision(last.base_offset, last.size, KEEP, rule, reason)
    return replace(plan, decisions=tuple(rest) + (kept,), roll_at=None,
                   new_log_start_offset=max(plan.log_start_offset, last.base_offset))


def decisions_as_rows(plan: RetentionPlan) -> list[dict]:
    """The plan's decisions as plain dicts (report/DataFrame rows without the partition columns)."""
    return [dict(base_offset=d.base_offset, size=d.size, decision=d.decision, rule=d.rule, reason=d.reason)
            for d in plan.decisions]


__all__: Sequence[str] = (
    "LogState", "SegmentDecision", "RetentionPlan", "NO_PRODUCER_SNAPSHOT",
    "log_start_offset_breached", "retention_size_breached", "retention_ms_breached",
    "deletable_segments", "plan_retention", "keep_active_segment", "decisions_as_rows",
)
