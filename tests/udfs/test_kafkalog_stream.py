"""spark.readStream.format("kafkalog") over log dirs that grow: Trigger.AvailableNow and a processing-time
trigger see every record once (an active segment that grows, a rolled segment, a new partition),
maxOffsetsPerTrigger caps micro-batches, a log start that moves past the committed offset is data loss
as Spark's failOnDataLoss says, and the offsets are Spark's Kafka checkpoint JSON."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from kafka_python_logs import make_kafka_python_partition, write_segment_files  # noqa: E402
from oracle import build_batch, read_all  # noqa: E402

pytestmark = pytest.mark.timeout(600)


def grow(folder: Path, offset: int, batches: int, per_batch: int = 4, *, roll: bool) -> list:
    """Append ``batches`` kafka-python batches at ``offset``: as a new (rolled) segment, or onto the active
    segment's .log (its index left as it was, as a broker's active segment index lags). Returns the oracle's
    records."""
    raw = [build_batch(2, 0, offset + b * per_batch,
                       [(1_700_000_100_000 + offset + b * per_batch + i, b"k%d" % (offset + b * per_batch + i),
                         b"v%d" % (offset + b * per_batch + i), []) for i in range(per_batch)])
           for b in range(batches)]
    if roll:
        write_segment_files(folder, raw)
    else:
        active = sorted(folder.glob("*.log"))[-1]
        with open(active, "ab") as out:
            out.write(b"".join(raw))
    return [r for data in raw for r in read_all(data)]


def stream(spark, log_dir, checkpoint, sink: list, *, available_now=True, **options):
    """Start (and, with available_now, finish) a query collecting (topic, partition, offset, value) and
    each micro-batch's size into ``sink``."""
    reader = spark.readStream.format("kafkalog").option("startingOffsets", "earliest")
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load(str(log_dir))

    def collect(batch_df, batch_id):
        rows = [(r.topic, r.partition, r.offset, r.value) for r in batch_df.collect()]
        sink.append((batch_id, rows))

    writer = df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
    if available_now:
        query = writer.trigger(availableNow=True).start()
        try:
            query.awaitTermination(300)
        except Exception:          # the query's failure is asserted through query.exception()
            pass
        return query
    return writer.trigger(processingTime="500 milliseconds").start()


def rows_of(sink):
    return [r for _b, rows in sink for r in rows]


def test_available_now_over_a_growing_log_dir_sees_every_record_once(spark, tmp_path):
    log_dir, ckpt = tmp_path / "logs", tmp_path / "ckpt"
    parts = make_kafka_python_partition(log_dir, "orders", 0, codec=3, segments=2, batches_per_segment=3,
                                        records_per_batch=5, seed=1)
    expected = [("orders", 0, r["offset"], r["value"]) for r in parts.records]
    sink: list = []
    stream(spark, log_dir, ckpt, sink)
    assert sorted(rows_of(sink)) == sorted(expected)

    # the active segment grows, then rolls; a new partition appears
    folder = log_dir / "orders-0"
    more = grow(folder, parts.log_end_offset, 2, roll=False)
    more += grow(folder, parts.log_end_offset + 8, 3, roll=True)
    other = make_kafka_python_partition(log_dir, "orders", 1, codec=0, segments=1, batches_per_segment=2,
                                        records_per_batch=3, seed=2)
    sink2: list = []
    stream(spark, log_dir, ckpt, sink2)
    got = rows_of(sink2)
    want = [("orders", 0, r["offset"], r["value"]) for r in more] + \
           [("orders", 1, r["offset"], r["value"]) for r in other.records]
    assert sorted(got) == sorted(want)
    assert len(got) == len(set(got))
    # Spark's Kafka checkpoint JSON: the next offset of every partition
    offsets_dir = ckpt / "offsets"
    last = max(int(p.name) for p in offsets_dir.iterdir() if p.name.isdigit())
    source_offset = json.loads((offsets_dir / str(last)).read_text().splitlines()[-1])
    assert source_offset == {"orders": {"0": parts.log_end_offset + 20, "1": 6}}

    # nothing new: a third run reads nothing
    sink3: list = []
    stream(spark, log_dir, ckpt, sink3)
    assert rows_of(sink3) == []


def test_processing_time_trigger_picks_up_growth(spark, tmp_path):
    log_dir, ckpt = tmp_path / "logs", tmp_path / "ckpt"
    parts = make_kafka_python_partition(log_dir, "t", 0, codec=0, segments=1, batches_per_segment=2,
                                        records_per_batch=4, seed=3)
    sink: list = []
    query = stream(spark, log_dir, ckpt, sink, available_now=False)
    try:
        expected = [("t", 0, r["offset"], r["value"]) for r in parts.records]
        for step in range(2):
            if step:
                more = grow(log_dir / "t-0", parts.log_end_offset, 2, roll=True)
                expected += [("t", 0, r["offset"], r["value"]) for r in more]
            deadline = time.monotonic() + 120
            while len(rows_of(sink)) < len(expected) and time.monotonic() < deadline:
                assert query.exception() is None
                time.sleep(0.3)
            assert sorted(rows_of(sink)) == sorted(expected)
    finally:
        query.stop()
    assert len(rows_of(sink)) == len(set(rows_of(sink)))


