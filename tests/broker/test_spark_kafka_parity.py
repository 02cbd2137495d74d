"""Issue 32 — ``format("kafkalog")`` on a broker's log dir gives the DataFrame Spark's own Kafka source
(``format("kafka")``, spark-sql-kafka-0-10 at our pyspark's version) gives against the broker: rows and
schema (names, types, nullability), for the same options.

One real broker writes the topics; every ``format("kafka")`` query runs while it is up and its rows are
kept (collected with their schema); then the broker stops cleanly (SIGTERM) and the same query, the same
option map (ours ignores ``kafka.*``), runs through ``format("kafkalog")`` on the broker's log dir. The
two DataFrames, both ordered by (topic, partition, offset), must be equal (chispa).

Topics: ``par-a`` (3 partitions: keys, null keys and values, headers incl. an empty one, CreateTime
stamps we choose, two codecs), ``par-b`` (2 partitions, LogAppendTime), ``par-tx`` (a committed and an
aborted transaction between plain records), ``par-compact`` (compacted by the broker's cleaner, so its
offsets have gaps), ``par-deleted`` (DeleteRecords moved its log start offset past the offsets a query
asks for: failOnDataLoss). Where Spark's Kafka source fails a query, ours must fail it too.
"""
from __future__ import annotations

import json
import shutil

import pytest

from broker_harness import _unavailable
from kafkalog.testing import broker_client as bc
from udfs import spark_jars

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
A, B, TX, COMPACT, DELETED = "par-a", "par-b", "par-tx", "par-compact", "par-deleted"
DELETED_BEFORE = 4           # DeleteRecords moves par-deleted's log start offset here
ORDER = ["topic", "partition", "offset"]


def _records_a():
    out = []
    for i in range(30):
        key = None if i % 6 == 5 else b"k%d" % (i % 9)
        value = None if i % 11 == 10 else b"value-%d" % i * (1 + i % 3)
        headers = [("h%d" % j, b"v%d-%d" % (i, j)) for j in range(i % 3)]
        if i % 4 == 1:
            headers.append(("empty", b""))
        out.append(bc.Record(key, value, headers=headers, timestamp_ms=T0 + 1000 * i, partition=i % 3))
    return out


def _compact_records():
    # 3 keys rewritten over and over and two written once (offsets 2 and 5, kept between removed ones: gaps),
    # each record its own batch and the stamps far apart: with segment.ms below the gap every record rolls
    # a segment, so the cleaner has closed segments to clean
    return [bc.Record(b"u%d" % i if i in (2, 5) else b"ck%d" % (i % 3), b"cv%d" % i, timestamp_ms=T0 + 10_000 * i)
            for i in range(12)]


