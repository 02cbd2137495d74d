"""``spark.read.format("kafkalog")`` and ``spark.readStream.format("kafkalog")``: Kafka records from log
dirs as a Spark data source, with the schema and options of Spark's Kafka source (Python Data Source API,
``pyspark.sql.datasource``).

    spark.read.format("kafkalog").option("subscribe", "orders").load("/data/k1,/data/k2")
    spark.readStream.format("kafkalog").option("startingOffsets", "earliest").load("/data/k1")

The stream's offsets are Spark's Kafka checkpoint JSON, decided by ``kafkalog.source.stream_offsets``
(``maxOffsetsPerTrigger``, ``Trigger.AvailableNow``, new partitions, failOnDataLoss); a micro-batch's
ranges are read by the same tasks as a batch read.

With ``asOf`` / ``asOfOffsets`` a batch read is the topic as a table as of that moment (one row per live
key, ``kafkalog.source.as_of``): one task per partition fills the cleaner's key map below the cut and
yields the winning records (``read_as_of``).

Sessions built by ``udfs.session.build_session`` have it registered; a session of one's own needs
``udfs.kafkalog_source.register(spark)``.

**One plan per DataFrame, made at ``load()``.** PySpark 4.2 keeps a Python data source's planned read
(the pickled reader and its partitions) on the JVM's provider object, which every query of one DataFrame
(and every SQL query of a temp view on it) shares: a query that pushes filters replaces it
(``PythonScanBuilder.pushFilters`` → ``PythonDataSourceV2.setReadInfo``), and a query that pushes none —
no filter, or none Spark can hand to Python — reuses whatever is there (``getOrCreateReadInfo``). A read
shaped by one query's filters would therefore answer the next query of the same DataFrame. So nothing a
query pushes shapes the read: the reader does not take filters (Spark applies them all), and the batch
plan — partitions, offset ranges, byte ranges — is made once, when the data source is created at
``load()``, and pickled with it. Every query of a DataFrame then reads the same snapshot of the log dirs,
whichever planning path Spark takes; ``load()`` again to see files that changed since (as with Spark's
file sources, whose listing is kept per DataFrame). Narrow a read with the Kafka source's options
(``assign``, ``startingOffsets``/``endingOffsets``, ``startingTimestamp``…), which belong to the DataFrame.

This module is Spark plumbing only: options are parsed by ``kafkalog.source.options``, the scan is
planned by ``kafkalog.source.scan_plan`` (partitions, offset ranges, pruning, byte-sized input partitions), and a
task streams its byte ranges with ``kafkalog.log.records_io.SegmentReader``, keeping the wanted rows with Arrow
compute (no Python object per record) and yielding Arrow record batches already in the types Spark's
Arrow reader expects (``binary``, ``timestamp[us, UTC]``, nullable fields), so nothing is converted on the
way into the JVM.
"""
from __future__ import annotations

import json
import os
import uuid
from typing import Iterator, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, IntegerType, LongType, ShortType,
                               StringType, StructField, StructType, TimestampType)

from kafkalog.source.as_of import AsOfPartition, plan_as_of
from kafkalog.source.as_of_table import partition_rows
from kafkalog.source.options import SourceOptionError, SourceOptions, parse_source_options
from kafkalog.errors import KafkalogError
from kafkalog.source.scan_plan import (Bounds, PartitionRange, ScanTask, aborted_in, check_listing, check_range,
                                       list_partitions, load_partition_facts, pack, plan_pieces, plan_scan,
                                       read_committed_view, resolve_spec, target_bytes)
from kafkalog.source.stream_offsets import cap, from_json_offsets, plan_ranges, rate_limit, to_json_offsets
from kafkalog.log.records_io import ReadOptions, SegmentReader

SOURCE_NAME = "kafkalog"
# Bytes of .log a task decodes into one Arrow batch, and decode threads per task (Spark already runs a
# task per core). KAFKALOG_SOURCE_WINDOW_BYTES / KAFKALOG_SOURCE_THREADS override them (benchmarks).
TASK_WINDOW_BYTES = int(os.environ.get("KAFKALOG_SOURCE_WINDOW_BYTES", 8 << 20))
TASK_DECODE_THREADS = int(os.environ.get("KAFKALOG_SOURCE_THREADS", 1))

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


