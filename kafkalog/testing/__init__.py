"""Helpers for users' pytest tests of pipelines over Kafka log dirs, without Spark: build a log dir from a few
Python rows, an Arrow table or a DataFrame; read its records back as Arrow; assert two log dirs equal with a
readable diff. The Spark side (the ``kafkalog_spark`` session fixture, ``read_log_dir`` and the chispa
``assert_records_equal``) is in ``udfs.testing`` (``pytest_plugins = ["udfs.testing"]`` in a conftest.py):
this package is below the Spark glue and never imports it.

    from kafkalog.testing import build_log_dir, assert_log_dirs_equal
    from udfs.testing import read_log_dir

    def test_my_filter(kafkalog_spark, tmp_path):
        src = build_log_dir(tmp_path / "in", [
            {"topic": "orders", "key": b"a", "value": b"1"},
            {"topic": "orders", "key": b"a", "value": None},                     # a tombstone
            {"topic": "orders", "partition": 1, "value": b"x", "producer_id": 7, "transactional": True},
            {"topic": "orders", "partition": 1, "control": "commit", "producer_id": 7},
        ], codec="zstd")
        df = read_log_dir(kafkalog_spark, src).where("value IS NOT NULL")
        assert df.count() == 2

A row is a dict: ``topic`` (required), ``partition`` (0), ``offset`` (default: the partition's next),
``key`` / ``value`` (bytes or str; value None = tombstone), ``timestamp`` (epoch ms or an aware datetime;
default ``BASE_TIMESTAMP_MS`` + offset), ``headers`` ([(key, value)]), ``producer_id`` /
``producer_epoch`` / ``transactional`` for idempotent and transactional data, and ``control``:
``"commit"`` / ``"abort"`` for a transaction marker of ``producer_id``.
"""
from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import List, Mapping, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.format.control_record import ABORT, COMMIT, control_key, end_txn_marker_value, parse_control_type
from kafkalog.format.record_batch import NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from kafkalog.log.roll import RollConfig
from kafkalog.log.writer import write_log_dir
from kafkalog.log.logdir import scan_log_dir
from kafkalog.fs.names import LIVE
from kafkalog.log.records_io import read_segment

BASE_TIMESTAMP_MS = 1_700_000_000_000
RECORDS_PER_BATCH = 10               # rows of a partition grouped into batches of at most this many
CONTROL_TYPES = {"commit": COMMIT, "abort": ABORT}
COMPARED = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")
DIFF_ROWS = 20                        # differing rows shown per partition

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
RECORDS_SCHEMA = pa.schema([
    ("offset", pa.int64()), ("key", pa.binary()), ("value", pa.binary()), ("timestamp", pa.int64()),
    ("headers", HEADERS_TYPE), ("baseOffset", pa.int64()), ("lastOffset", pa.int64()),
    ("batchPosition", pa.int64()), ("producerId", pa.int64()), ("producerEpoch", pa.int16()),
    ("baseSequence", pa.int32()), ("isTransactional", pa.bool_()), ("isControl", pa.bool_()),
    ("partitionLeaderEpoch", pa.int32()), ("timestampType", pa.int32()), ("codec", pa.int8()),
])

Records = Union[Sequence[Mapping], pa.Table, "object"]   # rows, an Arrow table, or a Spark DataFrame


# --- building -------------------------------------------------------------------------------------

def _bytes(value) -> Optional[bytes]:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _ms(value, offset: int) -> int:
    if value is None:
        return BASE_TIMESTAMP_MS + offset
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise ValueError(f"timestamp {value} has no time zone; give an aware datetime or epoch ms")
        return int(value.timestamp() * 1000)
    return int(value)


def _from_columns(row: dict) -> dict:
    """A row of the data source's schema (batch columns included or not) in this module's row terms."""
    if row.get("producerId") is not None and "producer_id" not in row:
        if row["producerId"] >= 0:
            row.update(producer_id=row["producerId"], producer_epoch=row.get("producerEpoch"),
                       transactional=bool(row.get("isTransactional")))
    if row.get("isControl") and "control" not in row:
        kind = parse_control_type(row.get("key"))
        row["control"] = next(name for name, k in CONTROL_TYPES.items() if k == kind)
    return row