def _cases():
    """(id, options) for both formats; the bootstrap servers are added for format("kafka")."""
    cases = [
        ("earliest-latest", {"subscribe": A}),
        ("explicit-earliest-latest", {"subscribe": A, "startingOffsets": "earliest", "endingOffsets": "latest"}),
        ("headers", {"subscribe": A, "includeHeaders": "true"}),
        ("subscribe-two", {"subscribe": f"{A},{B}"}),
        ("subscribe-pattern", {"subscribePattern": "par-[ab]"}),
        ("assign", {"assign": json.dumps({A: [0, 2], B: [1]}), "includeHeaders": "true"}),
        ("offsets-json", {"subscribe": A,
                          "startingOffsets": json.dumps({A: {"0": 2, "1": -2, "2": 5}}),
                          "endingOffsets": json.dumps({A: {"0": 8, "1": -1, "2": 9}})}),
        ("starting-timestamp", {"subscribe": A, "startingTimestamp": str(T0 + 10_500)}),
        ("ending-timestamp", {"subscribe": A, "startingTimestamp": str(T0 + 3_000),
                              "endingTimestamp": str(T0 + 20_000)}),
        ("offsets-by-timestamp", {"subscribe": A, "startingOffsetsByTimestamp": json.dumps(
            {A: {"0": T0 + 6_000, "1": T0 + 1, "2": T0 + 26_000}})}),
        ("by-timestamp-strategy-latest", {"subscribe": A, "startingOffsetsByTimestampStrategy": "latest",
                                          "startingOffsetsByTimestamp": json.dumps(
                                              {A: {"0": T0 + 6_000, "1": T0 + 99_000_000, "2": T0}})}),
        ("read-uncommitted", {"subscribe": TX, "includeHeaders": "true"}),
        ("read-committed", {"subscribe": TX, "kafka.isolation.level": "read_committed"}),
        ("compacted", {"subscribe": COMPACT, "failOnDataLoss": "false"}),
        ("min-partitions", {"subscribe": f"{A},{B}", "minPartitions": "7"}),
        ("ending-offsets-by-timestamp", {"subscribe": A, "endingOffsetsByTimestamp": json.dumps(
            {A: {"0": T0 + 12_000, "1": T0 + 1_000, "2": T0 + 99_000_000}})}),
        ("by-timestamp-strategy-error", {"subscribe": A, "startingOffsetsByTimestamp": json.dumps(
            {A: {"0": T0, "1": T0 + 99_000_000, "2": T0}})}),
        ("deleted-range-fail-on-data-loss-false", {"subscribe": DELETED, "failOnDataLoss": "false",
                                                   "startingOffsets": json.dumps({DELETED: {"0": 1}})}),
        ("deleted-range-fail-on-data-loss-true", {"subscribe": DELETED, "failOnDataLoss": "true",
                                                  "startingOffsets": json.dumps({DELETED: {"0": 1}})}),
    ]
    return cases


CASES = _cases()
# readStream with Trigger.AvailableNow into foreachBatch: each micro-batch's rows and offsets JSON
STREAM_CASES = [
    ("stream-available-now", {"subscribe": f"{A},{B}", "startingOffsets": "earliest", "includeHeaders": "true"}),
    ("stream-max-offsets", {"subscribe": A, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "7"}),
    ("stream-read-committed", {"subscribe": TX, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "3",
                               "kafka.isolation.level": "read_committed"}),
]
# where Spark's Kafka source refuses a query: what ours must say instead of reading something else
# cases whose input partition count a test compares (test_min_partitions_splits_as_sparks_kafka_source_does)
PARTITION_COUNT_CASES = {"min-partitions"}
OUR_ERRORS = {"by-timestamp-strategy-error": "has a timestamp at or after",
              "deleted-range-fail-on-data-loss-true": "failOnDataLoss=false"}


