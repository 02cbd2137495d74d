"""The I/O edge of the coordinator logs: typed rows of every ``__consumer_offsets`` /
``__transaction_state`` partition in some log dirs, the partitions' ends, and the lag report that
:mod:`kafkalog.coordinator.lag` computes from them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import pyarrow as pa

from kafkalog.errors import KafkalogError
from kafkalog.log.logdir import PartitionDir, scan_log_dirs
from kafkalog.fs.names import LIVE
from kafkalog.lookup.partition_log import PartitionLog
from kafkalog.log.records_io import read_segment
from kafkalog.coordinator import lag
from kafkalog.coordinator.group.rows import GROUP_ROW_SCHEMA, group_rows

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass
class LagReport:
    rows: List[dict]
    loaded: lag.LoadedOffsets
    coordinator_partitions: List[str]
    errors: List[str] = field(default_factory=list)

    def summary(self) -> dict:
        by_status: Dict[str, int] = {}
        for r in self.rows:
            by_status[r["status"]] = by_status.get(r["status"], 0) + 1
        known = [r["lag"] for r in self.rows if r["lag"] is not None]
        return {"groups": len({r["group"] for r in self.rows}), "partitions": len(self.rows),
                "by_status": by_status, "total_lag": sum(known),
                "expired": sum(1 for r in self.rows if r["expired"]),
                "coordinator_partitions": len(self.coordinator_partitions),
                "coordinator_records": self.loaded.records,
                "undecodable_records": self.loaded.undecodable,
                "pending_transactional_commits": self.loaded.pending_transactional,
                "errors": len(self.errors)}


def live_partitions(log_dirs: Sequence, topic: Optional[str] = None) -> List[PartitionDir]:
    """Every live partition folder of the log dirs (of ``topic`` when given), in log-dir order."""
    out: List[PartitionDir] = []
    for ld in scan_log_dirs(log_dirs):
        out.extend(p for p in ld.partitions if p.kind == LIVE and (topic is None or p.topic == topic))
    return out


def leading_replicas(partitions: Sequence[PartitionDir]) -> List[PartitionDir]:
    """One folder per (topic, partition): where a partition is in several log dirs (replicas from
    several brokers), the one with the highest log end offset, as the leader's would be."""
    best: Dict[tuple, tuple] = {}
    for pdir in partitions:
        try:
            with PartitionLog(pdir.path, log_dir=pdir.log_dir) as log:
                end = log.log_end_offset
        except (KafkalogError, OSError):
            end = -1          # unreadable: kept only when it is the only replica (its error is reported)
        key = (pdir.topic, pdir.partition)
        if key not in best or end > best[key][0]:
            best[key] = (end, pdir)
    return [pdir for _, pdir in best.values()]


def coordinator_rows(pdir: PartitionDir, to_rows=group_rows, schema: pa.Schema = GROUP_ROW_SCHEMA) -> pa.Table:
    """Typed rows of one coordinator partition folder, segment by segment in offset order."""
    tables = [to_rows(read_segment(s.log, topic=pdir.topic, partition=pdir.partition)) for s in pdir.segments]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def partition_end(path, log_dir) -> lag.PartitionEnd:
    with PartitionLog(path, log_dir=log_dir) as log:
        checkpointed = log.checkpointed_high_watermark is not None
        hw = log.high_watermark if checkpointed else log.log_end_offset
        return lag.PartitionEnd(log.log_start_offset, log.log_end_offset, hw,
                                lag.HW_CHECKPOINT if checkpointed else lag.HW_LOG_END)


def merge_end(old: Optional[lag.PartitionEnd], new: lag.PartitionEnd) -> lag.PartitionEnd:
    """Two replicas of one partition: the one with the higher high watermark (then log end) wins."""
    if old is None:
        return new
    best = max(old, new, key=lambda e: (e.high_watermark, e.log_end_offset))
    return lag.PartitionEnd(best.log_start_offset, best.log_end_offset, best.high_watermark,
                            best.high_watermark_source, old.replicas + new.replicas)


def consumer_lag(log_dirs: Sequence, *, groups: Sequence[str] = (), patterns: Sequence[str] = (), now_ms: int,
                 retention_ms: int = lag.DEFAULT_OFFSETS_RETENTION_MS) -> LagReport:
    """The lag report for the groups (all when none given) of the log dirs' __consumer_offsets;
    a partition that cannot be read is an error in the report, the rest goes on."""
    include = lag.group_matcher(groups, patterns)
    errors: List[str] = []
    rows: List[dict] = []
    names = []
    for pdir in leading_replicas(live_partitions(log_dirs, CONSUMER_OFFSETS_TOPIC)):
        names.append(str(pdir.path))
        try:
            rows.extend(coordinator_rows(pdir).to_pylist())
        except (KafkalogError, OSError) as e:
            errors.append(f"{pdir.path}: {e}")
    loaded = lag.load_committed_offsets(rows, include_group=include)
    wanted = {(c.topic, c.partition) for c in loaded.offsets.values()}
    ends: dict = {}
    for pdir in live_partitions(log_dirs):
        if (pdir.topic, pdir.partition) in wanted:
            try:
                ends[(pdir.topic, pdir.partition)] = merge_end(ends.get((pdir.topic, pdir.partition)),
                                                               partition_end(pdir.path, pdir.log_dir))
            except (KafkalogError, OSError) as e:
                errors.append(f"{pdir.path}: {e}")
    return LagReport(lag.lag_rows(loaded, ends, now_ms=now_ms, retention_ms=retention_ms), loaded, names, errors)
