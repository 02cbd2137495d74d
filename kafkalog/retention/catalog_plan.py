"""Retention planned from a segment catalog (``kafkalog.catalog.CATALOG_SCHEMA`` rows) instead of from the
log dirs: what-if plans over a catalog table, the bulk planner and the Spark job's grouped planner all
call :func:`plan_partition_table` — ``kafkalog.retention.policy.plan_retention`` per partition.

Only live partitions' segment rows are planned (not the KRaft metadata log, which a broker never
retains); leftover and error rows are ignored.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.config import KafkaConfigs
from kafkalog.fs.names import KRAFT_METADATA_TOPIC
from kafkalog.log.local_log import HW_MISSING_ZERO, high_watermark
from kafkalog.log.segment import SegmentInfo
from kafkalog.retention.policy import LogState, plan_retention

PLAN_SCHEMA = pa.schema([
    pa.field("log_dir", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("base_offset", pa.int64()),
    pa.field("size", pa.int64()),
    pa.field("largest_timestamp_ms", pa.int64()),
    pa.field("decision", pa.string()),
    pa.field("rule", pa.string()),
    pa.field("reason", pa.string()),
    pa.field("log_start_offset", pa.int64()),
    pa.field("new_log_start_offset", pa.int64()),
    pa.field("high_watermark", pa.int64()),
    pa.field("roll_at", pa.int64()),
])

_NEEDED = ("log_dir", "topic", "partition", "base_offset", "size", "largest_timestamp_ms", "log_start_offset",
           "log_end_offset", "high_watermark_checkpoint")


def live_segments(table: pa.Table) -> pa.Table:
    """The segment rows of live partitions, sorted by (log dir, topic, partition, base offset)."""
    mask = pc.and_(pc.and_(pc.equal(table["kind"], "segment"), pc.equal(table["partition_kind"], "live")),
                   pc.not_equal(table["topic"], KRAFT_METADATA_TOPIC))
    return table.filter(mask).select(list(_NEEDED)).sort_by(
        [("log_dir", "ascending"), ("topic", "ascending"), ("partition", "ascending"), ("base_offset", "ascending")])


def plan_partition_table(rows: pa.Table, configs: KafkaConfigs, now_ms: int, *,
                         hw_missing: str = HW_MISSING_ZERO) -> pa.Table:
    """Plan ONE partition from its catalog rows (segment rows of one log dir/topic/partition, any order)."""
    rows = rows.sort_by([("base_offset", "ascending")])
    cols = {name: rows[name].to_pylist() for name in _NEEDED}
    out = _Columns()
    if rows.num_rows:
        _plan_rows(cols, 0, rows.num_rows, configs, now_ms, hw_missing, out)
    return out.table()


def plan_catalog_table(table: pa.Table, configs: KafkaConfigs, now_ms: int, *,
                       hw_missing: str = HW_MISSING_ZERO) -> pa.Table:
    """Plan every live partition of a catalog table in this process. Output is built column by column
    (no per-row objects survive), so the time grows linearly with the catalog."""
    rows = live_segments(table)
    cols = {name: rows[name].to_pylist() for name in _NEEDED}
    n = rows.num_rows
    out = _Columns()
    if n == 0:
        return out.table()
    keys = pc.binary_join_element_wise(rows["log_dir"].fill_null(""), rows["topic"],
                                       pc.cast(rows["partition"], pa.string()), "\x00").to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], n]
    for start, end in zip(starts.tolist(), ends.tolist()):
        _plan_rows(cols, start, end, configs, now_ms, hw_missing, out)
    return out.table()


class _Columns:
    """PLAN_SCHEMA columns as growing lists."""

    def __init__(self) -> None:
        self.data: dict[str, list] = {f.name: [] for f in PLAN_SCHEMA}

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self.data, schema=PLAN_SCHEMA)


def _plan_rows(cols: dict, start: int, end: int, configs: KafkaConfigs, now_ms: int,
               hw_missing: str, out: _Columns) -> None:
    topic = cols["topic"][start]
    config = configs.for_topic(topic)
    log_start, log_end = cols["log_start_offset"][start], cols["log_end_offset"][start]
    hw = high_watermark(cols["high_watermark_checkpoint"][start], log_start_offset=log_start, log_end_offset=log_end,
                        missing=hw_missing)
    stamps = cols["largest_timestamp_ms"][start:end]
    segments = tuple(map(SegmentInfo, cols["base_offset"][start:end], cols["size"][start:end], stamps))
    plan = plan_retention(LogState(segments, log_start, log_end, hw), config, now_ms,
                          cleaner_enabled=configs.broker.cleaner_enable)
    n = end - start
    d = out.data
    for name, value in (("log_dir", cols["log_dir"][start]), ("topic", topic), ("partition", cols["partition"][start]),
                        ("log_start_offset", log_start), ("new_log_start_offset", plan.new_log_start_offset),
                        ("high_watermark", hw), ("roll_at", plan.roll_at)):
        d[name].extend([value] * n)
    d["largest_timestamp_ms"].extend(stamps)
    for decision in plan.decisions:
        d["base_offset"].append(decision.base_offset)
        d["size"].append(decision.size)
        d["decision"].append(decision.decision)
        d["rule"].append(decision.rule)
        d["reason"].append(decision.reason)
