"""Many ListOffsets / offset lookups at once: query rows (Arrow) in, one answer row per query (Arrow) out.

The lookup job's executors and the local bench run this same code. Queries are strings as read from
CSV, JSON lines or Delta (``QUERY_SCHEMA``): a row with an offset is an offset lookup (the batch a
fetch from there starts at), otherwise a timestamp lookup (``--time``'s syntax, ``lookup.time_spec``).
Each partition is opened once (one :class:`PartitionLog` per partition) and closed at the end.
A bad row is answered with ``why = "bad_query"``, an unknown partition with ``"unknown_partition"``,
an unreadable one with ``"error"``: never an exception.
"""
from __future__ import annotations

from typing import Iterable, Optional, Tuple, Union

import pyarrow as pa

from kafkalog.errors import KafkalogError, OffsetOutOfRangeError
from kafkalog.lookup.partition_log import PartitionLog
from kafkalog.lookup.time_spec import parse_time_spec

QUERY_SCHEMA = pa.schema([(c, pa.string()) for c in ("topic", "partition", "timestamp", "offset", "id")])

RESULT_SCHEMA = pa.schema([
    pa.field("id", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("query", pa.string()),                  # timestamp / offset
    pa.field("query_timestamp", pa.int64()),
    pa.field("query_offset", pa.int64()),
    pa.field("found", pa.bool_()),
    pa.field("why", pa.string()),                    # partition_log's why-codes, unknown_partition, bad_query, error
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.int64()),
    pa.field("leader_epoch", pa.int32()),
    pa.field("segment", pa.int64()),
    pa.field("position", pa.int64()),                # offset lookups: the batch's byte position in the segment
    pa.field("batch_base_offset", pa.int64()),
    pa.field("batch_last_offset", pa.int64()),
    pa.field("partition_dir", pa.string()),
    pa.field("message", pa.string()),
])

# why-codes of answers that count as failed in the job's report
FAILED_WHYS = ("bad_query", "unknown_partition", "error")

#: (topic, partition) -> (log dir, partition folder), or None when the partition is in two log dirs
FolderMap = dict


def live_partition_folders(found: Iterable[Tuple[Tuple[str, int], Tuple[str, str]]]) -> FolderMap:
    """The folder map of ``((topic, partition), (log dir, folder))`` pairs of live partitions; a
    partition found twice (in two log dirs) maps to None: a broker refuses to start like that."""
    folders: FolderMap = {}
    for key, value in found:
        folders[key] = None if key in folders else value
    return folders


def answer_queries(queries: Union[pa.Table, pa.RecordBatch], folders: FolderMap, *, isolation: str,
                   dry_run: bool = False) -> pa.Table:
    """One RESULT_SCHEMA row per query row (columns of QUERY_SCHEMA; missing ones count as null), in order."""
    rows = queries.to_pylist()
    return pa.Table.from_pylist(_answers(rows, folders, isolation=isolation, dry_run=dry_run), schema=RESULT_SCHEMA)


def _parse_query(q: dict, result: dict) -> None:
    """Fill the query fields of ``result``; ValueError/TypeError for a bad row."""
    partition = int(str(q.get("partition")).strip())
    result["partition"] = partition
    if q.get("offset") not in (None, ""):
        result.update(query="offset", query_offset=int(str(q["offset"]).strip()))
    elif q.get("timestamp") not in (None, ""):
        result.update(query="timestamp", query_timestamp=parse_time_spec(str(q["timestamp"])))
    else:
        raise ValueError("neither timestamp nor offset given")


def _answer(log: PartitionLog, result: dict, isolation: str) -> None:
    if result["query"] == "offset":
        pos = log.translate_offset(result["query_offset"], isolation=isolation)
        if pos is None:
            result.update(why="at_end", offset=result["query_offset"])
        else:
            result.update(found=True, why="found", offset=result["query_offset"], segment=pos.segment,
                          position=pos.position, batch_base_offset=pos.base_offset, batch_last_offset=pos.last_offset)
    else:
        r = log.lookup(result["query_timestamp"], isolation=isolation)
        result.update(found=r.found, why=r.why, offset=r.offset, timestamp=r.timestamp, leader_epoch=r.leader_epoch,
                      segment=r.segment, message="; ".join(r.notes) or None)


def _answers(rows: list, folders: FolderMap, *, isolation: str, dry_run: bool) -> list:
    logs: dict = {}
    out = []
    try:
        for q in rows:
            result = dict(id=q.get("id"), topic=q.get("topic"), partition=None, query=None, found=False)
            out.append(result)
            try:
                _parse_query(q, result)
            except (ValueError, TypeError) as exc:
                result.update(why="bad_query", message=str(exc))
                continue
            key = (result["topic"], result["partition"])
            where: Optional[Tuple[str, str]] = folders.get(key)
            if where is None:
                result.update(why="unknown_partition", message=(
                    f"{key[0]}-{key[1]} is in more than one log dir" if key in folders else
                    f"no live folder {key[0]}-{key[1]} in the log dirs"))
                continue
            result["partition_dir"] = where[1]
            if dry_run:
                result.update(why="dry_run")
                continue
            try:
                log = logs.get(key)
                if log is None:
                    log = logs[key] = PartitionLog(where[1], log_dir=where[0])
                _answer(log, result, isolation)
            except OffsetOutOfRangeError as exc:
                result.update(why="out_of_range", message=str(exc))
            except (KafkalogError, OSError) as exc:
                result.update(why="error", message=str(exc))
    finally:
        for log in logs.values():
            log.close()
    return out
