"""The demo's compacted topic gives the cleaner its cases: superseded records, tombstones (stamped with
a delete horizon in a first round), an aborted transaction (its records removed, its marker kept until
the horizon) and a committed one (its records kept where they are the latest); the .txnindex holds the
aborted one, as a broker writes it."""
from __future__ import annotations

import random

import kafkalog
from kafkalog.cleaner.log_dir_run import compact_log_dir
from kafkalog.index.transaction_index import read_transaction_index
from kafkalog.tools.demo import START_MS, generate_demo_log_dir
from kafkalog.tools.demo_compacted import (ABORTED_PRODUCER, COMMITTED_PRODUCER, TRANSACTION_RECORDS, compacted_rows)

TOPIC = "demo-customers"


def test_the_rows_hold_both_transactions_and_their_markers():
    rows = compacted_rows(topic=TOPIC, records=300, start_ms=START_MS, rnd=random.Random(1))
    markers = [(r["producer_id"], r["control"]) for r in rows if r.get("control")]
    assert markers == [(ABORTED_PRODUCER, "abort"), (COMMITTED_PRODUCER, "commit")]
    for producer in (ABORTED_PRODUCER, COMMITTED_PRODUCER):
        assert sum(r.get("producer_id") == producer and r.get("transactional", False) for r in rows) == TRANSACTION_RECORDS
    assert any(r.get("value") is None and not r.get("control") for r in rows)


def test_compacting_the_demo_topic_removes_the_aborted_records(tmp_path):
    out = tmp_path / "logs"
    generate_demo_log_dir(out, partitions=1, records=100, consumer_groups=1, compacted_topic=TOPIC)
    folder = out / f"{TOPIC}-0"
    txn = [e for p in folder.glob("*.txnindex") for e in read_transaction_index(p).entries]
    assert [e.producer_id for e in txn] == [ABORTED_PRODUCER]
    before = [kafkalog.read_segment(p) for p in sorted(folder.glob("*.log"))]
    committed_keys = {k for t in before for k, pid, ctl in zip(t.column("key").to_pylist(),
                      t.column("producerId").to_pylist(), t.column("isControl").to_pylist())
                      if pid == COMMITTED_PRODUCER and not ctl}
    configs = kafkalog.configs_from_mappings(topics={TOPIC: {"cleanup.policy": "compact"}})
    report = compact_log_dir(out, configs=configs, now_ms=START_MS + 7 * 86_400_000, topics={TOPIC})
    row = report["partitions"][0]
    assert row["status"] == "cleaned"
    assert row["aborted_records_removed"] == TRANSACTION_RECORDS
    assert row["markers_kept"] == 2 and row["horizons_stamped"] > 0
    after = [kafkalog.read_segment(p) for p in sorted(folder.glob("*.log"))]
    producers = {pid for t in after for pid, ctl in zip(t.column("producerId").to_pylist(),
                                                          t.column("isControl").to_pylist()) if not ctl}
    assert ABORTED_PRODUCER not in producers
    kept_committed = {k for t in after for k, pid, ctl in zip(t.column("key").to_pylist(),
                      t.column("producerId").to_pylist(), t.column("isControl").to_pylist())
                      if pid == COMMITTED_PRODUCER and not ctl}
    assert kept_committed and kept_committed <= committed_keys
