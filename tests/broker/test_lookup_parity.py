"""Issue 30, group 7 — lookups: what a real broker answers to ListOffsets (-1 latest, -2 earliest, -3
max-timestamp, -4 earliest-local, timestamps before, at, between and after the data; read_committed with
an aborted and an open transaction) equals ``kafkalog offsets`` and the library lookup
(kafkalog.lookup.partition_log, which the lookup Spark job runs per query through kafkalog.lookup.bulk)
on the broker's stopped log dir — on a plain topic over several segments whose largest timestamp sits in
an old segment and whose log start offset DeleteRecords moved, on a compacted topic with gaps the broker's cleaner left, and on a partition whose rolled
segment lost its ``.timeindex`` (the broker falls back to the ``.log``'s mtime to choose the segment).
"""
from __future__ import annotations

import json
import os
import shutil

import pytest

from kafkalog.lookup.partition_log import PartitionLog
from kafkalog.lookup.rules import ISOLATION_HIGH_WATERMARK
from kafkalog.testing import broker_client as bc
from kafkalog.tools import cli

T0 = 1_700_000_000_000
SPECIAL = (bc.LATEST, bc.EARLIEST, bc.MAX_TIMESTAMP, bc.EARLIEST_LOCAL)
PLAIN, COMPACT, TXN, NO_TIMEINDEX = "lk-plain", "lk-compact", "lk-txn", "lk-notimeindex"


def _plain_records():
    out = []
    for i in range(24):
        ts = T0 + 1000 * i
        if i == 2:
            ts = T0 + 90_000              # the maximum, in the first segment
        if i == 9:
            ts = T0 + 3_500               # behind its neighbours
        out.append(bc.Record(b"k%d" % i, b"v%d" % i, timestamp_ms=ts))
    return out


