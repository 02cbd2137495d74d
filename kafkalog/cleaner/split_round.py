"""One partition's cleaning round split across tasks (issue 34): the map pass as hash slices run
apart, each answering with bitsets over the records of the recopied range; the recopy of each
segment group apart, given the slices' bitsets OR-ed; then one swap-in of every group of the round.
The bytes are ``cleaner.clean_partition``'s with the same ``now_ms`` (Kafka's ``Cleaner.doClean``:
``buildOffsetMap``, ``cleanSegments`` per group, ``LocalLog.replaceSegments``).

The steps, each a pure function of what it is given (a Spark job runs 2 and 3 in tasks, anywhere):

1. ``plan_split_round`` — once, where the partition is planned: the round's ``PartitionPlan``
   (offsets, high watermark, active producers, first unstable offset; its segments shipped without
   their batch scans, each task scanning — CRC-checked — only the segments it reads), the hash slice
   count (the dirty range's records, else a HyperLogLog count of its distinct keys, against what one
   map of the budget holds), the segment groups (``group_segments_by_size``), each recopied segment's
   first record ordinal, and the decisions that are not per key, made once here in log order: the
   transaction tracker (``CleanedTransactionMetadata``: aborted transactions, which markers are kept)
   as it stands at the start of each group — Kafka carries ONE tracker through the groups in order,
   so a group cleaned apart starts from the state the groups before it left. Tombstone horizons and
   batch retention are per batch (its header, ``now_ms``, the plan's producers): the same in any task.
2. ``slice_bits`` — per hash slice s of n: the keys of slice s walked into a map within the budget
   (``key_walk``'s passes), answering (superseded, found) bitsets, one bit per record of the recopied
   range; no key leaves the task. A slice whose keys do not fit the budget is an error, never a
   silent overflow. ``merge_bits`` ORs the slices' bitsets (each record's key is in one slice only).
3. ``clean_split_group`` — per segment group: the recopy (``cleaner._clean_group``) with the merged
   bits and the group's tracker, written as ``<base>.log.cleaned`` and its indexes (step a. of the
   swap, verified), answering a ``GroupDone``.
4. ``swap_in_split_round`` — once, under the log dir's lock: every group's ``.cleaned`` checked, then
   installed in order (``.cleaned`` → ``.swap`` → live, ``swap.install_cleaned``) and the
   ``cleaner-offset-checkpoint`` entry written. A crash before it leaves ``.cleaned`` files only, which
   ``recover`` (a broker's startup) drops; within it, exactly ``clean_partition``'s swap: ``recover``
   finishes or rolls back the interrupted group.

``clean_partition_split`` runs the four steps in one process (tests; slices and groups in any order).
Only the compiled engine splits (the bits are its map's answers); ``record_decisions`` are not kept.
"""
from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

import kafkalog.cleaner.cleaner as cleaner
from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.cleaned_segment import CleanedSink
from kafkalog.cleaner.key_map import SLOT_BYTES, KeyMap, KeyMapStats
from kafkalog.cleaner.key_walk import MAP_NEVER, SLICE_HEADROOM, KeyVerdicts, segment_ordinals
from kafkalog.cleaner.slice_pass import count_distinct_keys, dirty_walk, insert_walk_marks, slice_pass
from kafkalog.cleaner.plan import PartitionPlan, max_batch_bytes
from kafkalog.cleaner.results import GroupResult, PartitionCleanResult
from kafkalog.cleaner.segment_grouping import group_segments_by_size
from kafkalog.cleaner.source_segments import read_windows
from kafkalog.cleaner.swap import STEP_CHECKPOINT, install_cleaned, report_step, update_cleaner_checkpoint, write_cleaned
from kafkalog.cleaner.transaction_metadata import CleanedTransactionMetadata
from kafkalog.config import BrokerConfig
from kafkalog.engine import COMPILED, resolve as resolve_engine
from kafkalog.errors import FenceLostError, KafkalogError
from kafkalog.format import control_record as cr
from kafkalog.format import record_batch as rb
from kafkalog.format.compression import decompress
from kafkalog.format.varint import read_varint, read_varlong
from kafkalog.fs import durable, filesystem
from kafkalog.fs.lock import is_locked, lock_log_dir, locked_refusal
from kafkalog.fs.names import CLEANED_SUFFIX, CLEANER_OFFSET_CHECKPOINT, format_segment_file_name
from kafkalog.log.local_log import collect_aborted_transactions
from kafkalog.log.segment import LogSegment