# With kafkalog.exportDir: one row per (Parquet file, partition) a task wrote (the export job's query).
EXPORT_FILE_FIELDS = [
    StructField("file", StringType()), StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("rows", LongType()), StructField("minOffset", LongType()), StructField("maxOffset", LongType()),
    StructField("bytes", LongType()),
]
EXPORT_FILE_COMPRESSION = "snappy"


def source_schema(options: SourceOptions, *, records: bool = False) -> StructType:
    """The rows of a query with these options (``records``: the record schema even with exportDir)."""
    if options.export_dir and not records:
        return StructType(EXPORT_FILE_FIELDS)
    fields = list(KAFKA_FIELDS)
    if options.include_headers:
        fields.append(HEADERS_FIELD)
    if options.include_batch_columns:
        fields.extend(BATCH_FIELDS)
    return StructType(fields)


def _ddl(field: StructField) -> str:
    return f"{field.name} {field.dataType.simpleString().upper()}"


def narrowed_schema(user: StructType, options: SourceOptions) -> StructType:
    """The rows a read hands over when the user gave a schema (``.schema("partition INT, offset LONG,
    value BINARY")``): a subset of :func:`source_schema`'s columns — same names, same types, any order,
    each once — which the tasks then shape and hand to the JVM alone (PySpark 4.2's Python data source
    has no column pruning; a user schema is Spark's way to narrow a source). Anything else is an error
    naming the column and listing the allowed ones: Spark's Kafka source refuses user schemas, and a
    schema we did not produce would be a silent wrong answer.

    :param user: the schema ``reader(schema)`` received (the full schema when the user gave none).
    :param options: the parsed options (includeHeaders / includeBatchColumns / exportDir add or change
        the allowed columns)."""
    allowed = source_schema(options)
    by_name = {f.name: f for f in allowed}
    listing = ", ".join(_ddl(f) for f in allowed)
    if not user.fields:
        raise SourceOptionError(f"format(\"kafkalog\"): the schema names no column; allowed: {listing}")
    seen = set()
    for f in user.fields:
        ours = by_name.get(f.name)
        if ours is None:
            raise SourceOptionError(f"format(\"kafkalog\"): schema column {f.name!r} is not one of this read's "
                                    f"columns (names are case-sensitive); allowed: {listing}")
        if f.dataType != ours.dataType:
            raise SourceOptionError(f"format(\"kafkalog\"): schema column {_ddl(f)} has type "
                                    f"{f.dataType.simpleString().upper()}, the source gives {_ddl(ours)}; "
                                    f"allowed: {listing}")
        if not f.nullable and ours.nullable:
            raise SourceOptionError(f"format(\"kafkalog\"): schema column {f.name!r} is declared NOT NULL; the "
                                    f"Kafka source's columns are nullable; allowed: {listing}")
        if f.name in seen:
            raise SourceOptionError(f"format(\"kafkalog\"): schema column {f.name!r} is named twice")
        seen.add(f.name)
    if options.export_dir and [f.name for f in user.fields] != allowed.fieldNames():
        raise SourceOptionError(f"format(\"kafkalog\") with exportDir gives one row per file written: its "
                                f"schema is fixed ({listing}); narrow the records with the export job instead")
    return StructType([by_name[f.name] for f in user.fields])


def register(spark) -> None:
    """Make ``format("kafkalog")`` available in ``spark``. The session's
    ``spark.sql.python.filterPushdown.enabled`` is left as it is: the reader takes no filters (module
    docstring), so either value reads the same."""
    spark.dataSource.register(KafkalogDataSource)


# --- reading ---------------------------------------------------------------------------------------------

class TaskPartition(InputPartition):
    def __init__(self, task: ScanTask):
        super().__init__(None)
        self.task = task


