"""Planning a parallel read of records from log dirs: which partitions, which offset range of each, which
segments and byte ranges, cut into input partitions of about equal bytes — as pure functions over plain
data, with the file reads they need (indexes, checkpoints, batch headers) kept in the ``load_`` / ``seek_``
edge functions. The Spark data source (``udfs.kafkalog_source``) runs this plan; nothing here imports Spark.

The rules, for one Kafka partition:

* **latest** is what a consumer can read: the high watermark from ``replication-offset-checkpoint``
  (clamped to [log start, log end]) where the log dir has an entry for the partition, else the log end
  offset (a copy without that file). **earliest** is the log start offset. With ``read_committed`` the
  end is also capped at the last stable offset (the first offset of a transaction still open), and the
  data batches of aborted transactions are dropped — a ``read_committed`` consumer's view.
* A starting offset below the log start offset is data loss: an error naming the partition and both
  offsets with ``failOnDataLoss`` (the default), else reading starts at the log start. So is an offset
  past latest; a start after the end is an error either way (Spark's "is after the ending offset").
* **Pushed-down predicates** narrow, never widen: topic and partition predicates drop partitions; offset
  predicates narrow [start, end); a lower bound on ``timestamp`` drops every segment whose largest
  timestamp (Kafka's rule: the last ``.timeindex`` entry of a rolled segment, the batches' maximum for
  the active one) is below it and seeks into the first kept segment with ``.timeindex`` then ``.index``,
  as ListOffsets does. Timestamps in a log are not ordered, so an upper bound prunes nothing (any later
  batch may hold an older record), and a segment whose largest timestamp is only its file's mtime is
  never dropped. Spark re-applies every predicate, so rows are the same with pushdown on or off.
  The Spark data source passes no bounds (``Bounds()``): PySpark 4.2 keeps a DataFrame's planned read on
  an object all its queries share, so a read narrowed for one query's filters would answer the next (see
  ``udfs.kafkalog_source``). Spark's own source after 4.2 keeps that read per scan
  (``PythonScanBuilder.scala``); until kafkalog runs on such a PySpark, only callers that plan for one
  query and throw the plan away may pass bounds.
* **Byte ranges**: reading starts at the offset-index position at or before the first offset wanted and
  ends at an offset-index position past the last one (batch boundaries; at most one index interval
  over), so a narrow range reads a few KiB per side, not whole segments.
* **Input partitions** hold about ``target_bytes`` of ``.log`` each (Spark's file rule: total bytes over
  the default parallelism, at most ``maxPartitionBytes``, at least ``MIN_TARGET_BYTES`` unless
  ``minPartitions`` asks for more). A large segment is cut at offset-index positions (batch boundaries),
  so every core gets work; small pieces are packed together.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from kafkalog.lookup import partition_log as lookup
from kafkalog.lookup.rules import offset_index_problem, time_index_problem
from kafkalog.log.local_log import high_watermark, load_partition, read_log_dir_checkpoints
from kafkalog.log.segment import FROM_BATCHES, FROM_TIMEINDEX
from kafkalog.errors import KafkalogError
from kafkalog.log.last_stable_offset import replay_below
from kafkalog.index.offset_index import read_offset_index
from kafkalog.index.transaction_index import AbortedTxn
from kafkalog.index.time_index import read_time_index
from kafkalog.source.options import (EARLIEST, KIND_EARLIEST, KIND_LATEST, KIND_OFFSETS, KIND_TIMESTAMP,
                                     KIND_TIMESTAMPS, LATEST, STRATEGY_LATEST, OffsetSpec, SourceOptions,
                                     SourceOptionError, TopicPartition)
from kafkalog.log.logdir import scan_log_dirs
from kafkalog.fs.names import LIVE

MIN_TARGET_BYTES = 4 << 20          # Spark's spark.sql.files.openCostInBytes: no smaller piece unless asked
NO_BOUND = None

# predicate operators the planner understands (the Spark side translates its filters into these)
OPS = ("=", "<", "<=", ">", ">=", "in")
PRUNABLE_COLUMNS = ("topic", "partition", "offset", "timestamp")


# --- data structures ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SegmentFacts:
    """One segment as the planner needs it. ``largest_timestamp`` is a safe upper bound of its records'
    timestamps (None when only the mtime is known)."""

    base_offset: int
    size: int
    log: str
    index: Optional[str]
    timeindex: Optional[str]
    largest_timestamp: Optional[int]


@dataclass(frozen=True)
class PartitionFacts:
    topic: str
    partition: int
    path: str
    log_dir: Optional[str]
    segments: Tuple[SegmentFacts, ...]
    log_start_offset: int
    log_end_offset: int
    high_watermark: Optional[int]          # the checkpoint's entry, None when absent

    @property
    def latest(self) -> int:
        """What a consumer sees as the end: the high watermark where checkpointed, else the log end."""
        if self.high_watermark is None:
            return self.log_end_offset
        return high_watermark(self.high_watermark, log_start_offset=self.log_start_offset,
                              log_end_offset=self.log_end_offset)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)


@dataclass(frozen=True)
class Predicate:
    """One pushed-down comparison: ``column op value`` (``in``: a tuple of values); timestamps in ms."""

    column: str
    op: str
    value: object


@dataclass(frozen=True)
class Bounds:
    """What the predicates allow, as ranges: offsets [offset_lo, offset_hi), timestamps >= timestamp_lo."""

    topics: Optional[frozenset] = None
    partitions: Optional[frozenset] = None
    partition_lo: Optional[int] = None
    partition_hi: Optional[int] = None     # inclusive
    offset_lo: Optional[int] = None
    offset_hi: Optional[int] = None        # exclusive
    timestamp_lo: Optional[int] = None     # inclusive, ms
    empty: bool = False                    # contradictory predicates: nothing can match

    def allows_partition(self, topic: str, partition: int) -> bool:
        if self.empty or (self.topics is not None and topic not in self.topics):
            return False
        if self.partitions is not None and partition not in self.partitions:
            return False
        if self.partition_lo is not None and partition < self.partition_lo:
            return False
        return self.partition_hi is None or partition <= self.partition_hi


@dataclass(frozen=True)
class PartitionRange:
    """The offsets [start, end) of one partition to read, and what read_committed must drop."""

    facts: PartitionFacts
    start: int
    end: int
    aborted: Tuple[AbortedTxn, ...] = ()


@dataclass(frozen=True)
class Piece:
    """A byte range [start, end) of one ``.log`` (batch boundaries) and the offsets wanted from it."""

    topic: str
    partition: int
    log: str
    start: int
    end: int
    offset_lo: int
    offset_hi: int
    aborted: Tuple[AbortedTxn, ...] = ()

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class ScanTask:
    """One input partition: pieces read in order by one task."""

    pieces: Tuple[Piece, ...]

    @property
    def size(self) -> int:
        return sum(p.size for p in self.pieces)


# --- predicates -> bounds (pure) -------------------------------------------------------------------------

def _lower(bound: Optional[int], value: int) -> int:
    return value if bound is None else max(bound, value)


def _upper(bound: Optional[int], value: int) -> int:
    return value if bound is None else min(bound, value)


def bounds_from_predicates(predicates: Iterable[Predicate]) -> Bounds:
    """AND of the predicates as ranges. A predicate this does not understand (another column or
    operator, a value of the wrong type) is simply not used: Spark applies it anyway."""
    b: Dict[str, Any] = {}
    empty = False
    for p in predicates:
        values: Tuple[Any, ...] = tuple(p.value) if p.op == "in" else (p.value,)  # type: ignore[arg-type]  # an "in" value is a list
        if not values or any(v is None for v in values):
            if p.op == "in" and not values:
                empty = True
            continue
        if p.column == "topic":
            if not all(isinstance(v, str) for v in values) or p.op not in ("=", "in"):
                continue
            topics = frozenset(values)
            b["topics"] = topics if b.get("topics") is None else b["topics"] & topics
        elif p.column in ("partition", "offset", "timestamp"):
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                continue
            lo_key = {"partition": "partition_lo", "offset": "offset_lo", "timestamp": "timestamp_lo"}[p.column]
            hi_key = {"partition": "partition_hi", "offset": "offset_hi", "timestamp": None}[p.column]
            exclusive_hi = p.column == "offset"
            lo = hi = None
            if p.op in ("=", "in"):
                lo, hi = min(values), max(values)
                if p.column == "partition":
                    parts = frozenset(values)
                    b["partitions"] = parts if b.get("partitions") is None else b["partitions"] & parts
            elif p.op == ">":
                lo = values[0] + 1
            elif p.op == ">=":
                lo = values[0]
            elif p.op == "<":
                hi = values[0] - 1
            elif p.op == "<=":
                hi = values[0]
            if lo is not None:
                b[lo_key] = _lower(b.get(lo_key), lo)
            if hi is not None and hi_key is not None:
                b[hi_key] = _upper(b.get(hi_key), hi + 1 if exclusive_hi else hi)
    bounds = Bounds(**b, empty=empty)
    if (bounds.topics is not None and not bounds.topics) or (bounds.partitions is not None and not bounds.partitions):
        return replace(bounds, empty=True)
    if bounds.partition_lo is not None and bounds.partition_hi is not None and bounds.partition_lo > bounds.partition_hi:
        return replace(bounds, empty=True)
    if bounds.offset_lo is not None and bounds.offset_hi is not None and bounds.offset_lo >= bounds.offset_hi:
        return replace(bounds, empty=True)
    return bounds


# --- offsets (pure) ---------------------------------------------------------------------------------------

def _tp(facts: PartitionFacts) -> TopicPartition:
    return TopicPartition(facts.topic, facts.partition)


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def check_partitions_listed(option: str, spec: OffsetSpec, chosen: Sequence[TopicPartition]) -> None:
    """Per-partition JSON must name exactly the partitions read (Spark: "you must specify all
    TopicPartitions"); a partition that is not there is an error naming it."""
    if spec.kind not in (KIND_OFFSETS, KIND_TIMESTAMPS):
        return
    listed, chosen_set = set(spec.offsets), set(chosen)
    missing = sorted(chosen_set - listed)
    extra = sorted(listed - chosen_set)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"partitions read but not listed: {', '.join(map(_name, missing))}")
        if extra:
            parts.append(f"listed but not read (not in the log dirs or not subscribed): {', '.join(map(_name, extra))}")
        raise SourceOptionError(f"option {option}: must give every partition read, as Spark's Kafka source "
                                f"requires; {'; '.join(parts)}")