_TXN_OR_CONTROL = rb.TRANSACTIONAL_FLAG_MASK | rb.CONTROL_FLAG_MASK
SLICE_SPREAD = 4.0                 # standard deviations of a slice's key count its map is planned to absorb
KEY_SAMPLE_WINDOWS = 2             # windows of the dirty range decoded to sample the keys' length
MAX_SUB_PASSES = 64                # sub-slices a slice task tries (doubling) before its keys are an error


# --- the plan --------------------------------------------------------------------------------

@dataclass
class SplitRound:
    """Everything the tasks of a split round need, decided once (pure data, pickled to the tasks).

    :param plan: the round's plan, its segments without their scans (``shipped``).
    :param end_offset: the round's end (the new cleaner checkpoint).
    :param slices: hash slices of the map pass.
    :param budget: bytes one slice's map may take.
    :param load_factor: ``log.cleaner.io.buffer.load.factor``.
    :param weak_hash: the tests' weak key hash (``cleaner.KEY_HASH_WEAK`` when planned).
    :param io_buffer_size: the recopy's read chunk.
    :param recopied: how many of ``plan.segments`` are recopied (those with base < end_offset).
    :param ordinals: each recopied segment's first record's ordinal, by base offset.
    :param nbits: records of the recopied range (bits of a bitset).
    :param mark: whether the insert walk's bits answer the dirty records (``key_walk``).
    :param walk_records: records of the map pass's batches (what bounds a map's slots).
    :param groups: the segment groups, as indexes into the recopied segments.
    :param trackers: the transaction tracker at the start of each group.
    :param estimated_keys: the distinct keys counted (HyperLogLog), None when the records fit one map.
    """

    plan: PartitionPlan
    end_offset: int
    slices: int
    budget: int
    load_factor: float
    weak_hash: bool
    io_buffer_size: int
    recopied: int
    ordinals: Dict[int, int]
    nbits: int
    mark: bool
    walk_records: int
    groups: List[List[int]]
    trackers: List[CleanedTransactionMetadata] = field(repr=False)
    estimated_keys: Optional[float] = None

    @property
    def path(self) -> Path:
        return self.plan.path

    def recopied_segments(self) -> List[LogSegment]:
        return self.plan.segments[:self.recopied]

    def group_segments(self, g: int) -> List[LogSegment]:
        rec = self.recopied_segments()
        return [rec[i] for i in self.groups[g]]


def shipped(plan: PartitionPlan) -> PartitionPlan:
    """``plan`` without what its segments read (scans, open files, indexes): small to pickle; a task
    scans a segment again (every CRC checked) when it reads it."""
    segments = [replace(s, _scan=None, fd=None, offset_index=None, time_index=None) for s in plan.segments]
    return replace(plan, segments=segments)


def _control_type(buf: np.ndarray, h, b: int, path: Path, limit: int) -> Optional[int]:
    """The type of control batch ``b``'s first record (None when it holds none), as the recopy's
    ``SourceWindow.control_type`` reads it."""
    if int(h.recordsCount[b]) <= 0:
        return None
    pos, size = int(h.position[b]), int(h.size[b])
    payload = bytes(buf[pos + rb.RECORDS_OFFSET:pos + size])
    codec = int(h.attributes[b]) & rb.COMPRESSION_CODEC_MASK
    if codec:
        payload = decompress(codec, payload, magic=2, max_bytes=limit)
    _length, p = read_varint(payload, 0)
    _ts, p = read_varlong(payload, p + 1)
    _od, p = read_varint(payload, p)
    klen, p = read_varint(payload, p)
    if klen >= 0 and p + klen > len(payload):
        raise KafkalogError(f"the control record of the batch at offset {int(h.baseOffset[b])} is cut short",
                            path=path, position=pos)
    return cr.parse_control_type(payload[p:p + klen] if klen >= 0 else None)