def test_max_offsets_per_trigger_caps_each_micro_batch(spark, tmp_path):
    log_dir, ckpt = tmp_path / "logs", tmp_path / "ckpt"
    for p in (0, 1):
        make_kafka_python_partition(log_dir, "m", p, codec=0, segments=2, batches_per_segment=3, records_per_batch=5,
                                    seed=10 + p)
    sink: list = []
    stream(spark, log_dir, ckpt, sink, maxOffsetsPerTrigger="12")
    sizes = [len(rows) for _b, rows in sink if rows]
    assert sum(sizes) == 60 and len(sizes) >= 5
    assert max(sizes) <= 12
    assert sorted(rows_of(sink)) == sorted(set(rows_of(sink)))


def _drop_first_segment(folder: Path):
    first = sorted(folder.glob("*.log"))[0]
    for suffix in (".log", ".index", ".timeindex"):
        first.with_suffix(suffix).unlink()


def test_log_start_past_the_committed_offset_is_data_loss(spark, tmp_path):
    log_dir = tmp_path / "logs"
    parts = make_kafka_python_partition(log_dir, "d", 0, codec=0, segments=1, batches_per_segment=2,
                                        records_per_batch=5, seed=4)
    for fail in ("true", "false"):
        ckpt = tmp_path / f"ckpt-{fail}"
        stream(spark, log_dir, ckpt, [], failOnDataLoss=fail)
    # retention moves the log start: the next two segments arrive, the first is deleted
    folder = log_dir / "d-0"
    grow(folder, parts.log_end_offset, 2, roll=True)
    grow(folder, parts.log_end_offset + 8, 2, roll=True)
    _drop_first_segment(folder)
    _drop_first_segment(folder)          # offsets 10..17 are gone too, before the stream read them
    query = stream(spark, log_dir, tmp_path / "ckpt-true", [], failOnDataLoss="true")
    assert query.exception() is not None and "failOnDataLoss" in str(query.exception())

    sink: list = []
    losses = tmp_path / "losses"
    stream(spark, log_dir, tmp_path / "ckpt-false", sink, failOnDataLoss="false", **{"kafkalog.dataLossDir": str(losses)})
    assert sorted(r[2] for r in rows_of(sink)) == list(range(18, 26))
    events = [json.loads(p.read_text()) for p in losses.glob("*.json")]
    assert [(e["kind"], e["from_offset"], e["to_offset"]) for e in events] == [("below-log-start", 10, 18)]


def test_streaming_option_rules(spark, tmp_path):
    log_dir = tmp_path / "logs"
    make_kafka_python_partition(log_dir, "s", 0, codec=0, segments=1, batches_per_segment=2, records_per_batch=3,
                                seed=5)
    # an ending option is refused when the stream starts (a batch read of the same options is fine)
    with pytest.raises(Exception, match="not valid in streaming"):
        q = spark.readStream.format("kafkalog").option("endingOffsets", "latest").load(str(log_dir)).writeStream \
            .foreachBatch(lambda df, i: None).option("checkpointLocation", str(tmp_path / "e")) \
            .trigger(availableNow=True).start()
        q.awaitTermination(300)
    # a stream starts at latest by default, as Spark's Kafka source: nothing already there is read
    sink: list = []
    reader_query = spark.readStream.format("kafkalog").load(str(log_dir)).writeStream \
        .foreachBatch(lambda df, i: sink.append((i, [tuple(r) for r in df.collect()]))) \
        .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start()
    reader_query.awaitTermination(300)
    assert rows_of(sink) == []


def test_user_schema_narrows_a_stream_too(spark, tmp_path):
    log_dir = tmp_path / "logs"
    parts = make_kafka_python_partition(log_dir, "orders", 0, codec=0, segments=1, batches_per_segment=3,
                                        records_per_batch=4, seed=3)
    expected = parts.records
    sink: list = []
    df = (spark.readStream.format("kafkalog").schema("value BINARY, offset LONG")
          .option("startingOffsets", "earliest").load(str(log_dir)))
    assert df.columns == ["value", "offset"]
    query = (df.writeStream.foreachBatch(lambda b, _i: sink.extend(tuple(r) for r in b.collect()))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert sorted(sink, key=lambda r: r[1]) == [(r["value"], r["offset"]) for r in expected]
    bad = spark.readStream.format("kafkalog").schema("value STRING").load(str(log_dir))
    with pytest.raises(Exception, match="schema column value STRING has type STRING"):
        bad.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt2")).start().awaitTermination(60)