@pytest.fixture(scope="module")
def written(module_broker, spark):
    """The broker writes the topics and lets its cleaner compact ``par-compact``; every case's
    format("kafka") rows are collected; the broker stops cleanly. Returns (log dir, {case: (rows, schema)})."""
    if "kafka" not in spark_jars.cached_jars(("kafka",)):
        _unavailable("Spark's Kafka source is not in the jar cache (python -m udfs.spark_jars fetch; .ci/run does)")
    b = module_broker
    bc.create_topic(b, A, partitions=3, configs={"retention.ms": -1})
    bc.create_topic(b, B, partitions=2, configs={"message.timestamp.type": "LogAppendTime"})
    bc.create_topic(b, TX, configs={"retention.ms": -1})
    bc.create_topic(b, COMPACT, configs={"cleanup.policy": "compact", "segment.ms": 5000, "retention.ms": -1,
                                         "min.cleanable.dirty.ratio": 0.01, "min.compaction.lag.ms": 0,
                                         "delete.retention.ms": 0})
    recs = _records_a()
    bc.produce(b, A, recs[:15], codec="lz4", flush_every=4)
    bc.produce(b, A, recs[15:], codec="none", flush_every=3)
    bc.produce(b, B, [bc.Record(b"b%d" % i, b"bv%d" % i, partition=i % 2) for i in range(8)], flush_every=2)
    bc.produce(b, TX, [bc.Record(b"p0", b"plain0", timestamp_ms=T0)])
    bc.produce_transaction(b, TX, [bc.Record(b"c%d" % i, b"committed%d" % i, timestamp_ms=T0 + i) for i in range(3)],
                           transactional_id="par-tx", commit=True)
    bc.produce_transaction(b, TX, [bc.Record(b"x%d" % i, b"aborted%d" % i, headers=[("why", b"abort")],
                                             timestamp_ms=T0 + 10 + i) for i in range(4)],
                           transactional_id="par-tx", commit=False)
    bc.produce(b, TX, [bc.Record(b"p1", b"plain1", timestamp_ms=T0 + 20)])
    bc.produce(b, COMPACT, _compact_records(), flush_every=1)
    bc.create_topic(b, DELETED, configs={"retention.ms": -1})
    bc.produce(b, DELETED, [bc.Record(b"d%d" % i, b"dv%d" % i, timestamp_ms=T0 + i) for i in range(10)], flush_every=3)
    assert bc.delete_records(b, {(DELETED, 0): DELETED_BEFORE}) == {(DELETED, 0): DELETED_BEFORE}
    b.wait_until(lambda: bc.list_offsets(b, COMPACT, 0, bc.EARLIEST)[0] >= 0
                 and len(bc.consume_all(b, COMPACT)) < len(_compact_records()),
                 timeout=60, what="the broker's cleaner compacting par-compact")
    expected = {}
    for case_id, options in CASES:
        df = spark.read.format("kafka").options(**options).option("kafka.bootstrap.servers", b.bootstrap).load()
        try:
            # the input partitions only where a test reads them (planning the query again asks the broker)
            parts = df.rdd.getNumPartitions() if case_id in PARTITION_COUNT_CASES else None
            expected[case_id] = (ordered(df.collect()), df.schema, parts)
        except Exception as e:   # noqa: BLE001 - Spark's Kafka source refused the query: ours must too
            expected[case_id] = (e, df.schema, None)
    for case_id, options in STREAM_CASES:
        reader = spark.readStream.format("kafka").options(**options).option("kafka.bootstrap.servers", b.bootstrap)
        expected[case_id] = _stream(reader.load(), b.data_dir.parent / f"ckpt-kafka-{case_id}")
    live_copy = b.data_dir.parent / "copy-taken-while-running"
    shutil.copytree(b.data_dir, live_copy)
    b.stop()
    return b.data_dir, expected, live_copy


def ordered(rows: list) -> list:
    """Collected rows in (topic, partition, offset) order, as ``df.orderBy(*ORDER).collect()`` gives them (the
    key is unique per row), sorted here instead of by Spark: its sort is a sampling job, a second read of the
    source and a shuffle per query (measured at load 5: the fixture's 19 queries and 3 streams took 62 s)."""
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def _stream(df, checkpoint):
    """Run a stream to its end with Trigger.AvailableNow: ([(batch id, rows ordered, offsets JSON)], schema)."""
    batches = []
    df.writeStream.foreachBatch(lambda batch, i: batches.append((i, ordered(batch.collect())))) \
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start().awaitTermination(300)
    offsets = {int(f.name): json.loads(f.read_text().splitlines()[-1])
               for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()}
    return [(i, rows, offsets[i]) for i, rows in sorted(batches, key=lambda x: x[0])], df.schema


def _ours(spark, log_dir, options):
    return spark.read.format("kafkalog").options(**options).load(str(log_dir))


def assert_equal_ordered(ours, theirs) -> None:
    """What assert_df_equality(ours.orderBy(*ORDER), theirs) checks — the schemas (names, types, nullability)
    and the rows in (topic, partition, offset) order, ``theirs`` built from rows collected in that order —
    with our rows ordered here by that key (unique per row) instead of by a Spark sort (a sampling job and
    a shuffle per query, 24 queries)."""
    from chispa.rows_comparer import assert_basic_rows_equality
    from chispa.schema_comparer import assert_schema_equality

    assert_schema_equality(ours.schema, theirs.schema)
    assert_basic_rows_equality(ordered(ours.collect()), theirs.collect())