def group_trackers(plan: PartitionPlan, recopied: Sequence[LogSegment], groups: Sequence[Sequence[int]]
                   ) -> List[CleanedTransactionMetadata]:
    """The round's transaction tracker at the start of each group: the groups before it replayed in
    log order as the recopy feeds them (per source segment its aborted transactions, then its
    transactional and control batches; a plain data batch only consumes, which the next special
    batch does first). What the recopy of a group cleaned apart must start from."""
    tracker = CleanedTransactionMetadata()
    limit = max_batch_bytes(plan.config)
    out = []
    for idx in groups:
        out.append(copy.deepcopy(tracker))
        for k, i in enumerate(idx):
            seg = recopied[i]
            upper = recopied[idx[k + 1]].base_offset if k + 1 < len(idx) else seg.next_offset
            tracker.add_aborted_transactions(collect_aborted_transactions(
                plan.segments, seg.base_offset, upper, plan.log_start_offset))
            h = seg.scan().headers
            special = np.flatnonzero((h.attributes & _TXN_OR_CONTROL) != 0)
            if not special.size:
                continue
            with filesystem.open_view(seg.log_path) as f:
                for b in special.tolist():
                    pid, last = int(h.producerId[b]), int(h.lastOffset[b])
                    if h.attributes[b] & rb.CONTROL_FLAG_MASK:
                        tracker.on_control_batch(pid, last, _control_type(f.array, h, b, seg.log_path, limit))
                    else:
                        tracker.on_data_batch(pid, last, True)
    return out


def _mean_key_tail(plan: PartitionPlan, walk) -> float:
    """The keys' mean bytes past the 16 a slot holds, over the first windows of the dirty range: what
    the slots leave of the budget for the keys' tails (``key_map``)."""
    lengths: List[np.ndarray] = []
    for seg, pos, _ in walk.segments:
        windows = read_windows(seg, max_batch_bytes=max_batch_bytes(plan.config), from_position=pos)
        for _w, win in zip(range(KEY_SAMPLE_WINDOWS - len(lengths)), windows):
            offs = np.frombuffer(win.keys.buffers()[1], np.int32)[win.keys.offset:win.keys.offset + len(win.keys) + 1]
            lengths.append(np.diff(offs)[win.key_valid])
        windows.close()
        if len(lengths) >= KEY_SAMPLE_WINDOWS:
            break
    sample = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    return float(np.maximum(sample.astype(np.int64) - 16, 0).mean()) if sample.size else 0.0


def slices_needed(plan: PartitionPlan, walk, *, budget: int, load_factor: float, weak_hash: bool,
                  min_slices: int = 1, max_slices: Optional[int] = None) -> Tuple[int, Optional[float]]:
    """Hash slices whose maps each fit ``budget``: 1 when the dirty range's records fit one map;
    ``min_slices`` when they are as many as run at once (``max_slices``, the task slots): more could
    not run beside them, and a slice task whose keys overflow its map walks sub-slices of its own
    (``slice_bits``) — cheaper than a counting walk over the whole range before any slice starts;
    else the distinct keys counted (HyperLogLog, one keys-only walk) x ``SLICE_HEADROOM`` over the keys
    one map holds with tails as long as the sampled keys', and enough that a slice's count (about its
    mean as a Poisson count) stays ``SLICE_SPREAD`` standard deviations below that. Returns (slices,
    estimated keys or None)."""
    m = KeyMap(budget, load_factor, weak_hash=weak_hash, max_records=walk.records)
    tail = _mean_key_tail(plan, walk)
    per_map = max(min(m.max_keys, int(budget / (SLOT_BYTES + load_factor * tail) * load_factor)), 1)
    if walk.records <= per_map:
        return 1, None
    if max_slices is not None and min_slices >= max_slices:
        return min_slices, None
    estimate = count_distinct_keys(plan, walk, m, max_batch_bytes(plan.config))
    # a slice's keys vary about their mean as a Poisson count: the mean is kept SLICE_SPREAD standard
    # deviations below what a map holds (it matters for small maps; large ones take SLICE_HEADROOM's)
    mean = ((math.sqrt(SLICE_SPREAD ** 2 + 4 * per_map) - SLICE_SPREAD) / 2) ** 2
    return max(1, math.ceil(estimate * SLICE_HEADROOM / per_map), math.ceil(estimate / max(mean, 1.0))), estimate