def resolve_offset(facts: PartitionFacts, value: int) -> int:
    """-2 / -1 to the log start / latest; other values as they are."""
    if value == EARLIEST:
        return facts.log_start_offset
    if value == LATEST:
        return facts.latest
    return value


def check_range(facts: PartitionFacts, start: int, end: int, *, fail_on_data_loss: bool) -> Tuple[int, int]:
    """The offsets [start, end) actually read, by Spark's batch rules (see the module docstring)."""
    tp = _name(_tp(facts))
    lso, latest = facts.log_start_offset, facts.latest
    if start < lso:
        if fail_on_data_loss:
            raise SourceOptionError(
                f"startingOffsets: {tp} starts at offset {start}, below its log start offset {lso} (those records "
                f"are gone). Set failOnDataLoss=false to start at {lso}")
        start = lso
    if end > latest:
        if fail_on_data_loss:
            raise SourceOptionError(
                f"endingOffsets: {tp} ends at offset {end}, past the latest offset {latest}. "
                f"Set failOnDataLoss=false to stop at {latest}")
        end = latest
    if start > latest:
        if fail_on_data_loss:
            raise SourceOptionError(f"startingOffsets: {tp} starts at offset {start}, past the latest offset {latest}. "
                                    "Set failOnDataLoss=false to read nothing from it")
        start = latest
    if start > end:
        raise SourceOptionError(f"{tp}: the starting offset {start} is after the ending offset {end}")
    return start, end


