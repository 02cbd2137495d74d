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

import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from kafkalog.errors import KafkalogError
from kafkalog.log.names import KRAFT_METADATA_TOPIC, parse_partition_dir_name
from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.cleanable import NotCleanableReason
from kafkalog.cleaner.cleaner import clean_partition
from kafkalog.cleaner.plan import plan_partition
from kafkalog.cleaner.results import (OUTCOME_DONE, OUTCOME_DRY_RUN, OUTCOME_FAILED, OUTCOME_NOT_NEEDED,
                                      PartitionCleanResult)
from kafkalog.log.local_log import pending_swap_files
from kafkalog.log.recover import recover_partition

# statuses of a partition in the report
CLEANED, WOULD_CLEAN, SKIPPED, ERROR = "cleaned", "would-clean", "skipped", "error"

PLAN_FIELDS = ("log_dir", "partition_dir", "topic", "partition", "status", "reason", "outcome", "cleanable_ratio",
               "min_cleanable_dirty_ratio", "first_dirty_offset", "upper_bound_offset", "clean_bytes",
               "cleanable_bytes", "total_bytes", "log_start_offset", "log_end_offset", "high_watermark",
               "checkpoint_offset", "first_unstable_offset", "need_compaction_now", "plan")
COUNT_FIELDS = ("batches_read", "batches_copied", "batches_rewritten", "batches_emptied", "batches_removed",
                "records_read", "records_kept", "records_superseded", "records_null_key", "tombstones_kept",
                "tombstones_removed", "aborted_records_removed", "markers_kept", "markers_removed",
                "horizons_stamped", "bytes_read", "bytes_written")
RESULT_FIELDS = ("end_offset", "map_size", "passes", "map_keys", "map_budget", "map_bytes", "groups",
                 "bytes_removed", "duration_s")
ROW_FIELDS = PLAN_FIELDS + RESULT_FIELDS + COUNT_FIELDS + ("explain",)


# KafkaRaftServer's metadata log is raft's (KafkaMetadataLog): the LogManager never loads it, so no
# broker cleaner ever compacts it, whatever cleanup.policy the configs name; its snapshots trim it.
METADATA_LOG_NOT_CLEANED = "the KRaft metadata log: raft owns it, a broker's cleaner never compacts it"


def _not_cleaned(explain: Sequence[int], why: str) -> list:
    return [f"offset {o}: partition not cleaned ({why})" for o in explain]


def _cleanable_reason(offsets, config) -> str:
    if offsets.need_compaction_now and offsets.cleanable_ratio <= config.min_cleanable_dirty_ratio:
        return "cleanable: max.compaction.lag.ms has passed"
    return (f"cleanable: dirty ratio {offsets.cleanable_ratio:.4f} > min.cleanable.dirty.ratio "
            f"{config.min_cleanable_dirty_ratio}")


def _fill_result(row: dict, result: PartitionCleanResult, dry_run: bool) -> None:
    row["outcome"] = result.outcome
    if result.error is not None:
        row.update(status=ERROR, reason=result.error)
    elif result.skipped_reason is not None:
        row.update(status=SKIPPED, reason=result.skipped_reason)
    else:
        row["status"] = WOULD_CLEAN if dry_run else CLEANED
    counts = result.committed_counts().as_dict()
    row.update({k: counts[k] for k in COUNT_FIELDS})
    stats = result.map_stats
    row.update(end_offset=result.end_offset if (result.cleaned or dry_run) else None, map_size=result.map_size,
               groups=len(result.groups), bytes_removed=result.committed_bytes_removed(),
               passes=stats.passes if stats else None, map_keys=stats.keys if stats else None,
               map_budget=stats.budget if stats else None, map_bytes=stats.bytes if stats else None)


def run_partition(log_dir: str, folder: str, *, configs, now_ms: int, options: CleanOptions = CleanOptions(),
                  explain: Sequence[int] = ()) -> dict:
    """Plan and (unless not cleanable) clean one partition folder; the caller holds the log dir's
    lock. Returns its report row (``ROW_FIELDS``); never raises for a problem of this partition.

    :param log_dir: the log dir (for the row).
    :param folder: the partition folder.
    :param configs: the broker's and the topics' configs.
    :param now_ms: the time every time-based rule is evaluated at.
    :param options: how the round runs (``dry_run``, ``map_budget_bytes``, ``engine``...); the lock is
        the caller's and the reasons kept are those ``explain`` asks for.
    :param explain: offsets whose fate the row's ``explain`` says.
    """
    dry_run = options.dry_run
    options = replace(options, lock=False, record_decisions=set(explain) or False)
    started = time.monotonic()
    row = {f: None for f in ROW_FIELDS}
    row.update(log_dir=log_dir, partition_dir=folder, explain=[], outcome=OUTCOME_NOT_NEEDED)
    name = Path(folder).name
    try:
        topic, partition, kind = parse_partition_dir_name(name)
    except KafkalogError as exc:
        row.update(topic=name, partition=-1, status=ERROR, outcome=OUTCOME_FAILED,
                   reason=f"{exc}; a broker refuses a log dir holding it", explain=_not_cleaned(explain, str(exc)))
        return row
    row.update(topic=topic, partition=partition)
    try:
        config = configs.for_topic(topic)
        row["min_cleanable_dirty_ratio"] = float(config.min_cleanable_dirty_ratio)
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
                row["reason"] = _cleanable_reason(o, config)
                try:
                    result = clean_partition(folder, config=config, now_ms=now_ms, broker=configs.broker,
                                             options=options, plan=plan)
                except MemoryError:
                    if not dry_run and pending_swap_files(folder):   # never leave this round's temporary files
                        recover_partition(folder)
                    raise
                _fill_result(row, result, dry_run)
                row["explain"] = [result.explain(o) for o in explain]
                row["duration_s"] = round(time.monotonic() - started, 3)
                return row
    except (KafkalogError, OSError, MemoryError) as exc:
        row.update(status=ERROR, outcome=OUTCOME_FAILED, reason=str(exc) or type(exc).__name__)
    if row["status"] == SKIPPED:
        row["outcome"] = OUTCOME_NOT_NEEDED
    row["explain"] = _not_cleaned(explain, row["reason"])
    row["duration_s"] = round(time.monotonic() - started, 3)
    return row


__all__ = ["CLEANED", "COUNT_FIELDS", "ERROR", "OUTCOME_DONE", "OUTCOME_DRY_RUN", "PLAN_FIELDS", "RESULT_FIELDS",
           "ROW_FIELDS", "SKIPPED", "WOULD_CLEAN", "run_partition"]
