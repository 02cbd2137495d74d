"""One partition folder's compaction round as a job runs it, start to end: plan it once, decide
whether it is cleaned, clean it (``cleaner.clean_partition``: compiled map, recopy, swap-in and
its ``cleaner-offset-checkpoint`` entry), and return its report row — the Spark job runs this in one
task per folder and moves only the row.

A row's ``status`` is cleaned / would-clean / skipped / error and its ``outcome`` one of done /
not needed / failed / rolled back (a dry run: dry run). Its counts are those of what was swapped in
(of what would be, in a dry run): a partition that failed counts nothing it did not commit, and
leaves no temporary file behind.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import List, Optional, Sequence, Union

from kafkalog.errors import KafkalogError
from kafkalog.fs.names import KRAFT_METADATA_TOPIC, parse_partition_dir_name
from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.cleanable import NotCleanableReason
from kafkalog.cleaner.cleaner import clean_partition
from kafkalog.cleaner.plan import plan_partition
from kafkalog.cleaner.split_round import SplitRound, plan_split_round
from kafkalog.cleaner.results import (OUTCOME_DONE, OUTCOME_DRY_RUN, OUTCOME_FAILED, OUTCOME_NOT_NEEDED,
                                      PartitionCleanResult)
from kafkalog.log.local_log import pending_swap_files
from kafkalog.log.recover import recover_partition
from kafkalog.row_types import Int32, as_row, row_fields

# statuses of a partition in the report
CLEANED, WOULD_CLEAN, SKIPPED, ERROR = "cleaned", "would-clean", "skipped", "error"

@dataclass(slots=True)
class _PlanColumns:
    """What the plan says of the partition (``plan_partition``, ``cleanable_offsets``)."""
    log_dir: Optional[str] = None
    partition_dir: Optional[str] = None
    topic: Optional[str] = None
    partition: Optional[Int32] = None
    status: Optional[str] = None                    # cleaned / would-clean / skipped / error
    reason: Optional[str] = None
    outcome: Optional[str] = None                   # done / not needed / failed / rolled back / dry run
    cleanable_ratio: Optional[float] = None
    min_cleanable_dirty_ratio: Optional[float] = None
    first_dirty_offset: Optional[int] = None
    upper_bound_offset: Optional[int] = None
    clean_bytes: Optional[int] = None
    cleanable_bytes: Optional[int] = None
    total_bytes: Optional[int] = None
    log_start_offset: Optional[int] = None
    log_end_offset: Optional[int] = None
    high_watermark: Optional[int] = None
    checkpoint_offset: Optional[int] = None
    first_unstable_offset: Optional[int] = None
    need_compaction_now: Optional[bool] = None
    plan: Optional[str] = None


@dataclass(slots=True)
class _ResultColumns(_PlanColumns):
    """What the round did (``PartitionCleanResult``, its map's ``KeyMapStats``)."""
    end_offset: Optional[int] = None
    map_size: Optional[int] = None
    passes: Optional[int] = None
    map_keys: Optional[int] = None
    map_budget: Optional[int] = None
    map_bytes: Optional[int] = None
    groups: Optional[Int32] = None
    split_slices: Optional[Int32] = None            # the round was split: its map pass in this many hash-slice tasks
    bytes_removed: Optional[int] = None
    duration_s: Optional[float] = None
    output: Optional[str] = None                    # --output-dir: written / copied / skipped-complete / not written
    rss_anon_above_idle_bytes: Optional[int] = None   # peak RssAnon of the process while cleaning, above idle


@dataclass(slots=True)
class _CountColumns(_ResultColumns):
    """The round's committed counts (``FilterCounts``: Kafka's ``CleanerStats`` and more)."""
    batches_read: Optional[int] = None
    batches_copied: Optional[int] = None
    batches_rewritten: Optional[int] = None
    batches_emptied: Optional[int] = None
    batches_removed: Optional[int] = None
    records_read: Optional[int] = None
    records_kept: Optional[int] = None
    records_superseded: Optional[int] = None
    records_null_key: Optional[int] = None
    tombstones_kept: Optional[int] = None
    tombstones_removed: Optional[int] = None
    aborted_records_removed: Optional[int] = None
    markers_kept: Optional[int] = None
    markers_removed: Optional[int] = None
    horizons_stamped: Optional[int] = None
    bytes_read: Optional[int] = None
    bytes_written: Optional[int] = None


@dataclass(slots=True)
class CompactionRow(_CountColumns):
    """One partition's row of the compaction report: its columns, in order, with their types (the
    Spark job's Arrow schema is ``row_types.arrow_schema(CompactionRow)``). ``slots``: a misspelt
    column is an AttributeError, not a silent extra key."""
    explain: List[str] = field(default_factory=list)

    def update(self, **values) -> None:
        """Set these columns (names as the fields')."""
        for name, value in values.items():
            setattr(self, name, value)


PLAN_FIELDS = row_fields(_PlanColumns)
RESULT_FIELDS = row_fields(_ResultColumns)[len(PLAN_FIELDS):]
COUNT_FIELDS = row_fields(_CountColumns)[len(PLAN_FIELDS) + len(RESULT_FIELDS):]
ROW_FIELDS = row_fields(CompactionRow)


# KafkaRaftServer's metadata log is raft's (KafkaMetadataLog): the LogManager never loads it, so no
# broker cleaner ever compacts it, whatever cleanup.policy the configs name; its snapshots trim it.
METADATA_LOG_NOT_CLEANED = "the KRaft metadata log: raft owns it, a broker's cleaner never compacts it"


def _not_cleaned(explain: Sequence[int], why: str) -> list:
    return [f"offset {o}: partition not cleaned ({why})" for o in explain]


# --- memory: the process's anonymous memory while a round runs --------------------------------

STATUS_FILE = "/proc/self/status"
SAMPLE_S = 0.01                    # how often the round's RssAnon is read
_idle_rss_anon: Optional[int] = None   # this process's RssAnon before its first round


def rss_anon_bytes(status_file: str = STATUS_FILE) -> Optional[int]:
    """A process's resident anonymous memory (``RssAnon`` of ``/proc/<pid>/status``): its heap and
    private mappings, without the shared libraries' and files' pages. None where there is no such line.

    :param status_file: the status file (default this process's).
    """
    try:
        with open(status_file, "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class AnonPeak:
    """The peak of this process's RssAnon while the ``with`` block runs (a daemon thread reads it
    every SAMPLE_S; the compiled kernels release the GIL, so it reads during them too), and how far
    that peak is above the process's idle RssAnon: what it held before its first round (so what a
    round loads, the kernels, or keeps for the next, its buffers, is counted)."""

    def __init__(self, interval: float = SAMPLE_S):
        global _idle_rss_anon
        self.interval = interval
        self.peak = rss_anon_bytes()
        if _idle_rss_anon is None:
            _idle_rss_anon = self.peak
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafkalog-rss-anon", daemon=True)

    def _sample(self) -> None:
        now = rss_anon_bytes()
        if now is not None and (self.peak is None or now > self.peak):
            self.peak = now

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "AnonPeak":
        if self.peak is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
        self._sample()

    @property
    def above_idle(self) -> Optional[int]:
        """Peak RssAnon above the idle process's (None without /proc)."""
        if self.peak is None or _idle_rss_anon is None:
            return None
        return max(self.peak - _idle_rss_anon, 0)


def _cleanable_reason(offsets, config) -> str:
    if offsets.need_compaction_now and offsets.cleanable_ratio <= config.min_cleanable_dirty_ratio:
        return "cleanable: max.compaction.lag.ms has passed"
    return (f"cleanable: dirty ratio {offsets.cleanable_ratio:.4f} > min.cleanable.dirty.ratio "
            f"{config.min_cleanable_dirty_ratio}")


def _fill_result(row: CompactionRow, result: PartitionCleanResult, dry_run: bool) -> None:
    row.outcome = result.outcome
    if result.error is not None:
        row.update(status=ERROR, reason=result.error)
    elif result.skipped_reason is not None:
        row.update(status=SKIPPED, reason=result.skipped_reason)
    else:
        row.status = WOULD_CLEAN if dry_run else CLEANED
    counts = result.committed_counts().as_dict()
    row.update(**{k: counts[k] for k in COUNT_FIELDS})
    stats = result.map_stats
    row.update(end_offset=result.end_offset if (result.cleaned or dry_run) else None, map_size=result.map_size,
               groups=len(result.groups), bytes_removed=result.committed_bytes_removed(),
               passes=stats.passes if stats else None, map_keys=stats.keys if stats else None,
               map_budget=stats.budget if stats else None, map_bytes=stats.bytes if stats else None)


@dataclass
class SplitStart:
    """A partition whose round is split across tasks (``split_round``): its row so far (the plan's
    columns), the round's plan, and when its task started."""
    row: CompactionRow
    split: SplitRound
    started: float

    def finish(self, result: PartitionCleanResult, dry_run: bool, elapsed_s: float,
               rss_anon_above_idle: Sequence[Optional[int]] = ()) -> dict:
        """The report row once the round's swap-in (or its failure) is known; ``rss_anon_above_idle``:
        each slice and group task's peak RssAnon above its worker's idle (``AnonPeak``), the largest
        of which is the row's ``rss_anon_above_idle_bytes`` (None where no task measured one)."""
        self.row.split_slices = self.split.slices
        _fill_result(self.row, result, dry_run)
        self.row.rss_anon_above_idle_bytes = max((m for m in rss_anon_above_idle if m is not None), default=None)
        self.row.duration_s = round(elapsed_s, 3)
        return as_row(self.row)

    def fail(self, error: str, elapsed_s: float) -> dict:
        """The report row of a split round that failed before its swap-in (nothing was changed)."""
        self.row.update(status=ERROR, outcome=OUTCOME_FAILED, reason=error, split_slices=self.split.slices,
                        groups=len(self.split.groups), duration_s=round(elapsed_s, 3))
        return as_row(self.row)


def run_partition(log_dir: str, folder: str, *, configs, now_ms: int, options: CleanOptions = CleanOptions(),
                  explain: Sequence[int] = (), output=None) -> dict:
    """``run_or_split_partition`` without a split: the partition's report row."""
    row = run_or_split_partition(log_dir, folder, configs=configs, now_ms=now_ms, options=options, explain=explain,
                                 output=output)
    assert isinstance(row, dict)
    return row


def run_or_split_partition(log_dir: str, folder: str, *, configs, now_ms: int, options: CleanOptions = CleanOptions(),
                           explain: Sequence[int] = (), split_at_bytes: Optional[int] = None,
                           min_slices: int = 1, max_slices: Optional[int] = None,
                           output=None) -> Union[dict, SplitStart]:
    """Plan and (unless not cleanable) clean one partition folder; the caller holds the log dir's
    lock. Returns its report row (a ``CompactionRow`` as the plain dict the job moves and the JSON
    report prints); never raises for a problem of this partition. With ``split_at_bytes``, a
    cleanable partition with at least that many cleanable bytes (and no ``explain``) is not cleaned
    here: its split round is planned (``split_round.plan_split_round``) and returned as a ``SplitStart``.

    :param log_dir: the log dir (for the row).
    :param folder: the partition folder.
    :param configs: the broker's and the topics' configs.
    :param now_ms: the time every time-based rule is evaluated at.
    :param options: how the round runs (``dry_run``, ``map_budget_bytes``, ``engine``...); the lock is
        the caller's and the reasons kept are those ``explain`` asks for.
    :param explain: offsets whose fate the row's ``explain`` says.
    :param split_at_bytes: split the round of a partition with this many cleanable bytes or more.
    :param min_slices: a split round's map pass in at least this many hash slices.
    :param max_slices: how many of them run at once (``split_round.plan_split_round``).
    :param output: clean into this copy (``output_dir.PartitionOutput``), the folder only read.
    """
    dry_run = options.dry_run
    options = replace(options, lock=False, record_decisions=set(explain) or False)
    started = time.monotonic()
    memory = AnonPeak()                  # (the idle figure is read before this partition's plan)
    row = CompactionRow(log_dir=log_dir, partition_dir=folder, outcome=OUTCOME_NOT_NEEDED)
    name = Path(folder).name
    try:
        topic, partition, kind = parse_partition_dir_name(name)
    except KafkalogError as exc:
        row.update(topic=name, partition=-1, status=ERROR, outcome=OUTCOME_FAILED,
                   reason=f"{exc}; a broker refuses a log dir holding it", explain=_not_cleaned(explain, str(exc)))
        return as_row(row)
    row.update(topic=topic, partition=partition)
    try:
        config = configs.for_topic(topic)
        row.min_cleanable_dirty_ratio = float(config.min_cleanable_dirty_ratio)
        if kind != "live":
            row.update(status=SKIPPED, reason=f"{kind} partition folder (only live partitions are cleaned)")
        elif topic == KRAFT_METADATA_TOPIC:
            row.update(status=SKIPPED, reason=METADATA_LOG_NOT_CLEANED)
        elif not config.compact:
            row.update(status=SKIPPED, reason=NotCleanableReason.NOT_COMPACTED.value)
        else:
            plan = plan_partition(folder, config=config, now_ms=now_ms, broker=configs.broker)
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
                row.reason = _cleanable_reason(o, config)
                if split_at_bytes is not None and not explain and o.cleanable_bytes >= split_at_bytes:
                    split = plan_split_round(plan, broker=configs.broker, options=options, min_slices=min_slices,
                                             max_slices=max_slices)
                    row.groups = len(split.groups)
                    return SplitStart(row, split, started)
                try:
                    with memory:
                        result = clean_partition(folder, config=config, now_ms=now_ms, broker=configs.broker,
                                                 options=options, plan=plan, output=output)
                except MemoryError:
                    if not dry_run and output is None and pending_swap_files(folder):   # never leave this round's temporary files
                        recover_partition(folder)
                    raise
                _fill_result(row, result, dry_run)
                row.rss_anon_above_idle_bytes = memory.above_idle
                row.explain = [result.explain(o) for o in explain]
                row.duration_s = round(time.monotonic() - started, 3)
                return as_row(row)
    except (KafkalogError, OSError, MemoryError) as exc:
        row.update(status=ERROR, outcome=OUTCOME_FAILED, reason=str(exc) or type(exc).__name__)
    if row.status == SKIPPED:
        row.outcome = OUTCOME_NOT_NEEDED
    row.explain = _not_cleaned(explain, row.reason)
    row.duration_s = round(time.monotonic() - started, 3)
    return as_row(row)


__all__ = ["AnonPeak", "CLEANED", "COUNT_FIELDS", "CompactionRow", "ERROR", "OUTCOME_DONE", "OUTCOME_DRY_RUN",
           "PLAN_FIELDS", "RESULT_FIELDS", "ROW_FIELDS", "SKIPPED", "SplitStart", "WOULD_CLEAN", "rss_anon_bytes",
           "run_or_split_partition", "run_partition"]