def plan_split_round(plan: PartitionPlan, *, broker: BrokerConfig = BrokerConfig(),
                     options: CleanOptions = CleanOptions(), slices: Optional[int] = None,
                     min_slices: int = 1, max_slices: Optional[int] = None) -> SplitRound:
    """Step 1: decide a split round of ``plan`` (a cleanable plan: the caller checked).

    :param plan: the partition's plan (``plan_partition``).
    :param broker: the broker's settings (load factor, buffers, threads).
    :param options: ``map_budget_bytes`` (default ``cleaner.map_budget(broker)``), ``io_buffer_size``, ``engine``.
    :param slices: force this many hash slices (else as many as the budget needs).
    :param min_slices: at least this many slices (to spread the map pass over that many tasks).
    :param max_slices: how many slice tasks run at once (the task slots; None: unknown, count the keys).
    """
    if resolve_engine(options.engine) != COMPILED:
        raise KafkalogError("only the compiled engine splits a round (the bitsets are its map's answers)",
                            path=plan.path)
    end_offset = plan.upper_bound_offset
    recopied = [s for s in plan.segments if s.base_offset < end_offset]
    if not recopied:
        raise KafkalogError("the round recopies no segment", path=plan.path)
    if any(s.has_legacy for s in recopied):
        raise KafkalogError("segments hold v0/v1 messages; the legacy compaction rules are not implemented",
                            path=plan.path)
    ordinals, nbits = segment_ordinals(recopied)
    walk = dirty_walk(plan, ordinals)
    mark = insert_walk_marks(plan, recopied, walk, nbits)
    budget = options.map_budget_bytes or cleaner.map_budget(broker)
    load_factor = float(broker.setting("log.cleaner.io.buffer.load.factor"))
    weak = cleaner.KEY_HASH_WEAK
    estimate = None
    if slices is None:
        slices, estimate = slices_needed(plan, walk, budget=budget, load_factor=load_factor, weak_hash=weak,
                                         min_slices=min_slices, max_slices=max_slices)
    slices = max(int(slices), int(min_slices), 1)
    cfg = plan.config
    groups = group_segments_by_size([s.segment for s in recopied], max_size=cfg.segment_bytes,
                                    max_index_size=cfg.segment_index_bytes, first_uncleanable_offset=end_offset)
    trackers = group_trackers(plan, recopied, groups)
    return SplitRound(shipped(plan), end_offset, slices, budget, load_factor, weak,
                      options.io_buffer_size or cleaner.default_io_buffer_size(broker), len(recopied), ordinals,
                      nbits, mark, walk.records, groups, trackers, estimate)


def _check_unchanged(segments: Iterable[LogSegment]) -> None:
    """The segments are the files the round was planned on (size and mtime), else an error."""
    for s in segments:
        try:
            st = os.stat(s.log_path)
        except OSError as e:
            raise KafkalogError(f"segment {s.base_offset} is gone since the round was planned ({e.strerror})",
                                path=s.log_path) from None
        if st.st_size != s.size or st.st_mtime_ns != s.mtime_ns:
            raise KafkalogError(f"segment {s.base_offset} changed since the round was planned", path=s.log_path,
                                hint="run the compaction again")


# --- step 2: one hash slice ------------------------------------------------------------------

@dataclass
class SliceBits:
    """What one hash slice answers: over the records of the recopied range, one bit per record each,
    the records a later record of their key supersedes, and the records whose key the slice holds
    (which only the report's counts read: kept as their key's latest vs. not in the map)."""

    slice_index: int
    superseded: np.ndarray
    found: np.ndarray
    keys: int
    map_bytes: int
    passes: int = 1                    # map passes the slice took (its keys in sub-slices when they overflowed)
    rss_anon_above_idle_bytes: Optional[int] = None   # the task's peak RssAnon above idle (set by the job's task)


