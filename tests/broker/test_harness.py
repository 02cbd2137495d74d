"""The broker harness itself: a KRaft node starts, takes topics and records, stops cleanly (the marker
Kafka writes) or uncleanly (no marker, and the next start recovers), and its cleaner's log is parsed."""
from __future__ import annotations

from kafkalog.testing import broker_client as bc
from kafkalog.testing.broker import CLEAN_SHUTDOWN_MARKER, KafkaBroker, cleaner_rounds, cleaner_stats

T0 = 1_700_000_000_000


def test_round_trip_clean_and_unclean_stop(broker_factory):
    broker = broker_factory()
    bc.create_topic(broker, "h", partitions=2, configs={"retention.ms": -1})
    records = [bc.Record(b"k%d" % i, b"v%d" % i, headers=[("h", b"%d" % i)], timestamp_ms=T0 + i, partition=i % 2)
               for i in range(10)]
    assert bc.produce(broker, "h", records, codec="lz4") == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    got = bc.consume_all(broker, "h")
    assert [(c.partition, c.offset, c.key, c.value, c.headers, c.timestamp_ms) for c in got] == sorted(
        [(r.partition, i // 2, r.key, r.value, tuple(r.headers), r.timestamp_ms) for i, r in enumerate(records)])
    assert bc.list_offsets(broker, "h", 1, bc.LATEST)[0] == 5
    assert bc.list_offsets(broker, "h", 0, T0 + 4) == (2, T0 + 4)

    broker.stop()
    assert (broker.data_dir / CLEAN_SHUTDOWN_MARKER).is_file()
    broker.start()
    assert not (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()       # the loader deletes it
    broker.stop(clean=False)
    assert not (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    broker.start()
    assert "Recovering unflushed segment" in broker.server_log() or "recovery" in broker.server_log().lower()
    assert len(bc.consume_all(broker, "h")) == 10


def test_transactions_groups_and_listoffsets(broker_factory):
    broker = broker_factory()
    bc.create_topic(broker, "tx")
    bc.produce_transaction(broker, "tx", [bc.Record(b"a", b"aborted")], transactional_id="t1", commit=False)
    bc.produce_transaction(broker, "tx", [bc.Record(b"a", b"kept")], transactional_id="t2", commit=True)
    assert [c.value for c in bc.consume_all(broker, "tx", read_committed=True)] == [b"kept"]
    assert [c.value for c in bc.consume_all(broker, "tx")] == [b"aborted", b"kept"]
    bc.commit_group_offsets(broker, "g", {("tx", 0): 3})
    assert bc.group_offsets(broker, "g") == {("tx", 0): 3}
    described = bc.describe_group(broker, "g")
    assert described["group_state"] == "Empty" and not described["members"]     # committed, no member now


def test_cleaner_log_is_parsed():
    text = """[x] INFO Cleaner 0: Beginning cleaning of log t-0 (c)
[x] INFO [kafka-log-cleaner-thread-0]:
	Log cleaner thread 0 cleaned log t-0 (dirty section = [0, 20])
	0.0 MB of log processed in 0.1 seconds (0.0 MB/sec).
	Indexed 0.0 MB in 0.1 seconds (0.0 Mb/sec, 77.6% of total time)
	Buffer utilization: 0.0%
	Cleaned 0.0 MB in 0.0 seconds (0.0 Mb/sec, 22.4% of total time)
	Start size: 1.5 MB (20,000 messages)
	End size: 0.5 MB (5 messages)
	75.0% size reduction (75.0% fewer messages)
 (org.apache.kafka.storage.internals.log.LogCleaner)"""
    assert cleaner_rounds(text) == [("t-0", 0, 20)]
    (stats,) = cleaner_stats(text)
    assert (stats.start_mb, stats.start_messages, stats.end_messages, stats.seconds) == (1.5, 20_000, 5, 0.1)


def test_the_readme_broker_example_runs(kafka_jars, tmp_path):
    """The docs' real-broker example (docs/testing.md), run as written: it reads what the broker wrote back."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    section = text[text.index("**Against a real broker**"):]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    scope: dict = {}
    exec(compile(code, "docs/testing.md", "exec"), scope)
    scope["test_broker_and_kafkalog_agree"](tmp_path)
    from kafkalog.log.records_io import read_segment
    (segment,) = sorted((tmp_path / "kafka" / "data" / "orders-0").glob("*.log"))
    table = read_segment(segment)
    assert table.column("value").to_pylist() == [b"v"]


def test_a_cluster_id_made_in_python_is_one_kafka_takes(kafka_jars, tmp_path):
    """``random_cluster_id`` replaces a ``StorageTool random-uuid`` JVM before every broker: it has Kafka's
    shape (22 URL-safe base64 characters, not starting with '-'), and ``StorageTool format`` (which parses
    ``-t`` with ``Uuid.fromString``) takes it and writes it to meta.properties."""
    import re
    from kafkalog.testing.broker import random_cluster_id
    ids = [random_cluster_id() for _ in range(200)]
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", i) for i in ids), ids[:5]
    assert len(set(ids)) == len(ids)
    broker = KafkaBroker(tmp_path / "b")
    broker.format()
    meta = (broker.data_dir / "meta.properties").read_text()
    assert f"cluster.id={broker.cluster_id}" in meta and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", broker.cluster_id)
