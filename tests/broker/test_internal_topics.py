"""Issue 30, group 8: __consumer_offsets and __transaction_state written by a real broker (Kafka 4.4) for real
consumer groups and transactions. Our decoders read every record of them, and our offline lag (read from the
stopped broker's log dir) equals what the broker reported while running: each group's committed offsets
(OffsetFetch) against each partition's end (ListOffsets latest), also after a group's offsets for one
partition were deleted (DeleteGroupOffsets) and after a whole group was deleted (DeleteGroups).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Dict, Tuple

import pytest

from kafkalog.testing import broker_client as bc
from kafkalog.testing.broker import KafkaBroker
from broker_harness import start_or_unavailable

TOPICS = {"orders": 3, "events": 1}


def consume_and_commit(broker: KafkaBroker, group: str, topic: str, records: int) -> None:
    """A real consumer group member (classic protocol): subscribe, poll about ``records`` records,
    commit what it consumed, leave the group."""
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, max_poll_records=records)
    try:
        seen, deadline = 0, time.monotonic() + 30
        while seen < records and time.monotonic() < deadline:
            seen += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
        assert seen, "the consumer received nothing"
        consumer.commit()
    finally:
        consumer.close()


def transactional_offsets(broker: KafkaBroker, group: str, offsets: Dict[Tuple[str, int], int], *,
                          transactional_id: str, commit: bool) -> None:
    """Offsets committed inside a transaction (TxnOffsetCommit) with a record, committed or aborted."""
    from kafka import TopicPartition
    from kafka.consumer.group import ConsumerGroupMetadata
    from kafka.structs import OffsetAndMetadata
    client = bc.producer(broker, transactional_id=transactional_id)
    client.init_transactions()
    try:
        client.begin_transaction()
        client.send("events", key=b"txn", value=transactional_id.encode()).get(timeout=30)
        client.send_offsets_to_transaction({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                                            for (t, p), o in offsets.items()}, ConsumerGroupMetadata(group))
        if commit:
            client.commit_transaction()
        else:
            client.abort_transaction()
    finally:
        client.close(timeout=10)


@pytest.fixture(scope="module")
def stopped_broker(kafka_jars, tmp_path_factory):
    """A broker that ran real groups and transactions, what it reported, then stopped (SIGTERM)."""
    broker = KafkaBroker(tmp_path_factory.mktemp("internal-topics"))
    start_or_unavailable(broker)
    try:
        for topic, partitions in TOPICS.items():
            bc.create_topic(broker, topic, partitions=partitions)
        bc.produce(broker, "orders", [bc.Record(b"k%d" % i, b"v%d" % i, partition=i % 3) for i in range(30)])
        bc.produce(broker, "events", [bc.Record(b"e%d" % i, None if i % 4 == 0 else b"x") for i in range(12)])
        consume_and_commit(broker, "g-real", "orders", 12)
        bc.commit_group_offsets(broker, "g-bare", {("orders", 0): 2, ("events", 0): 5})
        bc.commit_group_offsets(broker, "g-bare", {("orders", 0): 4})              # a later commit wins
        bc.commit_group_offsets(broker, "g-partial", {("orders", 0): 1, ("orders", 1): 3, ("orders", 2): 7})
        bc.commit_group_offsets(broker, "g-gone", {("orders", 0): 6, ("events", 0): 1})
        transactional_offsets(broker, "g-txn", {("events", 0): 8}, transactional_id="t-commit", commit=True)
        transactional_offsets(broker, "g-txn-aborted", {("events", 0): 9}, transactional_id="t-abort", commit=False)
        bc.produce_transaction(broker, "events", [bc.Record(b"a", b"kept")], transactional_id="t-plain", commit=True)
        with bc.admin(broker) as admin:
            from kafka import TopicPartition
            admin.delete_group_offsets("g-partial", [TopicPartition("orders", 1)])
            admin.delete_groups(["g-gone"])
        groups = ("g-real", "g-bare", "g-partial", "g-gone", "g-txn", "g-txn-aborted")
        reported = {g: bc.group_offsets(broker, g) for g in groups}
        ends = {(t, p): bc.list_offsets(broker, t, p, bc.LATEST)[0] for t, n in TOPICS.items() for p in range(n)}
        reported["configs"] = {t: bc.describe_topic_configs(broker, t) for t in ("__consumer_offsets", "__transaction_state")}
        broker.stop()
    finally:
        broker.kill()
    assert reported["g-partial"] and ("orders", 1) not in reported["g-partial"]
    assert reported["g-gone"] == {} and reported["g-txn-aborted"] == {} and reported["g-txn"] == {("events", 0): 8}
    return broker, reported, ends


def broker_lag(reported, ends) -> Dict[Tuple[str, str, int], Tuple[int, int]]:
    return {(g, t, p): (o, ends[(t, p)] - o) for g, offsets in reported.items() if g != "configs"
            for (t, p), o in offsets.items()}


def test_internal_topics_take_the_configs_the_broker_created_them_with(stopped_broker):
    """The broker's topic-level configs of its internal topics (DescribeConfigs, source TOPIC_CONFIG) are
    what our config resolution gives them from the broker's server.properties alone: compact, not the
    broker's delete default (a retention run would otherwise delete committed offsets)."""
    from kafkalog.config import TOPIC_CONFIGS, load_configs
    broker, reported, _ = stopped_broker
    configs = load_configs(broker_config=broker.properties_file)
    for topic, theirs in reported["configs"].items():
        assert theirs.get("cleanup.policy") == "compact", (topic, theirs)
        ours = configs.for_topic(topic)
        modelled = {k: v for k, v in theirs.items() if k in TOPIC_CONFIGS}
        assert set(modelled) >= {"cleanup.policy", "segment.bytes", "compression.type"}, (topic, theirs)
        for key, text in modelled.items():
            assert getattr(ours, key.replace(".", "_")) == TOPIC_CONFIGS[key].parse(text), (topic, key, text)


