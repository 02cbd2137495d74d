"""``spark.read.format("kafkalog")``: Kafka records from log dirs as a Spark data source, with the schema
and options of Spark's Kafka source (Python Data Source API, ``pyspark.sql.datasource``).

    spark.read.format("kafkalog").option("subscribe", "orders").load("/data/k1,/data/k2")

Sessions built by ``udfs.session.build_session`` have it registered and Python filter pushdown on; a
session of one's own needs ``udfs.kafkalog_source.register(spark)`` (the same two things).

This module is Spark plumbing only: options are parsed by ``kafkalog.source.options``, the scan is
planned by ``kafkalog.source.scan_plan`` (partitions, offset ranges, pruning, byte-sized input partitions), and a
task streams its byte ranges with ``kafkalog.log.records_io.SegmentReader``, keeping the wanted rows with Arrow
compute (no Python object per record) and yielding Arrow record batches already in the types Spark's
Arrow reader expects (``binary``, ``timestamp[us, UTC]``, nullable fields), so nothing is converted on the
way into the JVM.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
from typing import Iterator, List, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualNullSafe, EqualTo, GreaterThan,
                                    GreaterThanOrEqual, In, InputPartition, LessThan, LessThanOrEqual)
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, IntegerType, LongType, ShortType,
                               StringType, StructField, StructType, TimestampType)

from kafkalog.source.options import SourceOptions, parse_source_options
from kafkalog.source.scan_plan import Predicate, ScanTask, bounds_from_predicates, plan_scan
from kafkalog.log.records_io import ReadOptions, SegmentReader

SOURCE_NAME = "kafkalog"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
# Bytes of .log a task decodes into one Arrow batch, and decode threads per task (Spark already runs a
# task per core). KAFKALOG_SOURCE_WINDOW_BYTES / KAFKALOG_SOURCE_THREADS override them (benchmarks).
TASK_WINDOW_BYTES = int(os.environ.get("KAFKALOG_SOURCE_WINDOW_BYTES", 8 << 20))
TASK_DECODE_THREADS = int(os.environ.get("KAFKALOG_SOURCE_THREADS", 1))

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_OPS = {EqualTo: "=", EqualNullSafe: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
        LessThanOrEqual: "<=", In: "in"}

# Spark's Kafka source schema (KafkaRecordToRowConverter), every field nullable as there.
HEADERS_SPARK_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
KAFKA_FIELDS = [
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
]
HEADERS_FIELD = StructField("headers", HEADERS_SPARK_TYPE)
# Ours: the batch-level columns of kafkalog.read_segment (includeBatchColumns=true).
BATCH_FIELDS = [
    StructField("baseOffset", LongType()), StructField("lastOffset", LongType()),
    StructField("batchPosition", LongType()), StructField("magic", ByteType()), StructField("codec", ByteType()),
    StructField("producerId", LongType()), StructField("producerEpoch", ShortType()),
    StructField("baseSequence", IntegerType()), StructField("isTransactional", BooleanType()),
    StructField("isControl", BooleanType()), StructField("partitionLeaderEpoch", IntegerType()),
    StructField("deleteHorizonMs", LongType()),
]


def source_schema(options: SourceOptions) -> StructType:
    fields = list(KAFKA_FIELDS)
    if options.include_headers:
        fields.append(HEADERS_FIELD)
    if options.include_batch_columns:
        fields.extend(BATCH_FIELDS)
    return StructType(fields)


def register(spark) -> None:
    """Make ``format("kafkalog")`` available in ``spark`` and turn Python filter pushdown on."""
    spark.dataSource.register(KafkalogDataSource)
    spark.conf.set(PUSHDOWN_CONF, "true")


# --- filters -> predicates -------------------------------------------------------------------------------

def _epoch_ms_floor(value: _dt.datetime) -> int:
    if value.tzinfo is None:     # TIMESTAMP_NTZ literal: read as UTC, the session time zone our conf sets
        value = value.replace(tzinfo=_dt.timezone.utc)
    delta = value - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros // 1000


def _plain(column: str, value):
    if column == "timestamp":
        return _epoch_ms_floor(value) if isinstance(value, _dt.datetime) else None
    return value


def to_predicate(f) -> Optional[Predicate]:
    """One of Spark's pushed filters as a planner predicate; None when the planner cannot use it.
    Timestamps become epoch ms rounded down: only lower bounds on timestamp prune, and rounding down
    keeps them safe."""
    op = _OPS.get(type(f))
    if op is None or len(f.attribute) != 1:
        return None
    column = f.attribute[0]
    if column not in ("topic", "partition", "offset", "timestamp"):
        return None
    if op == "in":
        values = tuple(_plain(column, v) for v in f.value)
        return None if any(v is None for v in values) else Predicate(column, op, values)
    value = _plain(column, f.value)
    return None if value is None else Predicate(column, op, value)


# --- reading ---------------------------------------------------------------------------------------------

class TaskPartition(InputPartition):
    def __init__(self, task: ScanTask):
        super().__init__(None)
        self.task = task


def _keep_mask(batch: pa.RecordBatch, lo: int, hi: int, aborted) -> Optional[pa.Array]:
    """Rows a consumer would get: offsets in [lo, hi), no control record, no aborted transaction's data
    (None: every row)."""
    offsets = batch.column("offset")
    n = batch.num_rows
    first, last = offsets[0].as_py(), offsets[n - 1].as_py()
    control = batch.column("isControl")
    has_control = pc.any(control).as_py()
    in_range = first >= lo and last < hi and first <= last
    if in_range and not has_control and not aborted:
        return None
    mask = pc.invert(control)
    if not in_range:
        mask = pc.and_(mask, pc.and_(pc.greater_equal(offsets, lo), pc.less(offsets, hi)))
    if aborted:
        pid = batch.column("producerId").to_numpy()
        txn = batch.column("isTransactional").to_numpy(zero_copy_only=False)
        base = batch.column("baseOffset").to_numpy()
        drop = np.zeros(n, np.bool_)
        for a in aborted:
            drop |= (pid == a.producer_id) & txn & (base >= a.first_offset) & (base <= a.last_offset)
        if drop.any():
            mask = pc.and_(mask, pa.array(~drop))
    return mask


def shape(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """A decoded batch as Spark's Arrow reader takes it: the target's columns, types and nullability."""
    arrays = []
    for f in target:
        col = batch.column(f.name)
        if col.type != f.type:
            col = col.cast(f.type)
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def read_task(task: ScanTask, target: pa.Schema, *, metrics_dir: Optional[str] = None,
              window_bytes: int = TASK_WINDOW_BYTES, threads: int = TASK_DECODE_THREADS) -> Iterator[pa.RecordBatch]:
    """Stream one input partition's pieces as Arrow record batches of ``target``; with ``metrics_dir``,
    write the bytes of .log this task read there when done."""
    options = ReadOptions(window_bytes=window_bytes, threads=threads)
    read_bytes = rows = 0
    for piece in task.pieces:
        reader = SegmentReader(piece.log, options, topic=piece.topic, partition=piece.partition,
                               start=piece.start, end=piece.end)
        for batch in reader:
            if batch.num_rows == 0:
                continue
            if batch.column("offset")[0].as_py() >= piece.offset_hi:
                break
            mask = _keep_mask(batch, piece.offset_lo, piece.offset_hi, piece.aborted)
            if mask is not None:
                batch = batch.filter(mask)
                if batch.num_rows == 0:
                    continue
            rows += batch.num_rows
            yield shape(batch, target)
        read_bytes += reader.valid_bytes - piece.start
    if metrics_dir:
        os.makedirs(metrics_dir, exist_ok=True)
        with open(os.path.join(metrics_dir, f"task-{uuid.uuid4().hex}.json"), "w") as out:
            json.dump({"bytes_read": read_bytes, "rows": rows, "pieces": len(task.pieces)}, out)


class KafkalogReader(DataSourceReader):
    def __init__(self, options: SourceOptions, schema: StructType):
        from pyspark.sql.pandas.types import to_arrow_schema

        self.options = options
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.predicates: List[Predicate] = []

    def pushFilters(self, filters):
        """Use what prunes safely; hand every filter back so Spark re-applies it (rows are the same
        with pushdown on or off)."""
        for f in filters:
            pred = to_predicate(f) if self.options.pushdown else None
            if pred is not None:
                self.predicates.append(pred)
            yield f

    def partitions(self):
        tasks = plan_scan(self.options, bounds_from_predicates(self.predicates), parallelism=os.cpu_count() or 1)
        return [TaskPartition(t) for t in tasks] or [TaskPartition(ScanTask(()))]

    def read(self, partition: TaskPartition):
        return read_task(partition.task, self.arrow_schema, metrics_dir=self.options.metrics_dir)


class KafkalogDataSource(DataSource):
    """Records of Kafka log dirs; options as Spark's Kafka source (see kafkalog.source.options)."""

    def __init__(self, options):
        super().__init__(options)
        self.parsed = parse_source_options(dict(options))    # a bad option fails load(), before any task

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        return source_schema(self.parsed)

    def reader(self, schema: StructType) -> KafkalogReader:
        return KafkalogReader(self.parsed, schema)