def slice_bits(split: SplitRound, s: int) -> SliceBits:
    """Step 2: the map pass of hash slice ``s`` of ``split.slices`` over the whole dirty range, in
    one pass when its keys fit ``split.budget``, else in 2, 4, ... passes over sub-slices of it (slice
    s of n is exactly slices s*k .. s*k + k-1 of n*k: ``key_hash.slice_of`` maps the hash's high 32 bits
    onto [0, n) by multiplication), their bits OR-ed. Raises ``KafkalogError`` when even
    ``MAX_SUB_PASSES`` passes do not fit (a key longer than the budget).

    :param split: the round (``plan_split_round``).
    :param s: the slice, 0 <= s < split.slices.
    """
    if not 0 <= s < split.slices:
        raise ValueError(f"slice {s} is not one of the round's {split.slices}")
    plan = split.plan
    recopied = split.recopied_segments()
    _check_unchanged(recopied)
    walk = dirty_walk(plan, split.ordinals)
    m = KeyMap(split.budget, split.load_factor, weak_hash=split.weak_hash, max_records=walk.records)
    sub = 1
    while True:
        size = (split.nbits + 7) // 8
        found, superseded = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
        keys = nbytes = 0
        for j in range(sub):
            bits = slice_pass(plan, walk, m, split.slices * sub, s * sub + j, recopied=recopied,
                              first_ordinals=split.ordinals, nbits=split.nbits, mark=split.mark,
                              max_batch_bytes=max_batch_bytes(plan.config))
            if bits is None:
                break
            np.bitwise_or(found, bits[0], out=found)
            np.bitwise_or(superseded, bits[1], out=superseded)
            keys, nbytes = keys + len(m), max(nbytes, m.nbytes)
        else:
            return SliceBits(s, superseded, found, keys, nbytes, passes=sub)
        if sub >= MAX_SUB_PASSES:
            raise KafkalogError(f"hash slice {s} of {split.slices}: its keys do not fit the cleaner's map of "
                                f"{split.budget} bytes in {sub} passes ({len(m)} keys held when it filled)",
                                path=plan.path, hint="raise log.cleaner.dedupe.buffer.size, or run the partition "
                                                     "without --split")
        sub *= 2


def merge_bits(split: SplitRound, parts: Iterable[SliceBits]) -> Tuple[np.ndarray, np.ndarray, KeyMapStats]:
    """The OR of every slice's bitsets (each record's key is in exactly one slice): (superseded,
    found, the map's stats). Every slice must be there exactly once."""
    parts = sorted(parts, key=lambda p: p.slice_index)
    if [p.slice_index for p in parts] != list(range(split.slices)):
        raise KafkalogError(f"the map pass answered slices {[p.slice_index for p in parts]}, not each of "
                            f"0..{split.slices - 1} once", path=split.path)
    size = (split.nbits + 7) // 8
    superseded, found = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    for p in parts:
        if len(p.superseded) != size or len(p.found) != size:
            raise KafkalogError(f"slice {p.slice_index}'s bitsets have {len(p.superseded)} bytes, not {size}",
                                path=split.path)
        np.bitwise_or(superseded, p.superseded, out=superseded)
        np.bitwise_or(found, p.found, out=found)
    keys = sum(p.keys for p in parts)
    stats = KeyMapStats(passes=sum(p.passes for p in parts), keys=keys, budget=split.budget,
                        bytes=max((p.map_bytes for p in parts), default=0))
    return superseded, found, stats


# --- step 3: one segment group ---------------------------------------------------------------

@dataclass
class GroupDone:
    """What the recopy of one group answers (its ``.cleaned`` files are on disk unless a dry run)."""

    index: int
    group: GroupResult             # as ``clean_partition`` reports a group
    suffixes: List[str]            # the ``.cleaned`` files written (``swap.write_cleaned``)
    rss_anon_above_idle_bytes: Optional[int] = None   # the task's peak RssAnon above idle (set by the job's task)


def _cleaned_path(split: SplitRound, base: int, suffix: str = "log") -> Path:
    return split.path / format_segment_file_name(base, suffix, CLEANED_SUFFIX)