def _keep_mask(batch: pa.RecordBatch, lo: int, hi: int, aborted, include_control: bool = False) -> Optional[pa.Array]:
    """Rows a consumer would get: offsets in [lo, hi), no control record (unless ``include_control``), no
    aborted transaction's data (None: every row)."""
    offsets = batch.column("offset")
    n = batch.num_rows
    first, last = offsets[0].as_py(), offsets[n - 1].as_py()
    control = batch.column("isControl")
    has_control = not include_control and pc.any(control).as_py()
    in_range = first >= lo and last < hi and first <= last
    if in_range and not has_control and not aborted:
        return None
    mask = pa.array(np.ones(n, np.bool_)) if include_control else pc.invert(control)
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


def spark_headers(col: pa.Array) -> pa.Array:
    """The headers column as Spark's Kafka source gives it: a record without headers has ``null``, not an
    empty array (``KafkaRecordToRowConverter``; checked against it in tests/broker/test_spark_kafka_parity.py).

    :param col: the decoded headers column (list of key/value structs; empty lists for no headers)."""
    empty = pc.equal(pc.list_value_length(col), 0)
    if not pc.any(empty).as_py():
        return col
    return pc.if_else(empty, pa.scalar(None, col.type), col)


def shape(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """A decoded batch as Spark's Arrow reader takes it: the target's columns, types and nullability."""
    arrays = []
    for f in target:
        col = batch.column(f.name)
        if col.type != f.type:
            col = col.cast(f.type)
        if f.name == HEADERS_FIELD.name:
            col = spark_headers(col)
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def read_task(task: ScanTask, target: pa.Schema, *, metrics_dir: Optional[str] = None, include_control: bool = False,
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
            mask = _keep_mask(batch, piece.offset_lo, piece.offset_hi, piece.aborted, include_control)
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


def write_task_files(task: ScanTask, records: pa.Schema, out_dir: str, *, include_control: bool,
                     metrics_dir: Optional[str] = None) -> Iterator[pa.RecordBatch]:
    """Read one input partition and write its records as Parquet files in ``out_dir`` — one per topic, the
    ``topic`` column left out (it is the table's partition column) — then yield one row per (file,
    partition): what the export job commits."""
    import pyarrow.parquet as pq

    file_schema = records.remove(records.get_field_index("topic"))
    writers: dict = {}
    stats: dict = {}
    try:
        for batch in read_task(task, records, metrics_dir=metrics_dir, include_control=include_control):
            topic, partition = batch.column("topic")[0].as_py(), batch.column("partition")[0].as_py()
            if topic not in writers:
                os.makedirs(out_dir, exist_ok=True)
                path = os.path.join(out_dir, f"part-{uuid.uuid4().hex}.parquet")
                writers[topic] = (pq.ParquetWriter(path, file_schema, compression=EXPORT_FILE_COMPRESSION), path)
            writers[topic][0].write_batch(batch.drop_columns(["topic"]))
            offsets = batch.column("offset")
            lo, hi = pc.min(offsets).as_py(), pc.max(offsets).as_py()
            st = stats.setdefault((topic, partition), [0, lo, hi])
            st[0] += batch.num_rows
            st[1], st[2] = min(st[1], lo), max(st[2], hi)
    finally:
        for writer, _path in writers.values():
            writer.close()
    rows = [dict(file=writers[t][1], topic=t, partition=p, rows=n, minOffset=lo, maxOffset=hi,
                 bytes=os.path.getsize(writers[t][1])) for (t, p), (n, lo, hi) in sorted(stats.items())]
    if rows:
        from pyspark.sql.pandas.types import to_arrow_schema

        yield pa.RecordBatch.from_pylist(rows, schema=to_arrow_schema(StructType(EXPORT_FILE_FIELDS)))


def _records_arrow_schema(options: SourceOptions) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(source_schema(options, records=True), timezone="UTC")


def run_task(options: SourceOptions, task: ScanTask, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """A task of a batch or streaming read: its records, or with exportDir the Parquet files it wrote."""
    if options.export_dir:
        return write_task_files(task, _records_arrow_schema(options), options.export_dir,
                                include_control=options.include_control_records, metrics_dir=options.metrics_dir)
    return read_task(task, target, metrics_dir=options.metrics_dir, include_control=options.include_control_records)


class AsOfTaskPartition(InputPartition):
    """One partition of an as-of table (``asOf`` / ``asOfOffsets``): read whole by one task."""

    def __init__(self, part: AsOfPartition):
        super().__init__(None)
        self.part = part


def read_as_of(options: SourceOptions, part: AsOfPartition, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """A task of an as-of read: the partition's key map, then its winning records (``kafkalog.source.as_of_table``)."""
    for batch in partition_rows(part, map_bytes=options.as_of_map_bytes, window_bytes=TASK_WINDOW_BYTES,
                                threads=TASK_DECODE_THREADS):
        yield shape(batch, target)


class KafkalogReader(DataSourceReader):
    """Reads a plan made before it existed; it holds nothing a call can change. It does not override
    ``pushFilters`` (PySpark's default hands every filter back to Spark): see the module docstring for
    why no query's filters may shape what is read."""

    def __init__(self, options: SourceOptions, schema: StructType, tasks: Tuple[ScanTask, ...],
                 as_of: Tuple[AsOfPartition, ...] = ()):
        """``options`` the parsed options; ``schema`` the query's rows; ``tasks`` the plan made at load();
        ``as_of``: with asOf / asOfOffsets, the partitions of the as-of table (then ``tasks`` is empty)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        self.options = options
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.tasks = tasks
        self.as_of = as_of

    def partitions(self):
        if self.options.as_of is not None:
            return [AsOfTaskPartition(p) for p in self.as_of if p.pieces] or [TaskPartition(ScanTask(()))]
        return [TaskPartition(t) for t in self.tasks] or [TaskPartition(ScanTask(()))]

    def read(self, partition):
        if isinstance(partition, AsOfTaskPartition):
            return read_as_of(self.options, partition.part, self.arrow_schema)
        return run_task(self.options, partition.task, self.arrow_schema)


# --- streaming -------------------------------------------------------------------------------------------

def listed_facts(options: SourceOptions) -> dict:
    """{(topic, partition): PartitionFacts} of every subscribed partition in the log dirs now."""
    cache: dict = {}
    return {(p.topic, p.partition): load_partition_facts(d, p, cache) for d, p in list_partitions(options)}


def _readable_end(facts, read_committed: bool) -> int:
    """Latest offset a consumer may read: the high watermark (else log end); read_committed: the LSO below it."""
    latest = facts.latest
    return min(latest, read_committed_view(facts, latest)[0]) if read_committed else latest


def write_data_loss(directory: Optional[str], losses) -> None:
    """Each data-loss event as one JSON file in ``directory``, named by its content (a replayed
    micro-batch writes the same file again)."""
    if not directory or not losses:
        return
    import hashlib

    os.makedirs(directory, exist_ok=True)
    for loss in losses:
        data = json.dumps(loss.to_dict(), sort_keys=True)
        name = hashlib.sha1(data.encode()).hexdigest()[:20]
        target = os.path.join(directory, f"loss-{name}.json")
        if not os.path.exists(target):
            tmp = f"{target}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "w") as out:
                out.write(data)
            os.replace(tmp, target)


class KafkalogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over log dirs that grow: offsets as Spark's Kafka source checkpoints them."""

    def __init__(self, options: SourceOptions, schema: StructType):
        from pyspark.sql.pandas.types import to_arrow_schema

        self.options = options
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.target = None         # Trigger.AvailableNow: the latest offsets when the query started

    def _latest(self) -> tuple:
        """(latest readable offset, log start offset) of every listed partition."""
        facts = listed_facts(self.options)
        return ({tp: _readable_end(f, self.options.read_committed) for tp, f in facts.items()},
                {tp: f.log_start_offset for tp, f in facts.items()})

    def initialOffset(self):
        facts = listed_facts(self.options)
        check_listing(self.options, sorted(facts))
        out, logs = {}, {}
        try:
            for tp, f in facts.items():
                start = resolve_spec(f, self.options.starting, starting=True, options=self.options, log_cache=logs)
                out[tp] = check_range(f, start, f.latest, fail_on_data_loss=self.options.fail_on_data_loss)[0]
        finally:
            for log in logs.values():
                log.close()
        return to_json_offsets(out)

    def getDefaultReadLimit(self):
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()[0]

    def latestOffset(self, start, limit):
        if self.target is not None and not isinstance(limit, ReadMaxRows):
            return to_json_offsets(self.target)    # AvailableNow: fixed at the start (Spark: no new fetch)
        latest, log_starts = self._latest()
        latest = cap(latest, self.target)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(from_json_offsets(start), latest, limit.max_rows, log_starts)
        return to_json_offsets(latest)

    def partitions(self, start, end):
        facts = listed_facts(self.options)
        ranges, losses = plan_ranges(from_json_offsets(start), from_json_offsets(end),
                                     {tp: f.log_start_offset for tp, f in facts.items()},
                                     fail_on_data_loss=self.options.fail_on_data_loss)
        write_data_loss(self.options.data_loss_dir, losses)
        pranges = []
        for r in ranges:
            f = facts[(r.topic, r.partition)]
            # replayed up to the partition's readable end, not the micro-batch's: maxOffsetsPerTrigger may end a
            # micro-batch inside a transaction whose abort marker comes later, and its records are still aborted
            aborted = read_committed_view(f, f.latest)[1] if self.options.read_committed else ()
            pranges.append(PartitionRange(f, r.start, r.end, aborted_in(aborted, r.start, r.end)))
        total = sum(s.size for r in pranges for s in r.facts.segments)
        target = target_bytes(total, parallelism=os.cpu_count() or 1,
                              max_partition_bytes=self.options.max_partition_bytes,
                              min_partitions=self.options.min_partitions)
        pieces = [p for r in pranges for p in plan_pieces(r, Bounds(), target)]
        return [TaskPartition(t) for t in pack(pieces, target, self.options.min_partitions)]

    def read(self, partition: TaskPartition):
        return run_task(self.options, partition.task, self.arrow_schema)

    def commit(self, end) -> None:
        """Nothing to release: the log dirs are only read."""


class KafkalogDataSource(DataSource):
    """Records of Kafka log dirs; options as Spark's Kafka source (see kafkalog.source.options)."""

    def __init__(self, options):
        """``options``: the reader's options. Runs once per ``load()``; the instance is pickled and every
        later planning step of the DataFrame's queries unpickles that same state."""
        super().__init__(options)
        # A bad option fails load(), before any task. Options valid only for a stream (startingOffsets
        # latest) fail a batch read when it plans, and the other way round; so does what only the log
        # dirs refute (an assigned partition not there, data loss).
        self.batch_error: Optional[Exception] = None
        self.batch_tasks: Tuple[ScanTask, ...] = ()
        self.as_of: Tuple[AsOfPartition, ...] = ()
        try:
            self.parsed = parse_source_options(dict(options))
        except SourceOptionError as exc:
            self.batch_error = exc
            self.parsed = parse_source_options(dict(options), streaming=True)
            return
        try:
            if self.parsed.as_of is not None:
                self.as_of = tuple(plan_as_of(self.parsed).partitions)
            else:
                self.batch_tasks = tuple(plan_scan(self.parsed, Bounds(), parallelism=os.cpu_count() or 1))
        except (KafkalogError, OSError) as exc:     # SourceOptionError is a KafkalogError
            self.batch_error = exc

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        return source_schema(self.parsed)

    def reader(self, schema: StructType) -> KafkalogReader:
        if self.batch_error is not None:
            raise self.batch_error
        return KafkalogReader(self.parsed, narrowed_schema(schema, self.parsed), self.batch_tasks, self.as_of)

    def streamReader(self, schema: StructType) -> KafkalogStreamReader:
        options = parse_source_options(dict(self.options), streaming=True)
        return KafkalogStreamReader(options, narrowed_schema(schema, options))