def narrow(start: int, end: int, bounds: Bounds) -> Tuple[int, int]:
    """[start, end) intersected with the pushed-down offset range (may become empty: start >= end)."""
    if bounds.offset_lo is not None:
        start = max(start, bounds.offset_lo)
    if bounds.offset_hi is not None:
        end = min(end, bounds.offset_hi)
    return start, max(start, end)


def aborted_in(aborted: Sequence[AbortedTxn], start: int, end: int) -> Tuple[AbortedTxn, ...]:
    return tuple(a for a in aborted if a.last_offset >= start and a.first_offset < end)


# --- segments and byte ranges (pure) ----------------------------------------------------------------------

def segments_for(facts: PartitionFacts, start: int, end: int, timestamp_lo: Optional[int]) -> List[int]:
    """Indexes of the segments that may hold a wanted record: offsets in [start, end), and, with a
    timestamp lower bound, a largest timestamp at or above it (unknown: kept)."""
    segs = facts.segments
    out = []
    for i, s in enumerate(segs):
        next_base = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if s.base_offset >= end or (next_base is not None and next_base <= start):
            continue
        if timestamp_lo is not None and s.largest_timestamp is not None and s.largest_timestamp < timestamp_lo:
            continue
        out.append(i)
    return out


def split_points(start: int, end: int, entry_positions: np.ndarray) -> List[int]:
    """Batch boundaries strictly inside (start, end), from the offset index's positions."""
    if entry_positions is None or not len(entry_positions):
        return []
    lo = int(np.searchsorted(entry_positions, start, side="right"))
    hi = int(np.searchsorted(entry_positions, end, side="left"))
    return [int(p) for p in entry_positions[lo:hi]]