def clean_split_group(split: SplitRound, g: int, superseded: np.ndarray, found: np.ndarray, *,
                      dry_run: bool = False, stats: Optional[KeyMapStats] = None) -> GroupDone:
    """Step 3: recopy group ``g`` with the merged bitsets, from the tracker the groups before it left,
    into ``<base>.log.cleaned`` and its indexes (written and verified: ``swap.write_cleaned``; a dry
    run writes nothing). On an error its ``.cleaned`` files are removed.

    :param split: the round.
    :param g: the group's index in ``split.groups``.
    :param superseded: the merged superseded bitset (``merge_bits``).
    :param found: the merged found bitset.
    :param dry_run: count only.
    :param stats: the map's stats (for the verdicts' report; optional).
    """
    plan = split.plan
    sources = split.group_segments(g)
    _check_unchanged(sources)
    verdicts = KeyVerdicts(split.end_offset, stats or KeyMapStats(), found_bits=found, superseded_bits=superseded,
                           map_below=MAP_NEVER)
    tracker = copy.deepcopy(split.trackers[g])
    base = sources[0].base_offset
    sink = CleanedSink(None if dry_run else _cleaned_path(split, base))
    result = PartitionCleanResult(plan.path, plan.topic, plan.partition, dry_run=dry_run)
    try:
        out = cleaner.clean_group(plan, sources, verdicts, split.io_buffer_size, result, False, sink,  # type: ignore[arg-type]  # KeyVerdicts: see cleaner._clean_segment_fast
                                   tracker, split.ordinals, COMPILED)
        if dry_run:
            out.appender.finish()              # raises here if the indexes could not be built
            suffixes: List[str] = []
        else:
            suffixes = write_cleaned(plan.path, out, None)
    except BaseException:
        sink.discard()
        if not dry_run:
            _discard_group(split, base)
        raise
    return GroupDone(g, GroupResult(base, [s.base_offset for s in sources], sum(s.size for s in sources), sink.size,
                                    len(out.txn_entries), out.counts), suffixes)


def _discard_group(split: SplitRound, base: int) -> None:
    if not durable.fences_hold():
        return
    for suffix in ("log", "index", "timeindex", "txnindex"):
        durable.remove(_cleaned_path(split, base, suffix), missing_ok=True)


def discard_split_round(split: SplitRound) -> None:
    """Remove every group's ``.cleaned`` files (a round given up before its swap-in)."""
    rec = split.recopied_segments()
    for idx in split.groups:
        _discard_group(split, rec[idx[0]].base_offset)


# --- step 4: the swap-in ---------------------------------------------------------------------

def _round_result(split: SplitRound, done: Sequence[GroupDone], stats: KeyMapStats,
                  dry_run: bool) -> PartitionCleanResult:
    plan = split.plan
    result = PartitionCleanResult(plan.path, plan.topic, plan.partition, offsets=plan.offsets, dry_run=dry_run)
    result.map_stats = stats
    result.map_size = stats.keys
    result.end_offset = split.end_offset
    for d in sorted(done, key=lambda d: d.index):
        result.counts.add(d.group.counts)
        result.groups.append(d.group)
    return result


def swap_in_split_round(split: SplitRound, done: Sequence[GroupDone], stats: KeyMapStats, *,
                        options: CleanOptions = CleanOptions()) -> PartitionCleanResult:
    """Step 4: every group's ``.cleaned`` files checked, then swapped in, in order, and the
    ``cleaner-offset-checkpoint`` entry written — under the log dir's lock (taken here unless
    ``options.lock`` is False: the caller holds it). Failures as ``clean_partition``'s: a swap-in
    that fails midway is finished or rolled back (``result.outcome``), a lost lock changes nothing
    more. A group missing or not as answered: nothing is swapped, every ``.cleaned`` file removed.

    :param split: the round.
    :param done: every group's ``GroupDone``.
    :param stats: the map's stats (``merge_bits``).
    :param options: ``dry_run``, ``lock``, ``on_step``, ``update_checkpoint``.
    """
    log_dir = split.path.parent
    if options.lock and not options.dry_run:
        if is_locked(log_dir):
            raise locked_refusal(log_dir)
        with lock_log_dir(log_dir):
            return _swap_in_locked(split, done, stats, options)
    return _swap_in_locked(split, done, stats, options)