@pytest.mark.parametrize("case_id,options", CASES, ids=[c for c, _ in CASES])
def test_kafkalog_equals_sparks_kafka_source(spark, written, case_id, options):

    log_dir, expected, _ = written
    rows, schema, _ = expected[case_id]
    if isinstance(rows, Exception):
        with pytest.raises(Exception) as ours_error:
            _ours(spark, log_dir, options).collect()
        assert OUR_ERRORS[case_id] in str(ours_error.value), (str(rows)[:500], str(ours_error.value))
        return
    assert case_id not in OUR_ERRORS, f"Spark's Kafka source read {case_id} without an error"
    theirs = spark.createDataFrame(rows, schema)
    assert rows, f"{case_id}: Spark's Kafka source read nothing, so the comparison would prove nothing"
    assert_equal_ordered(_ours(spark, log_dir, options), theirs)


def test_the_cases_see_what_they_are_about(written):
    """Guards the fixture: the compacted topic has offset gaps, the aborted transaction is in the log,
    LogAppendTime stamps are the broker's (type 1) — else some cases compare trivially equal reads."""
    _, expected, _ = written
    compact = [r["offset"] for r in expected["compacted"][0]]
    assert compact != list(range(compact[0], compact[0] + len(compact))), compact
    uncommitted = expected["read-uncommitted"][0]
    committed = expected["read-committed"][0]
    assert {bytes(r["value"]) for r in uncommitted} - {bytes(r["value"]) for r in committed} == {
        b"aborted%d" % i for i in range(4)}
    assert {r["timestampType"] for r in expected["subscribe-two"][0] if r["topic"] == B} == {1}
    assert any(r["headers"] for r in expected["headers"][0])
    assert isinstance(expected["deleted-range-fail-on-data-loss-true"][0], Exception)
    assert [r["offset"] for r in expected["deleted-range-fail-on-data-loss-false"][0]] == list(range(DELETED_BEFORE, 10))


def test_min_partitions_splits_as_sparks_kafka_source_does(spark, written):
    """minPartitions=7 over 5 topic-partitions: at least 7 input partitions, as Spark's Kafka source makes."""
    log_dir, expected, _ = written
    options = dict(CASES)["min-partitions"]
    theirs = expected["min-partitions"][2]
    assert theirs >= 7
    assert _ours(spark, log_dir, options).rdd.getNumPartitions() >= 7


COPY_CASES = ["earliest-latest", "headers", "read-committed", "compacted", "offsets-json"]


@pytest.mark.parametrize("case_id", COPY_CASES)
def test_a_copy_taken_while_the_broker_runs_reads_the_same(spark, written, case_id):
    """The log dir copied (cp -r) while the broker was up, nothing written since: the same rows as Spark's
    Kafka source read from the broker then."""

    _, expected, live_copy = written
    rows, schema, _ = expected[case_id]
    options = dict(CASES)[case_id]
    assert_equal_ordered(_ours(spark, live_copy, options), spark.createDataFrame(rows, schema))


@pytest.mark.parametrize("case_id,options", STREAM_CASES, ids=[c for c, _ in STREAM_CASES])
def test_streams_give_the_same_micro_batches_and_checkpoint_offsets(spark, written, case_id, options, tmp_path):
    """readStream from each source with AvailableNow (and maxOffsetsPerTrigger): the same micro-batches,
    rows and schema, and the same Kafka checkpoint offsets JSON after each."""
    from chispa import assert_df_equality

    log_dir, expected, _ = written
    theirs, their_schema = expected[case_id]
    ours, our_schema = _stream(spark.readStream.format("kafkalog").options(**options).load(str(log_dir)),
                               tmp_path / "ckpt")
    assert our_schema == their_schema
    assert [(i, o) for i, _, o in ours] == [(i, o) for i, _, o in theirs]
    assert len(theirs) > 1 or "maxOffsetsPerTrigger" not in options
    for (i, our_rows, _), (_, their_rows, _) in zip(ours, theirs):
        assert_df_equality(spark.createDataFrame(our_rows, our_schema), spark.createDataFrame(their_rows, their_schema))
