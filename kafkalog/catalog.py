"""The segment catalog: one Arrow row per segment of a partition folder, with what retention, compaction and
lookups decide on — sizes, offsets, the segment's largest timestamp by Kafka's rule
(``LogSegment.largestTimestamp``) and which rule gave it — plus the partition's log start offset, high
watermark checkpoint and log end offset, as :mod:`kafkalog.log.local_log` loads them (as Kafka's
``LogLoader`` does; its docstring states the rules; the largest timestamp is :mod:`kafkalog.log.segment`'s).
A copied log dir keeps Kafka's answer only if the copy kept the mtimes.

Rows of ``kind`` ``leftover`` list files a broker removes or completes at startup (``.deleted``,
``.cleaned``, ``.swap``, orphan index files); ``problems`` collects what was odd about the partition
(each naming the file and byte position), never raising for one partition.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

import pyarrow as pa

from kafkalog.errors import KafkalogError
from kafkalog.log.local_log import LocalLog
from kafkalog.fs.names import parse_segment_file_name
from kafkalog.fs import filesystem

SEGMENT, LEFTOVER, ERROR = "segment", "leftover", "error"

CATALOG_SCHEMA = pa.schema([
    pa.field("log_dir", pa.string()),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("partition_dir", pa.string(), nullable=False),
    pa.field("partition_kind", pa.string(), nullable=False),      # live / delete / future / stray
    pa.field("kind", pa.string(), nullable=False),                # segment / leftover / error
    pa.field("base_offset", pa.int64()),
    pa.field("next_base_offset", pa.int64()),                     # null for the active segment
    pa.field("size", pa.int64()),                                 # .log bytes (leftover: all its files)
    pa.field("largest_timestamp", pa.timestamp("ms", tz="UTC")),
    pa.field("largest_timestamp_ms", pa.int64()),
    pa.field("largest_timestamp_source", pa.string()),
    pa.field("log_mtime_ms", pa.int64()),
    pa.field("has_index", pa.bool_()),
    pa.field("has_timeindex", pa.bool_()),
    pa.field("has_txnindex", pa.bool_()),
    pa.field("has_snapshot", pa.bool_()),
    pa.field("is_active", pa.bool_()),
    pa.field("files", pa.list_(pa.string())),                     # file names of this row
    pa.field("log_start_offset", pa.int64()),
    pa.field("log_end_offset", pa.int64()),
    pa.field("high_watermark_checkpoint", pa.int64()),            # raw checkpoint value, null if absent
    pa.field("problems", pa.list_(pa.string())),                  # partition-level, on every row
])


# --- Arrow ---------------------------------------------------------------------------------------

def catalog_rows(state: LocalLog) -> list[dict]:
    """The catalog rows of one partition (segments, then leftovers grouped by base offset)."""
    common = dict(
        log_dir=None if state.log_dir is None else os.fspath(state.log_dir), topic=state.topic,
        partition=state.partition, partition_dir=os.fspath(state.path), partition_kind=state.kind,
        log_start_offset=state.log_start_offset, log_end_offset=state.log_end_offset,
        high_watermark_checkpoint=state.high_watermark_checkpoint, problems=list(state.problems))
    rows = []
    for seg in state.segments:
        files = seg.on_disk()
        rows.append(dict(
            common, kind=SEGMENT, base_offset=seg.base_offset, next_base_offset=seg.next_base_offset,
            size=seg.size, largest_timestamp=seg.largest_timestamp_ms, largest_timestamp_ms=seg.largest_timestamp_ms,
            largest_timestamp_source=seg.largest_timestamp_source, log_mtime_ms=seg.mtime_ms,
            has_index=files.index is not None, has_timeindex=files.timeindex is not None,
            has_txnindex=files.txnindex is not None, has_snapshot=files.snapshot is not None,
            is_active=seg.is_active,
            files=[p.name for p in (files.log, files.index, files.timeindex, files.txnindex, files.snapshot)
                   if p is not None]))
    groups: dict[Optional[int], list[Path]] = {}
    for path in state.leftovers:
        try:
            base: Optional[int] = parse_segment_file_name(path.name).base_offset
        except KafkalogError:
            base = None
        groups.setdefault(base, []).append(path)
    for base, paths in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        size = 0
        for p in paths:
            try:
                size += filesystem.stat(p).st_size
            except OSError:
                pass
        rows.append(dict(common, kind=LEFTOVER, base_offset=base, size=size, files=sorted(p.name for p in paths)))
    return rows


def catalog_table(states: Iterable[LocalLog]) -> pa.Table:
    """The catalog of many partitions as one Arrow table (CATALOG_SCHEMA)."""
    rows = [row for state in states for row in catalog_rows(state)]
    return pa.Table.from_pylist(rows, schema=CATALOG_SCHEMA)


def error_rows(*, log_dir: Optional[str], path: str, topic: str, partition: int, kind: str,
               problem: str) -> list[dict]:
    """The one catalog row (kind ``error``) of a partition that could not be loaded at all."""
    return [dict(log_dir=log_dir, topic=topic, partition=partition, partition_dir=path, partition_kind=kind,
                 kind=ERROR, files=[], problems=[problem])]