def _as_rows(records: Records) -> List[dict]:
    if isinstance(records, pa.Table):
        return [_from_columns(r) for r in records.to_pylist()]
    if hasattr(records, "toArrow"):                  # a Spark DataFrame
        return [_from_columns(r) for r in records.toArrow().to_pylist()]
    return [dict(r) for r in records]  # type: ignore[union-attr]  # rows: mappings


def _batch_key(row: dict) -> tuple:
    return (row.get("producer_id", NO_PRODUCER_ID), bool(row.get("transactional", False)), row.get("control"))


def partition_table(rows: Sequence[dict], *, records_per_batch: int = RECORDS_PER_BATCH) -> pa.Table:
    """One partition's rows (offsets assigned where missing) as the Arrow records ``log_writer`` writes:
    consecutive rows of the same producer / transactional / control kind share a batch."""
    out: List[dict] = []
    next_offset = 0
    batch: List[dict] = []

    def flush():
        if not batch:
            return
        pid, txn, control = _batch_key(batch[0])
        for r in batch:
            r.update(baseOffset=batch[0]["offset"], lastOffset=batch[-1]["offset"], batchPosition=batch[0]["offset"],
                     producerId=pid, producerEpoch=batch[0].get("producer_epoch", 0 if pid >= 0 else NO_PRODUCER_EPOCH),
                     baseSequence=NO_SEQUENCE, isTransactional=txn or control is not None,
                     isControl=control is not None, partitionLeaderEpoch=NO_PARTITION_LEADER_EPOCH, timestampType=0,
                     codec=0)
            out.append(r)
        batch.clear()

    for row in rows:
        offset = int(row["offset"]) if row.get("offset") is not None else next_offset
        if offset < next_offset:
            raise ValueError(f"offset {offset} of {row.get('topic')}-{row.get('partition', 0)} is not above the "
                             f"previous one ({next_offset - 1})")
        control = row.get("control")
        if control is not None:
            if control not in CONTROL_TYPES or row.get("producer_id") is None:
                raise ValueError(f"a control row needs control='commit' or 'abort' and a producer_id: {row}")
            key, value = control_key(CONTROL_TYPES[control]), end_txn_marker_value(0)
            headers = []
        else:
            key, value = _bytes(row.get("key")), _bytes(row.get("value"))
            headers = [{"key": str(h["key"]), "value": _bytes(h["value"])} if isinstance(h, Mapping)
                       else {"key": str(h[0]), "value": _bytes(h[1])} for h in (row.get("headers") or [])]
        rec = dict(offset=offset, key=key, value=value, timestamp=_ms(row.get("timestamp"), offset), headers=headers,
                   producer_id=row.get("producer_id", NO_PRODUCER_ID), transactional=row.get("transactional", False),
                   control=control, producer_epoch=row.get("producer_epoch"))
        if batch and (_batch_key(rec) != _batch_key(batch[-1]) or len(batch) >= records_per_batch
                      or offset != batch[-1]["offset"] + 1 or control is not None):
            flush()
        batch.append(rec)
        if control is not None:
            flush()
        next_offset = offset + 1
    flush()
    for r in out:
        for k in ("producer_id", "transactional", "control", "producer_epoch"):
            r.pop(k, None)
        if r["producerEpoch"] is None:
            r["producerEpoch"] = 0
    return pa.Table.from_pylist(out, schema=RECORDS_SCHEMA)


def build_log_dir(path: Union[str, os.PathLike], records: Records, *, codec: Optional[str] = None,
                  segment_bytes: Optional[int] = None, roll: Optional[RollConfig] = None,
                  records_per_batch: int = RECORDS_PER_BATCH, node_id: int = 1) -> Path:
    """A new log dir at ``path`` holding ``records`` (rows, an Arrow table or a DataFrame with at least
    ``topic``; see the module docstring), with segments, indexes, checkpoints and meta.properties as
    ``kafkalog.log.writer`` writes them. ``codec``: none / gzip / snappy / lz4 / zstd."""
    rows = _as_rows(records)
    by_partition: dict = {}
    for row in rows:
        if not row.get("topic"):
            raise ValueError(f"every row needs a topic: {row}")
        by_partition.setdefault((row["topic"], int(row.get("partition") or 0)), []).append(row)
    if roll is None:
        roll = RollConfig(segment_bytes=segment_bytes) if segment_bytes else RollConfig()
    parts = [(t, p, partition_table(rs, records_per_batch=records_per_batch)) for (t, p), rs in sorted(by_partition.items())]
    write_log_dir(path, parts, compression=codec, roll=roll, node_id=node_id)
    return Path(path)