def cut(start: int, end: int, points: Sequence[int], target: int) -> List[Tuple[int, int]]:
    """[start, end) cut at some of ``points`` into ranges of at most ``target`` bytes where the points
    allow (greedy: the last point that keeps a range within target, else the first point past it)."""
    out: List[Tuple[int, int]] = []
    a = start
    i = 0
    pts = [p for p in points if start < p < end]
    while end - a > target and i < len(pts):
        j = i
        while j + 1 < len(pts) and pts[j + 1] - a <= target:
            j += 1
        if pts[j] <= a:
            break
        out.append((a, pts[j]))
        a = pts[j]
        i = j + 1
    out.append((a, end))
    return out


def target_bytes(total: int, *, parallelism: int, max_partition_bytes: int, min_partitions: Optional[int]) -> int:
    """Bytes per input partition: Spark's maxSplitBytes rule, then small enough for minPartitions."""
    per_core = math.ceil(total / max(1, parallelism)) if total else 0
    target = min(max_partition_bytes, max(MIN_TARGET_BYTES, per_core))
    if min_partitions:
        target = min(target, max(1, math.ceil(total / min_partitions)))
    return max(1, target)


def pack(pieces: Sequence[Piece], target: int, min_partitions: Optional[int] = None) -> List[ScanTask]:
    """Consecutive pieces packed into tasks of at most ``target`` bytes (a bigger piece is its own task),
    then, if fewer than ``min_partitions``, the biggest tasks split (by pieces, else by offsets) until enough."""
    tasks: List[List[Piece]] = []
    size = 0
    for p in pieces:
        if tasks and size + p.size <= target:
            tasks[-1].append(p)
            size += p.size
        else:
            tasks.append([p])
            size = p.size
    while min_partitions and len(tasks) < min_partitions:
        splittable = [t for t in tasks if len(t) > 1]
        # else every task is one byte range no index entry cuts (small segments): split its offsets, as
        # Spark's Kafka source does (KafkaOffsetRangeCalculator); both halves read the same bytes
        by_offsets = [t for t in tasks if t[0].offset_hi - t[0].offset_lo > 1]
        if not splittable and not by_offsets:
            break
        biggest = max(splittable or by_offsets, key=lambda t: (sum(p.size for p in t), t[0].offset_hi - t[0].offset_lo))
        i, half, first = tasks.index(biggest), len(biggest) // 2, biggest[0]
        mid = first.offset_lo + (first.offset_hi - first.offset_lo) // 2
        tasks[i:i + 1] = ([biggest[:half], biggest[half:]] if splittable else
                          [[replace(first, offset_hi=mid)], [replace(first, offset_lo=mid)]])
    return [ScanTask(tuple(t)) for t in tasks]


# --- reading what the plan needs (I/O edges) ----------------------------------------------------------------

def list_partitions(options: SourceOptions):
    """(log dir, partition folder) of every live partition the options subscribe to, by topic and
    partition; a log dir a broker would refuse still lists what it holds."""
    out = []
    for log_dir in scan_log_dirs(options.log_dirs):
        for pdir in log_dir.partitions:
            if pdir.kind == LIVE and options.wants(pdir.topic, pdir.partition):
                out.append((log_dir.path, pdir))
    out.sort(key=lambda x: (x[1].topic, x[1].partition))
    return out


def load_partition_facts(log_dir, pdir, cache: Dict[str, Any]) -> PartitionFacts:
    """One listed partition with its segments, log start / end offsets and checkpointed high watermark."""
    key = str(log_dir)
    if key not in cache:
        cache[key] = read_log_dir_checkpoints(log_dir)
    state = load_partition(pdir, cache[key])
    segs = tuple(SegmentFacts(
        base_offset=s.base_offset, size=s.size, log=str(s.on_disk().log),
        index=str(s.on_disk().index) if s.on_disk().index else None,
        timeindex=str(s.on_disk().timeindex) if s.on_disk().timeindex else None,
        largest_timestamp=s.largest_timestamp_ms if s.largest_timestamp_source in (FROM_TIMEINDEX, FROM_BATCHES)
        else None) for s in state.segments)
    return PartitionFacts(state.topic, state.partition, str(state.path), key, segs,
                          state.log_start_offset, state.log_end_offset, state.high_watermark_checkpoint)