def test_offline_lag_equals_the_broker(stopped_broker):
    from kafkalog.coordinator.log_dirs import consumer_lag
    broker, reported, ends = stopped_broker
    report = consumer_lag([broker.data_dir], now_ms=int(time.time() * 1000))
    assert report.errors == [] and report.loaded.undecodable == 0
    assert report.loaded.pending_transactional == 0
    ours = {(r["group"], r["topic"], r["partition"]): (r["committed_offset"], r["lag"]) for r in report.rows}
    assert ours == broker_lag(reported, ends)
    assert all(r["high_watermark"] == ends[(r["topic"], r["partition"])] for r in report.rows)


def test_lag_command_equals_the_broker(stopped_broker):
    broker, reported, ends = stopped_broker
    proc = subprocess.run([sys.executable, "-m", "kafkalog.tools.cli", "lag", "--log-dirs", str(broker.data_dir), "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    ours = {(r["group"], r["topic"], r["partition"]): (r["committed_offset"], r["lag"]) for r in rows[:-1]}
    assert ours == broker_lag(reported, ends)
    assert rows[-1]["type"] == "summary" and rows[-1]["total_lag"] == sum(lag for _, lag in ours.values())


def test_transaction_state_decodes(stopped_broker):
    from kafkalog.coordinator.log_dirs import TRANSACTION_STATE_TOPIC, coordinator_rows, live_partitions
    from kafkalog.coordinator.transaction.rows import TRANSACTION_ROW_SCHEMA, transaction_rows
    broker, _, _ = stopped_broker
    rows = []
    for pdir in live_partitions([broker.data_dir], TRANSACTION_STATE_TOPIC):
        rows += coordinator_rows(pdir, transaction_rows, TRANSACTION_ROW_SCHEMA).to_pylist()
    assert rows and all(r["error"] is None for r in rows)
    last = {}
    for r in rows:
        last[r["transactional_id"]] = r
    assert {t: r["state"] for t, r in last.items()} == {
        "t-commit": "CompleteCommit", "t-abort": "CompleteAbort", "t-plain": "CompleteCommit"}
    # Ongoing twice: AddPartitionsToTxn (events), then AddOffsetsToTxn (the group's __consumer_offsets partition)
    states = [r["state"] for r in rows if r["transactional_id"] == "t-abort"]
    assert states == ["Empty", "Ongoing", "Ongoing", "PrepareAbort", "CompleteAbort"]
    # the offsets were committed inside t-commit, whose partitions include the group's coordinator partition
    ongoing = [r for r in rows if r["transactional_id"] == "t-commit" and r["state"] == "PrepareCommit"]
    assert {p["topic"] for p in ongoing[0]["partitions"]} == {"events", "__consumer_offsets"}