# --- reading ----------------------------------------------------------------------------------------

def records_of(path: Union[str, os.PathLike], *, include_control: bool = False) -> pa.Table:
    """Every record of a log dir's live partitions as one Arrow table (``kafkalog.read_segment`` columns,
    with ``topic`` and ``partition``), in topic, partition, offset order; no Spark."""
    tables = []
    for pdir in scan_log_dir(path).partitions:
        if pdir.kind != LIVE:
            continue
        for seg in pdir.segments:
            t = read_segment(seg.log, topic=pdir.topic, partition=pdir.partition)
            if not include_control:
                t = t.filter(pc.invert(t.column("isControl")))
            tables.append(t)
    if not tables:
        return pa.Table.from_pylist([], schema=RECORDS_SCHEMA.append(pa.field("topic", pa.string()))
                                    .append(pa.field("partition", pa.int32())))
    table = pa.concat_tables(tables)
    return table.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])


# --- asserting ----------------------------------------------------------------------------------------

def _comparable(table: pa.Table, columns: Sequence[str]) -> List[tuple]:
    rows = []
    for r in table.select(list(columns)).to_pylist():
        if "headers" in r:
            r["headers"] = [(h["key"], h["value"]) for h in r["headers"] or []]
        if "timestamp" in r and isinstance(r["timestamp"], _dt.datetime):
            r["timestamp"] = int(r["timestamp"].timestamp() * 1000)
        rows.append(tuple(r[c] for c in columns))
    return rows


def diff_records(expected: pa.Table, actual: pa.Table, columns: Sequence[str] = COMPARED) -> List[str]:
    """Readable lines naming every difference per topic-partition (empty: equal)."""
    exp, act = _comparable(expected, columns), _comparable(actual, columns)
    i_t, i_p, i_o = columns.index("topic"), columns.index("partition"), columns.index("offset")

    def by_partition(rows):
        out: dict = {}
        for r in rows:
            out.setdefault((r[i_t], r[i_p]), {})[r[i_o]] = r
        return out

    e, a = by_partition(exp), by_partition(act)
    lines: List[str] = []
    for tp in sorted(set(e) | set(a)):
        name = f"{tp[0]}-{tp[1]}"
        if tp not in a:
            lines.append(f"{name}: missing ({len(e[tp])} records expected)")
            continue
        if tp not in e:
            lines.append(f"{name}: unexpected partition ({len(a[tp])} records)")
            continue
        shown = 0
        for off in sorted(set(e[tp]) | set(a[tp])):
            x, y = e[tp].get(off), a[tp].get(off)
            if x == y:
                continue
            shown += 1
            if shown > DIFF_ROWS:
                lines.append(f"{name}: ... more differences")
                break
            if y is None:
                lines.append(f"{name} offset {off}: missing; expected {dict(zip(columns, x))}")
            elif x is None:
                lines.append(f"{name} offset {off}: unexpected {dict(zip(columns, y))}")
            else:
                fields = [f"{c}: expected {xv!r}, got {yv!r}" for c, xv, yv in zip(columns, x, y) if xv != yv]
                lines.append(f"{name} offset {off}: " + "; ".join(fields))
    return lines


def assert_log_dirs_equal(expected: Union[str, os.PathLike], actual: Union[str, os.PathLike], *,
                          columns: Sequence[str] = COMPARED, include_control: bool = False) -> None:
    """The records of two log dirs are equal (per topic-partition and offset, over ``columns``); else an
    AssertionError listing the differences. Segment layout and codecs are not compared."""
    lines = diff_records(records_of(expected, include_control=include_control),
                         records_of(actual, include_control=include_control), columns)
    if lines:
        raise AssertionError(f"log dirs {expected} and {actual} differ:\n  " + "\n  ".join(lines))


__all__: Tuple[str, ...] = ("BASE_TIMESTAMP_MS", "assert_log_dirs_equal", "build_log_dir", "diff_records",
                            "partition_table", "records_of")