def _targets(records):
    stamps = sorted({r.timestamp_ms for r in records})
    return [T0 - 5, stamps[0], stamps[3], stamps[3] + 1, stamps[len(stamps) // 2] + 500, T0 + 23_000 + 1,
            stamps[-1], stamps[-1] + 1]


def _ask(broker, topic, targets, *, read_committed=False):
    return {t: bc.list_offsets(broker, topic, 0, t, read_committed=read_committed) for t in targets}


@pytest.fixture(scope="module")
def answered(module_broker, tmp_path_factory):
    """The broker's answers per topic, then the broker stopped cleanly; returns (broker, answers, copies)."""
    b = module_broker
    answers = {}
    plain = _plain_records()
    targets = list(SPECIAL) + _targets(plain)
    for topic in (PLAIN, NO_TIMEINDEX):
        bc.create_topic(b, topic, configs={"segment.ms": 5000, "retention.ms": -1, "retention.bytes": -1})
        bc.produce(b, topic, plain, flush_every=2)
    # DeleteRecords: the log start offset moves inside the first segment (earliest, and timestamp answers
    # below it, change; the segment stays until retention finds it wholly below)
    assert bc.delete_records(b, {(PLAIN, 0): 3}) == {(PLAIN, 0): 3}
    # Until the retention task deletes the segment wholly below the new start ([0, 1]: the next batch's
    # timestamp rolled it), the broker still chooses it for a time it reaches and answers "not found"
    # (UnifiedLog searches only the first segment reaching the time): ask once it is gone, on the files
    # we read after the stop.
    b.wait_until(lambda: not (b.partition_dir(PLAIN) / "00000000000000000000.log").exists(), timeout=30,
                 what="retention to delete the segment below the log start offset")
    answers[PLAIN] = _ask(b, PLAIN, targets)
    assert answers[PLAIN][bc.EARLIEST][0] == 3

    # a compacted topic: the cleaner leaves offset gaps; a sentinel rolls the last dirty segment
    bc.create_topic(b, COMPACT, configs={"cleanup.policy": "compact", "segment.ms": 5000, "min.cleanable.dirty.ratio": 0,
                                         "delete.retention.ms": 0, "min.compaction.lag.ms": 0})
    compact = [bc.Record(b"k%d" % (i % 4), b"v%d" % i, timestamp_ms=T0 + 1000 * i) for i in range(24)]
    bc.produce(b, COMPACT, compact, flush_every=1)
    bc.produce(b, COMPACT, [bc.Record(b"sentinel", b"s", timestamp_ms=T0 + 60_000)])
    b.wait_until(lambda: b.checkpoint("cleaner-offset-checkpoint").get((COMPACT, 0), 0) >= 20, timeout=60,
                 what="the broker's cleaner to clean lk-compact")
    answers[COMPACT] = _ask(b, COMPACT, list(SPECIAL) + _targets(compact))
    assert len(bc.consume_all(b, COMPACT)) < 25, "the cleaner should have left gaps"

    # transactions: committed data, an aborted transaction, then one left open
    bc.create_topic(b, TXN, configs={"retention.ms": -1})
    bc.produce(b, TXN, [bc.Record(b"a", b"%d" % i, timestamp_ms=T0 + i) for i in range(3)])
    bc.produce_transaction(b, TXN, [bc.Record(b"x", b"aborted", timestamp_ms=T0 + 10)], transactional_id="lk-a",
                           commit=False)
    bc.produce(b, TXN, [bc.Record(b"a", b"after", timestamp_ms=T0 + 20)])
    open_txn = bc.producer(b, transactional_id="lk-open")
    open_txn.init_transactions()
    open_txn.begin_transaction()
    open_txn.send(TXN, key=b"o", value=b"open", timestamp_ms=T0 + 30)
    open_txn.flush()
    bc.produce(b, TXN, [bc.Record(b"a", b"late", timestamp_ms=T0 + 40)])
    txn_targets = list(SPECIAL) + [T0 - 1, T0 + 10, T0 + 20, T0 + 25, T0 + 40, T0 + 41]
    answers[TXN] = _ask(b, TXN, txn_targets)
    answers[(TXN, "read_committed")] = _ask(b, TXN, txn_targets, read_committed=True)
    open_txn.close(timeout=0)
    b.stop()

    # a rolled segment without its .timeindex: our copy of the dir at that moment, then the broker's answers
    copies = tmp_path_factory.mktemp("no-timeindex")
    folder = b.partition_dir(NO_TIMEINDEX)
    first = sorted(folder.glob("*.timeindex"))[0]
    first.unlink()
    shutil.copytree(b.data_dir, copies / "data", symlinks=True)
    b.start()
    answers[NO_TIMEINDEX] = _ask(b, NO_TIMEINDEX, targets)
    b.stop()
    return b, answers, copies / "data"


def _ours(log_dir, topic, target, isolation=ISOLATION_HIGH_WATERMARK):
    with PartitionLog.open(log_dir / f"{topic}-0", log_dir=log_dir) as log:
        r = log.lookup(target, isolation=isolation)
    return (r.offset, r.timestamp) if r.found else (-1, -1)


def _cli(capsys, log_dir, topic, target, isolation="high_watermark"):
    assert cli.main(["offsets", "--log-dirs", os.fspath(log_dir), "--topic", topic, "--time", str(target),
                     "--isolation", isolation, "--json"]) == 0
    (obj,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return (obj["offset"], obj["timestamp"]) if obj["found"] else (-1, -1)


@pytest.mark.parametrize("topic", [PLAIN, COMPACT, TXN, NO_TIMEINDEX])
def test_offsets_equal_list_offsets(answered, topic, capsys):
    broker, answers, no_timeindex_copy = answered
    log_dir = no_timeindex_copy if topic == NO_TIMEINDEX else broker.data_dir
    if topic == NO_TIMEINDEX:
        assert not (log_dir / f"{topic}-0" / "00000000000000000000.timeindex").exists()
    theirs = answers[topic]
    ours = {t: _ours(log_dir, topic, t) for t in theirs}
    assert ours == theirs
    assert {t: _cli(capsys, log_dir, topic, t) for t in theirs} == theirs


def test_read_committed_equals_list_offsets(answered, capsys):
    broker, answers, _ = answered
    theirs = answers[(TXN, "read_committed")]
    assert theirs[bc.LATEST][0] < answers[TXN][bc.LATEST][0], "the open transaction should hold the LSO back"
    ours = {t: _ours(broker.data_dir, TXN, t, isolation="read_committed") for t in theirs}
    assert ours == theirs
    assert {t: _cli(capsys, broker.data_dir, TXN, t, isolation="read_committed") for t in theirs} == theirs