def check_listing(options: SourceOptions, chosen: Sequence[TopicPartition]) -> None:
    """Option errors the log dirs reveal before anything is read: an assigned partition that is not
    there, per-partition JSON that does not name exactly the partitions read."""
    if options.assign is not None:
        missing = sorted(set(options.assign) - set(chosen))
        if missing:
            raise SourceOptionError(f"option assign: {', '.join(map(_name, missing))} not found in the log dirs "
                                    f"{', '.join(options.log_dirs)}")
    for which, spec in (("starting", options.starting), ("ending", options.ending)):
        name = f"{which}OffsetsByTimestamp" if spec.kind == KIND_TIMESTAMPS else f"{which}Offsets"
        check_partitions_listed(name, spec, chosen)


def check_subscribed_topics(options: SourceOptions, found: set, all_topics) -> None:
    """A batch read's ``subscribe`` naming a topic the log dirs do not hold is an error naming the closest
    topic there. Spark's Kafka source reads such a topic as empty (a broker may create it later); a log
    dir is what it is, so a typo would be a silently empty answer. A stream keeps Spark's behaviour: the
    topic's partitions are read when they appear.

    :param options: the parsed options
    :param found: the topics of the partitions the read chose
    :param all_topics: a function giving every topic of the log dirs (only called on a miss)
    """
    if options.subscribe is None or options.streaming:
        return
    missing = sorted(set(options.subscribe) - found)
    if not missing:
        return
    import difflib

    held = sorted(all_topics())
    guesses = [difflib.get_close_matches(t, held, n=1, cutoff=0.6) for t in missing]
    hints = "".join(f" (did you mean {g[0]}?)" if g else "" for g in guesses[:1])
    raise SourceOptionError(f"option subscribe: no partition of {', '.join(missing)} in the log dirs "
                            f"{', '.join(options.log_dirs)}{hints}; topics there: {', '.join(held[:20]) or 'none'}")


def all_topics(options: SourceOptions) -> set:
    return {pdir.topic for log_dir in scan_log_dirs(options.log_dirs) for pdir in log_dir.partitions
            if pdir.kind == LIVE}


def _by_timestamp(facts: PartitionFacts, log: "lookup.PartitionLog", ts: int, *, starting: bool,
                  strategy: str, option: str) -> int:
    """ListOffsets for a time: the first offset whose record timestamp >= ts. Not found: the ending
    side reads to latest (Spark); the starting side is an error unless the strategy is latest."""
    result = log.lookup(ts)
    if result.found and result.offset >= 0:
        return min(result.offset, facts.latest)
    if not starting or strategy == STRATEGY_LATEST:
        return facts.latest
    raise SourceOptionError(f"option {option}: no record of {_name(_tp(facts))} has a timestamp at or after {ts} "
                            "(set startingOffsetsByTimestampStrategy=latest to start at the latest offset instead)")


def resolve_spec(facts: PartitionFacts, spec: OffsetSpec, *, starting: bool, options: SourceOptions,
                  log_cache: Dict[str, "lookup.PartitionLog"]) -> int:
    which = "starting" if starting else "ending"
    if spec.kind == KIND_EARLIEST:
        return facts.log_start_offset
    if spec.kind == KIND_LATEST:
        return facts.latest
    if spec.kind == KIND_OFFSETS:
        return resolve_offset(facts, spec.offsets[_tp(facts)])
    log = log_cache.get(facts.path)
    if log is None:
        log = log_cache[facts.path] = lookup.PartitionLog(facts.path, log_dir=facts.log_dir,
                                                          topic_partition=_tp(facts))
    if spec.kind == KIND_TIMESTAMP:
        return _by_timestamp(facts, log, spec.timestamp, starting=starting,
                             strategy=options.starting_by_timestamp_strategy, option=f"{which}Timestamp")
    return _by_timestamp(facts, log, spec.offsets[_tp(facts)], starting=starting,
                         strategy=options.starting_by_timestamp_strategy, option=f"{which}OffsetsByTimestamp")


def read_committed_view(facts: PartitionFacts, upper: int) -> Tuple[int, Tuple[AbortedTxn, ...]]:
    """(last stable offset, aborted transactions) below ``upper``, replayed from the batch headers and
    the control records' types, as the broker's producer state and ``.txnindex`` hold them."""
    return replay_below([(seg.base_offset, seg.log) for seg in facts.segments], upper)


