"""What a cleaning round did to one partition, for reports: per group, per batch and per record
(Kafka's ``CleanerStats`` and the log lines of ``Cleaner.cleanSegments``, as data)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from kafkalog.cleaner.key_map import KeyMapStats
from kafkalog.cleaner.cleanable import CleanableOffsets
from kafkalog.cleaner.record_filter import BatchRetention, FilterCounts, RecordReason

# A partition's outcome in a round (reports)
OUTCOME_DONE, OUTCOME_NOT_NEEDED, OUTCOME_FAILED, OUTCOME_ROLLED_BACK, OUTCOME_DRY_RUN = (
    "done", "not needed", "failed", "rolled back", "dry run")


# --- results ---------------------------------------------------------------------------------

@dataclass
class BatchAudit:
    base_offset: int
    last_offset: int
    retention: BatchRetention
    reason: str
    written: str       # "original" | "rewritten" | "empty" | "removed"


# How a batch ended, in an operator's words (``BatchAudit.written``)
_WRITTEN_WORDS = {"original": "copied unchanged", "rewritten": "rewritten with the records kept",
                  "empty": "kept as an empty batch"}


def batch_words(batch: BatchAudit) -> str:
    """What the round did to ``batch``, for ``--explain``: "batch 0..9 rewritten with the records
    kept", "batch 4..4 removed: aborted transactional data of producer 7", "batch 0..0 kept as an
    empty batch (last batch of active producer 3: kept even if emptied)" — Kafka's batch retention
    (DELETE / DELETE_EMPTY / RETAIN_EMPTY) said as what happened.

    :param batch: the batch's audit row.
    """
    span = f"batch {batch.base_offset}..{batch.last_offset}"
    if batch.written == "removed":
        why = (batch.reason.split(": ", 1)[1] if batch.retention is BatchRetention.DELETE and ": " in batch.reason
               else "no record of it survived")
        return f"{span} removed: {why}"
    words = f"{span} {_WRITTEN_WORDS.get(batch.written, batch.written)}"
    if batch.retention is BatchRetention.RETAIN_EMPTY:
        words += f" ({batch.reason.split(':', 1)[0]}: kept even if emptied)"
    return words


@dataclass
class GroupResult:
    base_offset: int
    source_base_offsets: List[int]
    bytes_before: int
    bytes_after: int
    aborted_txns: int
    counts: FilterCounts


@dataclass
class PartitionCleanResult:
    """What one partition's round did (or would do, in dry-run), with audit numbers and reasons."""

    path: Path
    topic: str
    partition: int
    offsets: Optional[CleanableOffsets] = None
    cleaned: bool = False
    dry_run: bool = False
    skipped_reason: Optional[str] = None
    error: Optional[str] = None
    map_size: int = 0
    map_stats: Optional[KeyMapStats] = None     # the compiled map's passes, keys, budget and bytes
    groups_committed: int = 0                 # groups swapped in (all of them when ``cleaned``)
    rolled_back: bool = False                 # a swap-in failed and was rolled back: nothing changed
    end_offset: Optional[int] = None          # the new cleaner checkpoint
    groups: List[GroupResult] = field(default_factory=list)
    counts: FilterCounts = field(default_factory=FilterCounts)
    batches: List[BatchAudit] = field(default_factory=list)
    record_reasons: Dict[int, RecordReason] = field(default_factory=dict)

    def audit(self) -> dict:
        """Flat numbers for a report row."""
        o = self.offsets
        return {"topic": self.topic, "partition": self.partition, "cleaned": self.cleaned, "dry_run": self.dry_run,
                "skipped_reason": self.skipped_reason, "error": self.error,
                "first_dirty_offset": o.first_dirty_offset if o else None,
                "upper_bound_offset": o.upper_bound_offset if o else None,
                "cleanable_ratio": o.cleanable_ratio if o else None, "map_size": self.map_size,
                "end_offset": self.end_offset, "groups": len(self.groups), **self.counts.as_dict()}

    @property
    def outcome(self) -> str:
        """done / not needed / failed / rolled back (a dry run: "dry run")."""
        if self.error is not None:
            return OUTCOME_ROLLED_BACK if self.rolled_back else OUTCOME_FAILED
        if self.skipped_reason is not None or not (self.cleaned or self.dry_run) or self.offsets is None:
            return OUTCOME_NOT_NEEDED
        return OUTCOME_DRY_RUN if self.dry_run else OUTCOME_DONE

    def committed_counts(self) -> FilterCounts:
        """The counts of what was swapped in (a dry run: of what would be)."""
        if self.cleaned or (self.dry_run and self.error is None):
            return self.counts
        out = FilterCounts()
        for g in self.groups[:self.groups_committed]:
            out.add(g.counts)
        return out

    def committed_bytes_removed(self) -> int:
        groups = self.groups if (self.cleaned or self.dry_run) else self.groups[:self.groups_committed]
        return sum(g.bytes_before - g.bytes_after for g in groups)

    def explain(self, offset: int) -> str:
        """Why the record at ``offset`` was kept or removed (or not looked at) in this round."""
        if self.error is not None:
            return f"offset {offset}: partition not cleaned ({self.error})"
        if self.skipped_reason is not None or self.offsets is None:
            return f"offset {offset}: partition not cleaned ({self.skipped_reason})"
        for b in self.batches:
            if b.base_offset <= offset <= b.last_offset:
                why = self.record_reasons.get(offset)
                rec = why.value if why is not None else "no record at this offset (compacted away earlier)"
                return f"offset {offset}: {rec}; {batch_words(b)}"
        if self.end_offset is not None and offset >= self.end_offset:
            return (f"offset {offset}: not cleaned this round: at or past the first uncleanable offset "
                    f"{self.end_offset} (active segment, high watermark, open transaction or min.compaction.lag.ms)")
        return f"offset {offset}: no batch of the recopied segments holds it (before the log start or in a gap)"
