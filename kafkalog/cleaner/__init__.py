"""Log compaction (Kafka's ``LogCleaner``), single process: pure decisions over plain data plus a
thin write-back layer that swaps cleaned segments in as a broker does (spec §7, §3.3).

Modules, one Kafka concept each:

* ``cleanable``            LogCleanerManager.cleanableOffsets + dirty ratio (§7.1-7.2)
* ``transaction_metadata`` CleanedTransactionMetadata: aborted data and markers (§7.6)
* ``producer_state``       ProducerStateManager's active producers and first unstable offset
* ``offset_map``           the key → latest offset map as a dict: the reference engine's (§7.4)
* ``key_map``              the compiled map: exact keys in flat arrays within a byte budget, the
                           key-only record walk, hash slices and bitsets (SkimpyOffsetMap's role)
* ``key_walk``             the map pass over a partition's segments with that map (§7.4)
* ``record_filter``        checkBatchRetention / shouldRetainRecord / filterTo (§7.6-7.8)
* ``filter_to``            MemoryRecords.filterTo compiled: record_filter's twin (same bytes), the
                           kernel for plain windows, decoded columns for the rest
* ``filter_to_kernel``     its numba kernel, parameters grouped as NamedTuples
* ``segment_grouping``     groupSegmentsBySize (§7.5)
* ``source_segments``      the segments a round reads: opened with CRC checks, decoded a window at a time
* ``plan``                 the round's plan (LogToClean): offsets, producer state, cleanable range
* ``results``              what a round did, per group, batch and record (reports)
* ``swap``                 replaceSegments: the cleaned group swapped in, and the cleaner checkpoint
* ``cleaner``              one round end to end: map pass, recopy of each group, then swap-in (§7.5)
* ``partition_run``        one partition's round as a job runs it, and its report row
  (the partition's offsets and the swap recovery live in ``kafkalog.log``: local_log, recover)
"""
from kafkalog.cleaner.cleanable import CleanableOffsets, NotCleanableReason, cleanable_offsets
from kafkalog.cleaner.cleaner import build_partition_offset_map, clean_log_dir, clean_partition, offset_map_entries
from kafkalog.cleaner.plan import PartitionPlan, plan_partition
from kafkalog.cleaner.results import PartitionCleanResult
from kafkalog.cleaner.offset_map import ExactOffsetMap, OffsetMap
from kafkalog.cleaner.record_filter import BatchRetention, FilterCounts, RecordReason
from kafkalog.log.recover import PartitionRecovery, recover_log_dirs, recover_partition
from kafkalog.cleaner.segment_grouping import group_segments_by_size

__all__ = [
    "BatchRetention", "CleanableOffsets", "ExactOffsetMap", "FilterCounts", "NotCleanableReason",
    "OffsetMap", "PartitionCleanResult", "PartitionPlan", "PartitionRecovery", "RecordReason",
    "build_partition_offset_map", "clean_log_dir", "clean_partition", "cleanable_offsets", "group_segments_by_size",
    "offset_map_entries", "plan_partition", "recover_log_dirs", "recover_partition",
]
