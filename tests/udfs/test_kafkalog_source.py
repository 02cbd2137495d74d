"""spark.read.format("kafkalog") against kafka-python's reading of the same log dirs: the full read, every
option of Spark's Kafka source, named errors, the real fixtures (a DataFrame reused across queries:
test_kafkalog_source_reuse.py)."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")
from chispa import assert_df_equality  # noqa: E402
from chispa.rows_comparer import assert_basic_rows_equality  # noqa: E402
from chispa.schema_comparer import assert_schema_equality  # noqa: E402

import kafkalog  # noqa: E402
from kafkalog.lookup.partition_log import PartitionLog  # noqa: E402
from kafkalog.format.schema import RECORD_SCHEMA  # noqa: E402
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.fs.names import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafka_python_logs import (all_records, make_transactional_partition, standard_log_dir,  # noqa: E402
                               timestamps)

pytestmark = pytest.mark.timeout(900)

KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
ORDER = ["topic", "partition", "offset"]
UTC = dt.timezone.utc


def _ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("kafka-python-logs")
    parts = standard_log_dir(log_dir)
    return log_dir, parts


def _expected(spark, rows, *, headers: bool = False):
    from udfs.kafkalog_source import HEADERS_FIELD, KAFKA_FIELDS
    from pyspark.sql.types import StructType

    schema = StructType(KAFKA_FIELDS + ([HEADERS_FIELD] if headers else []))
    data = []
    for key, value, topic, p, offset, ts, hdrs in rows:
        row = [key, value, topic, p, offset, _ts(ts), 0]
        if headers:
            # no headers: null, as Spark's Kafka source gives (tests/broker/test_spark_kafka_parity.py)
            row.append([(k, v) for k, v in hdrs] or None)
        data.append(tuple(row))
    return spark.createDataFrame(data, schema)


def assert_ordered_equal(actual, expected) -> None:
    """What assert_df_equality(actual.orderBy(*ORDER), expected.orderBy(*ORDER)) checks — the schemas (names,
    types, nullability), then the rows in (topic, partition, offset) order, a key unique per row — with each
    side's rows sorted here instead of by Spark (a sort is a sampling job and a shuffle: measured 0.55-0.73 s
    a small read against 0.22-0.33 s collected and sorted in Python, at load 2.2, two per test)."""
    assert_schema_equality(actual.schema, expected.schema)
    key = lambda r: (r["topic"], r["partition"], r["offset"])   # noqa: E731
    assert_basic_rows_equality(sorted(actual.collect(), key=key), sorted(expected.collect(), key=key))


def _read(spark, path, **options):
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


# --- full reads ---------------------------------------------------------------------------------------

def test_full_read_equals_kafka_python(spark, logs):
    log_dir, parts = logs
    actual = _read(spark, log_dir)
    assert actual.columns == KAFKA_COLUMNS
    assert_ordered_equal(actual, _expected(spark, all_records(parts)))


def test_include_headers_adds_sparks_headers_column(spark, logs):
    log_dir, parts = logs
    actual = _read(spark, log_dir, includeHeaders="true")
    assert actual.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    assert_ordered_equal(actual, _expected(spark, all_records(parts), headers=True))


def test_batch_columns_equal_read_segment(spark, logs):
    log_dir, _ = logs
    actual = _read(spark, log_dir, includeBatchColumns="true", subscribe="orders")
    names = [f.name for f in RECORD_SCHEMA if f.name != "headers"]
    assert actual.columns == KAFKA_COLUMNS + names[len(KAFKA_COLUMNS):]
    tables = [kafkalog.read_segment(p) for p in sorted(log_dir.glob("orders-*/*.log"))]
    import pyarrow as pa
    table = pa.concat_tables(tables).drop_columns(["headers"])
    expected = spark.createDataFrame(table.to_pandas(), actual.schema)
    assert_ordered_equal(actual, expected)


def test_kafka_source_query_runs_unchanged(spark, logs):
    """A query written for format("kafka"): only the format name and the path change."""
    log_dir, parts = logs
    df = (spark.read.format("kafkalog")
          .option("kafka.bootstrap.servers", "broker1:9092,broker2:9092")
          .option("subscribe", "orders,payments")
          .option("startingOffsets", "earliest").option("endingOffsets", "latest")
          .option("kafka.security.protocol", "SASL_SSL").option("failOnDataLoss", "false")
          .load(str(log_dir))
          .selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "topic", "partition", "offset"))
    counts = {(r["topic"], r["key"]): r["count"] for r in df.groupBy("topic", "key").count().collect()}
    expected = {}
    for (topic, _p), pr in parts.items():
        if topic in ("orders", "payments"):
            for r in pr.records:
                k = (topic, None if r["key"] is None else r["key"].decode())
                expected[k] = expected.get(k, 0) + 1
    assert counts == expected


# --- topic selection ----------------------------------------------------------------------------------

@pytest.mark.parametrize("option,value,topics", [
    ("subscribe", "payments", {"payments"}),
    ("subscribe", "orders,payments", {"orders", "payments"}),
    ("subscribePattern", "or.*", {"orders"}),                 # a whole-name match, as Java's matches()
    ("subscribePattern", ".*orders", {"orders", "xorders"}),
    ("subscribePattern", "(?<t>pay)ments", {"payments"}),      # Java's named group syntax
])
def test_subscribe_options(spark, logs, option, value, topics):
    log_dir, parts = logs
    actual = _read(spark, log_dir, **{option: value})
    assert_ordered_equal(actual, _expected(spark, all_records(parts, keep=lambda tp, r: tp[0] in topics)))


def test_assign(spark, logs):
    log_dir, parts = logs
    actual = _read(spark, log_dir, assign=json.dumps({"orders": [2], "payments": [0]}))
    wanted = {("orders", 2), ("payments", 0)}
    assert_ordered_equal(actual, _expected(spark, all_records(parts, keep=lambda tp, r: tp in wanted)))


# --- offsets ------------------------------------------------------------------------------------------

def test_per_partition_offsets_with_earliest_and_latest(spark, logs):
    log_dir, parts = logs
    starting = {"orders": {"0": 7, "1": -2, "2": 59}}
    ending = {"orders": {"0": 33, "1": -1, "2": 60}}
    actual = _read(spark, log_dir, subscribe="orders", startingOffsets=json.dumps(starting),
                   endingOffsets=json.dumps(ending))
    bounds = {0: (7, 33), 1: (0, 60), 2: (59, 60)}
    keep = lambda tp, r: tp[0] == "orders" and bounds[tp[1]][0] <= r["offset"] < bounds[tp[1]][1]   # noqa: E731
    assert_ordered_equal(actual, _expected(spark, all_records(parts, keep=keep)))


def test_latest_is_the_checkpointed_high_watermark(spark, tmp_path):
    parts = standard_log_dir(tmp_path)
    write_offset_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT, {("orders", 0): 42})
    actual = _read(spark, tmp_path, subscribe="orders")
    keep = lambda tp, r: tp[0] == "orders" and (tp[1] != 0 or r["offset"] < 42)   # noqa: E731
    assert_ordered_equal(actual, _expected(spark, all_records(parts, keep=keep)))


def _first_offset_at_or_after(parts, tp, t):
    for r in parts[tp].records:
        if r["timestamp"] >= t:
            return r["offset"]
    return None


def test_starting_and_ending_timestamps_follow_list_offsets(spark, logs):
    log_dir, parts = logs
    ts = timestamps(parts, ("orders", 0))
    start_t, end_t = int(ts[13]), int(ts[44])
    actual = _read(spark, log_dir, subscribe="orders", startingTimestamp=str(start_t),
                   endingTimestamp=str(end_t))
    ranges = {}
    for p in range(3):
        tp = ("orders", p)
        with PartitionLog(log_dir / f"orders-{p}") as log:
            lo, hi = log.lookup(start_t), log.lookup(end_t)
        assert lo.offset == _first_offset_at_or_after(parts, tp, start_t)       # Kafka's rule = brute force here
        ranges[p] = (lo.offset, hi.offset if hi.found else parts[tp].log_end_offset)
    keep = lambda tp, r: tp[0] == "orders" and ranges[tp[1]][0] <= r["offset"] < ranges[tp[1]][1]   # noqa: E731
    assert_ordered_equal(actual, _expected(spark, all_records(parts, keep=keep)))


def test_offsets_by_timestamp_json(spark, logs):
    log_dir, parts = logs
    t0, t1 = int(timestamps(parts, ("payments", 0))[20]), int(timestamps(parts, ("payments", 1))[3])
    actual = _read(spark, log_dir, subscribe="payments",
                   startingOffsetsByTimestamp=json.dumps({"payments": {"0": t0, "1": t1}}),
                   endingOffsetsByTimestamp=json.dumps({"payments": {"0": 10 ** 15, "1": t1 + 200}}))
    lo = {0: _first_offset_at_or_after(parts, ("payments", 0), t0), 1: _first_offset_at_or_after(parts, ("payments", 1), t1)}
    hi = {0: parts[("payments", 0)].log_end_offset, 1: _first_offset_at_or_after(parts, ("payments", 1), t1 + 200)}
    keep = lambda tp, r: tp[0] == "payments" and lo[tp[1]] <= r["offset"] < hi[tp[1]]   # noqa: E731
    assert_ordered_equal(actual, _expected(spark, all_records(parts, keep=keep)))


def test_starting_timestamp_past_the_end(spark, logs):
    log_dir, _ = logs
    with pytest.raises(Exception, match="startingTimestamp"):
        _read(spark, log_dir, subscribe="orders", startingTimestamp=str(10 ** 15)).collect()
    assert _read(spark, log_dir, subscribe="orders", startingTimestamp=str(10 ** 15),
                 startingOffsetsByTimestampStrategy="latest").count() == 0


def test_fail_on_data_loss(spark, tmp_path):
    parts = standard_log_dir(tmp_path)
    write_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT, {("orders", 1): 25})
    starting = json.dumps({"orders": {"0": -2, "1": 3, "2": -2}})
    with pytest.raises(Exception, match=r"orders-1 starts at offset 3, below its log start offset 25"):
        _read(spark, tmp_path, subscribe="orders", startingOffsets=starting).collect()
    actual = _read(spark, tmp_path, subscribe="orders", startingOffsets=starting,
                   failOnDataLoss="false")
    keep = lambda tp, r: tp[0] == "orders" and (tp[1] != 1 or r["offset"] >= 25)   # noqa: E731
    assert_ordered_equal(actual, _expected(spark, all_records(parts, keep=keep)))
    # earliest is the log start offset too
    assert _read(spark, tmp_path, assign='{"orders":[1]}').agg({"offset": "min"}).collect()[0][0] == 25


def test_min_partitions(spark, logs):
    log_dir, parts = logs
    df = _read(spark, log_dir, minPartitions="12")
    assert df.rdd.getNumPartitions() >= 12
    assert_ordered_equal(df, _expected(spark, all_records(parts)))
    assert _read(spark, log_dir).rdd.getNumPartitions() < 12


def test_read_committed_and_control_batches(spark, tmp_path):
    tx = make_transactional_partition(tmp_path, "tx", 0)
    every = {r["offset"] for r in tx.records}
    uncommitted = [r["offset"] for r in _read(spark, tmp_path).orderBy("offset").collect()]
    assert uncommitted == sorted(every)                               # no control batch is a row
    assert not set(uncommitted) & set(tx.control_offsets)
    committed = [r["offset"] for r in _read(spark, tmp_path, **{"kafka.isolation.level": "read_committed"})
                 .orderBy("offset").collect()]
    open_first = 17           # the open transaction's first offset: the last stable offset
    assert committed == sorted(o for o in every if o not in tx.aborted_offsets and o < open_first)
    assert tx.aborted_offsets and set(tx.aborted_offsets) < every


# --- errors -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("options,message", [
    ({"endingOffsets": "earliest"}, "endingOffsets"),
    ({"startingOffsets": "{not json"}, "startingOffsets"),
    ({"minPartitions": "0"}, "minPartitions"),
    ({"includeHeaders": "yes"}, "includeHeaders"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"subscribe": "orders", "assign": '{"orders":[0]}'}, "only one of assign, subscribe or subscribePattern"),
    ({"subscribePattern": "or\\p{Alpha}+"}, "subscribePattern"),
    ({"subscribePattern": "(unclosed"}, "subscribePattern"),
    ({"assign": '{"orders":"0"}'}, "assign"),
    ({"startingTimestamp": "yesterday"}, "startingTimestamp"),
    ({"kafka.isolation.level": "serializable"}, "kafka.isolation.level"),
    ({"startingOffset": "earliest"}, "startingoffset"),          # a typo is not silently ignored
])
def test_bad_options_are_named_at_load(spark, logs, options, message):
    log_dir, _ = logs
    with pytest.raises(Exception, match=message.replace("\\", "\\\\").replace("(", r"\(").replace("{", r"\{")):
        _read(spark, log_dir, **options)          # load() alone raises: before any task runs


@pytest.mark.parametrize("options,message", [
    # valid for a stream (spark.readStream), so the shared DataSource cannot refuse them at load(): a batch
    # query refuses them when it plans, still before any task runs
    ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries"),
    ({"startingOffsets": '{"orders":{"0":-1}}'}, "starting offset can't be latest"),
    ({"assign": '{"orders":[0,9]}'}, "orders-9 not found"),
    ({"subscribe": "orders", "startingOffsets": '{"orders":{"0":1}}'}, "orders-1"),
    ({"subscribe": "orders", "endingOffsets": '{"orders":{"0":1,"1":1,"2":999}}'}, "orders-2 ends at offset 999"),
    ({"assign": '{"orders":[0]}', "startingOffsets": '{"orders":{"0":30}}',
      "endingOffsets": '{"orders":{"0":20}}'}, "starting offset 30 is after the ending offset 20"),
])
def test_options_the_log_dirs_refute_fail_at_planning(spark, logs, options, message):
    log_dir, _ = logs
    df = _read(spark, log_dir, **options)
    with pytest.raises(Exception, match=message):
        df.collect()


def test_no_log_dir(spark):
    with pytest.raises(Exception, match="no log dir given"):
        spark.read.format("kafkalog").load()


# --- a user-specified schema narrows the columns (our deviation: Spark's Kafka source refuses one) ---------

def test_user_schema_hands_over_only_its_columns_in_its_order(spark, logs):
    log_dir, parts = logs
    columns = ["offset", "value", "partition", "topic", "timestamp"]
    actual = (spark.read.format("kafkalog").schema("offset LONG, value BINARY, partition INT, topic STRING, "
                                                   "timestamp TIMESTAMP").load(str(log_dir)))
    assert actual.columns == columns
    assert_ordered_equal(actual, _expected(spark, all_records(parts)).select(*columns))
    headers = (spark.read.format("kafkalog").option("includeHeaders", "true")
               .schema("headers ARRAY<STRUCT<key: STRING, value: BINARY>>, offset LONG, partition INT, topic STRING")
               .load(str(log_dir)))
    assert_df_equality(headers.orderBy(*ORDER).select("headers"),
                       _expected(spark, all_records(parts), headers=True).orderBy(*ORDER).select("headers"))


def test_user_schema_outside_the_sources_columns_is_an_error_listing_them(spark, logs):
    log_dir, _ = logs
    for schema, message in [
        ("partition INT, offsets LONG", "schema column 'offsets' is not one of"),
        ("partition INT, offset INT", "schema column offset INT has type INT, the source gives offset BIGINT"),
        ("partition INT, key BINARY NOT NULL", "'key' is declared NOT NULL"),
    ]:
        with pytest.raises(Exception, match=message) as caught:      # when the query plans, before any task
            spark.read.format("kafkalog").schema(schema).load(str(log_dir)).collect()
        assert "allowed: key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, " \
               "timestampType INT" in str(caught.value), schema


# --- real fixtures ----------------------------------------------------------------------------------------

def _real_partition_dirs(root: Path):
    from kafkalog.errors import KafkalogError
    from kafkalog.fs.names import parse_partition_dir_name
    out = []
    for folder in sorted({p.parent for p in root.rglob("*.log")}):
        try:
            _t, _p, kind = parse_partition_dir_name(folder.name)
        except KafkalogError:
            continue
        if kind == "live":
            out.append(folder)
    return out


def test_real_fixtures_equal_read_segment(spark, real_fixtures, tmp_path):
    import pyarrow as pa
    import pyarrow.compute as pc
    folders = _real_partition_dirs(real_fixtures)
    assert folders, "no partition folder with .log files among the real fixtures"
    checked = 0
    for folder in folders:
        from kafkalog.errors import KafkalogError
        try:
            segs = [kafkalog.read_segment(p) for p in sorted(folder.glob("*.log"))]
        except KafkalogError:
            continue        # a damaged fixture: test_real_fixtures covers how it is refused
        with PartitionLog(folder) as log:
            lso, leo = log.log_start_offset, log.log_end_offset
            hw_known = (folder.parent / REPLICATION_OFFSET_CHECKPOINT).exists() and \
                (log.topic, log.partition) in read_offset_checkpoint(
                    folder.parent / REPLICATION_OFFSET_CHECKPOINT)
            end = log.high_watermark if hw_known else leo
            topic, partition = log.topic, log.partition
        table = pa.concat_tables(segs)
        keep = pc.and_(pc.invert(table["isControl"]),
                       pc.and_(pc.greater_equal(table["offset"], lso), pc.less(table["offset"], end)))
        table = table.filter(keep)
        expected = spark.createDataFrame(
            table.select(["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]).to_pandas(),
            "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
            "timestampType int")
        actual = _read(spark, folder.parent, assign=json.dumps({topic: [partition]}))
        # what assert_df_equality(actual.orderBy("offset"), expected.orderBy("offset")) checks, with the rows
        # ordered by their (unique) offset here instead of by two Spark sorts a folder (46 folders: ~15 s)
        assert_schema_equality(actual.schema, expected.schema)
        assert_basic_rows_equality(sorted(actual.collect(), key=lambda r: r["offset"]),
                                   sorted(expected.collect(), key=lambda r: r["offset"]))
        checked += 1
    assert checked >= 3, checked
