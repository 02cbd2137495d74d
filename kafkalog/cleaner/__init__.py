"""Log compaction (Kafka's ``LogCleaner``), single process: pure decisions over plain data plus a
thin write-back layer that swaps cleaned segments in as a broker does (Kafka's ``LogCleaner.java``, ``Cleaner.java``,
``LogCleanerManager.java``; the swap as ``LocalLog.replaceSegments`` and ``LogLoader.load`` finish it).

Modules, one Kafka concept each:

* ``cleanable``            LogCleanerManager.cleanableOffsets + dirty ratio
* ``transaction_metadata`` CleanedTransactionMetadata: aborted data and markers
* ``producer_state``       ProducerStateManager's active producers and first unstable offset
* ``offset_map``           the key → latest offset map as a dict: the reference engine's (Cleaner.buildOffsetMap)
* ``key_hash``             the keys' 64-bit hash, and the slot and hash slice it picks
* ``key_map``              the compiled map: exact keys in an open-addressing table of flat arrays
                           within a byte budget (SkimpyOffsetMap's role)
* ``hyper_log_log``        the distinct-key count that plans the hash slices of a range too big for one map
* ``bitsets``              one bit per recopied record: found in the map, superseded
* ``key_walk``             the map pass over a partition's segments with that map: the key-only record
                           walk (numba), hash-slice passes (Cleaner.buildOffsetMap)
* ``slice_pass``           one hash slice of the map pass on its own (a split round's slice task)
* ``record_filter``        checkBatchRetention / shouldRetainRecord / filterTo
* ``filter_to``            MemoryRecords.filterTo compiled: record_filter's twin (same bytes), the
                           kernel for plain windows, decoded columns for the rest
* ``filter_to_kernel``     its numba kernel, parameters grouped as NamedTuples
* ``segment_grouping``     Cleaner.groupSegmentsBySize
* ``source_segments``      the segments a round reads: opened with CRC checks, decoded a window at a time
* ``plan``                 the round's plan (LogToClean): offsets, producer state, cleanable range
* ``results``              what a round did, per group, batch and record (reports)
* ``cleaned_segment``      createNewCleanedSegment: a group's ``.log.cleaned`` streamed and indexed
* ``swap``                 replaceSegments: the cleaned group swapped in, and the cleaner checkpoint
* ``clean_options``        how a round runs (CleanOptions: dry run, lock, reasons, budgets, engine)
* ``cleaner``              one round end to end: map pass, recopy of each group, then swap-in (Cleaner.doClean/cleanSegments)
* ``partition_run``        one partition's round as a job runs it, and its report row (CompactionRow)
* ``split_round``          one round split across tasks: hash slices' bitsets, groups recopied apart, one swap-in
* ``output_dir``           the round written to a new place (``compact --output-dir``): cleaned groups under
                           their final names, the rest copied, per-partition manifests, resumable
* ``output_tree``          the destination's files, local or any pyarrow.fs URI: streamed, read back, removed
  (the partition's offsets and the swap recovery live in ``kafkalog.log``: local_log, recover)
"""
from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.cleanable import CleanableOffsets, NotCleanableReason, cleanable_offsets
from kafkalog.cleaner.cleaner import build_partition_offset_map, clean_log_dir, clean_partition, offset_map_entries
from kafkalog.cleaner.plan import PartitionPlan, plan_partition
from kafkalog.cleaner.results import PartitionCleanResult
from kafkalog.cleaner.offset_map import ExactOffsetMap, OffsetMap
from kafkalog.cleaner.record_filter import BatchRetention, FilterCounts, RecordReason
from kafkalog.log.recover import PartitionRecovery, recover_log_dirs, recover_partition
from kafkalog.cleaner.segment_grouping import group_segments_by_size

__all__ = [
    "BatchRetention", "CleanOptions", "CleanableOffsets", "ExactOffsetMap", "FilterCounts", "NotCleanableReason",
    "OffsetMap", "PartitionCleanResult", "PartitionPlan", "PartitionRecovery", "RecordReason",
    "build_partition_offset_map", "clean_log_dir", "clean_partition", "cleanable_offsets", "group_segments_by_size",
    "offset_map_entries", "plan_partition", "recover_log_dirs", "recover_partition",
]