def resolve_ranges(partitions: Sequence[PartitionFacts], options: SourceOptions,
                   bounds: Bounds) -> List[PartitionRange]:
    """Every partition's [start, end) from the options (ListOffsets through ``kafkalog.lookup.partition_log`` for
    times), checked by Spark's rules, then narrowed by the pushed-down offset bounds."""
    log_cache: Dict[str, lookup.PartitionLog] = {}
    out = []
    try:
        for facts in partitions:
            start = resolve_spec(facts, options.starting, starting=True, options=options, log_cache=log_cache)
            end = resolve_spec(facts, options.ending, starting=False, options=options, log_cache=log_cache)
            start, end = check_range(facts, start, end, fail_on_data_loss=options.fail_on_data_loss)
            aborted: Tuple[AbortedTxn, ...] = ()
            if options.read_committed:
                lso, aborted = read_committed_view(facts, end)
                end = min(end, lso)
                start = min(start, end)
            start, end = narrow(start, end, bounds)
            if start < end:
                out.append(PartitionRange(facts, start, end, aborted_in(aborted, start, end)))
    finally:
        for log in log_cache.values():
            log.close()
    return out


def _offset_entries(seg: SegmentFacts):
    """The segment's offset index (offsets, positions) when it can be trusted, else None."""
    if not seg.index:
        return None
    try:
        index = read_offset_index(seg.index, base_offset=seg.base_offset)
    except (KafkalogError, OSError, ValueError):
        return None
    if offset_index_problem(index, seg.size) is not None:
        return None
    return index


def _timestamp_seek(seg: SegmentFacts, index, ts: int) -> int:
    """Position to start reading for records with timestamp >= ts (ListOffsets' seek), or 0."""
    if not seg.timeindex or index is None:
        return 0
    try:
        tindex = read_time_index(seg.timeindex, base_offset=seg.base_offset)
    except (KafkalogError, OSError, ValueError):
        return 0
    if time_index_problem(tindex) is not None or not len(tindex):
        return 0
    _t, offset = tindex.lookup(ts)
    return int(index.lookup(offset)[1])


def plan_pieces(prange: PartitionRange, bounds: Bounds, target: int) -> List[Piece]:
    """The byte ranges of one partition's segments that hold [start, end), cut at batch boundaries."""
    facts, start, end = prange.facts, prange.start, prange.end
    kept = segments_for(facts, start, end, bounds.timestamp_lo)
    pieces: List[Piece] = []
    for i in kept:
        seg = facts.segments[i]
        index = _offset_entries(seg)
        a, b = 0, seg.size
        if index is not None and len(index):
            if start > seg.base_offset:
                a = max(a, int(index.lookup(start)[1]))
            if bounds.timestamp_lo is not None:
                a = max(a, _timestamp_seek(seg, index, bounds.timestamp_lo))
            # the first entry whose batch ends at or past end - 1; the next entry is past every wanted batch
            j = int(np.searchsorted(index.offsets, end - 1, side="left"))
            if j + 1 < len(index):
                b = int(index.positions[j + 1])
        if a >= b:
            continue
        points = split_points(a, b, index.positions if index is not None else None)
        for lo, hi in cut(a, b, points, target):
            pieces.append(Piece(facts.topic, facts.partition, seg.log, lo, hi, start, end, prange.aborted))
    return pieces


def plan_scan(options: SourceOptions, bounds: Bounds, *, parallelism: int) -> List[ScanTask]:
    """The whole plan: partitions, ranges, pieces, tasks. Raises SourceOptionError for bad options
    that only the log dirs can reveal (a partition not found, data loss)."""
    listed = list_partitions(options)
    check_listing(options, [TopicPartition(p.topic, p.partition) for _, p in listed])
    check_subscribed_topics(options, {p.topic for _, p in listed}, lambda: all_topics(options))
    if bounds.empty:
        return []
    cache: Dict[str, object] = {}
    facts = [load_partition_facts(d, p, cache) for d, p in listed if bounds.allows_partition(p.topic, p.partition)]
    ranges = resolve_ranges(facts, options, bounds)
    total = sum(s.size for r in ranges for s in r.facts.segments)
    target = target_bytes(total, parallelism=parallelism, max_partition_bytes=options.max_partition_bytes,
                          min_partitions=options.min_partitions)
    pieces = [p for r in ranges for p in plan_pieces(r, bounds, target)]
    return pack(pieces, target, options.min_partitions)