def _swap_in_locked(split: SplitRound, done: Sequence[GroupDone], stats: KeyMapStats,
                    options: CleanOptions) -> PartitionCleanResult:
    result = _round_result(split, done, stats, options.dry_run)
    if options.dry_run:
        return result
    plan = split.plan
    try:
        if sorted(d.index for d in done) != list(range(len(split.groups))):
            raise KafkalogError(f"groups {sorted(d.index for d in done)} were recopied, not each of "
                                f"0..{len(split.groups) - 1} once", path=plan.path)
        for d in done:
            path = _cleaned_path(split, d.group.base_offset)
            if not path.is_file() or path.stat().st_size != d.group.bytes_after:
                raise KafkalogError(f"group {d.index}'s cleaned segment is missing or not the size its task wrote "
                                    f"({d.group.bytes_after} bytes)", path=path)
        _check_unchanged(split.recopied_segments())
    except (KafkalogError, OSError) as e:
        discard_split_round(split)
        result.error = str(e) if isinstance(e, KafkalogError) else cleaner.os_error_text(e, plan.path)
        result.rolled_back = True
        return result
    try:
        for d in sorted(done, key=lambda d: d.index):
            install_cleaned(plan.path, d.group.base_offset, d.group.source_base_offsets, d.suffixes, options.on_step)
            result.groups_committed += 1
    except FenceLostError as e:
        cleaner.stop_after_lost_fence(result, e)
        return result
    except (KafkalogError, OSError) as e:
        cleaner.recover_after_failed_swap(plan.path, result, e)
        return result
    if options.update_checkpoint:
        update_cleaner_checkpoint(plan.path.parent, plan.topic, plan.partition, split.end_offset)
        report_step(options.on_step, STEP_CHECKPOINT, plan.path.parent / CLEANER_OFFSET_CHECKPOINT)
    result.cleaned = True
    return result


# --- all four in one process -----------------------------------------------------------------

def clean_partition_split(plan: PartitionPlan, *, broker: BrokerConfig = BrokerConfig(),
                          options: CleanOptions = CleanOptions(), slices: Optional[int] = None,
                          min_slices: int = 1, max_slices: Optional[int] = None,
                          order: Optional[np.random.Generator] = None) -> PartitionCleanResult:
    """The split round run in this process: plan, every slice, merge, every group, swap-in — the
    bytes ``clean_partition`` writes. ``order``: run the slices and the groups in an order this
    generator shuffles (tests: no step may depend on another's order). The caller checked that the
    plan is cleanable; ``options.lock`` as ``swap_in_split_round``'s (the recopy writes only
    ``.cleaned`` files, which the swap-in checks).

    :param plan: the partition's plan.
    :param broker: the broker's settings.
    :param options: how the round runs.
    :param slices: force this many hash slices.
    :param min_slices: at least this many.
    :param max_slices: how many run at once (``plan_split_round``).
    :param order: shuffle the slices and groups with it.
    """
    split = plan_split_round(plan, broker=broker, options=options, slices=slices, min_slices=min_slices,
                             max_slices=max_slices)
    slice_order = list(range(split.slices))
    group_order = list(range(len(split.groups)))
    if order is not None:
        order.shuffle(slice_order)
        order.shuffle(group_order)
    superseded, found, stats = merge_bits(split, [slice_bits(split, s) for s in slice_order])
    done: List[GroupDone] = []
    try:
        for g in group_order:
            done.append(clean_split_group(split, g, superseded, found, dry_run=options.dry_run, stats=stats))
    except BaseException:
        if not options.dry_run:
            discard_split_round(split)
        raise
    return swap_in_split_round(split, done, stats, options=options)


__all__ = ["GroupDone", "SliceBits", "SplitRound", "clean_partition_split", "clean_split_group",
           "discard_split_round", "group_trackers", "merge_bits", "plan_split_round", "shipped", "slice_bits",
           "slices_needed", "swap_in_split_round"]
