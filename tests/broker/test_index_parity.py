"""Issue 30, group 6 — index rebuilding: the ``.index`` and ``.timeindex`` files a real broker rebuilds in
recovery equal, byte for byte, what ``reindex`` (kafkalog.log.reindex.reindex_partition) builds from the
same ``.log`` files, at index.interval.bytes 0, 100 and 4096 (a topic config).

The broker writes several segments (rolled by segment.ms on the records' timestamps, one timestamp going
backwards so the time index keeps a running maximum, batches of several sizes, one compressed codec) and
stops (SIGTERM). Our copy of the folders is taken then. The broker's own rebuild: every ``.index`` is
deleted on the stopped broker, so its loader recovers every segment (rebuilding both indexes), and it
stops again with SIGTERM, which trims the active segment's preallocated indexes and writes its final
time-index entry (LogSegment.close) — what is compared.
"""
from __future__ import annotations

import shutil

import pytest

from kafkalog.log.reindex import reindex_partition
from kafkalog.testing import broker_client as bc

T0 = 1_700_000_000_000
INTERVALS = (0, 100, 4096)


def _topic(interval: int) -> str:
    return f"idx-{interval}"


def _records():
    out = []
    ts = T0
    for i in range(60):
        ts += 137 if i != 31 else -900          # one step back: the time index keeps the running max
        out.append(bc.Record(b"k%d" % (i % 9), b"v" * (10 + (i * 37) % 400), headers=[("h", b"%d" % i)] * (i % 2),
                             timestamp_ms=ts))
    return out


@pytest.fixture(scope="module")
def rebuilt(module_broker, tmp_path_factory):
    """(broker, our copy's root) after the broker rebuilt every index in recovery and stopped."""
    b = module_broker
    for interval in INTERVALS:
        bc.create_topic(b, _topic(interval), configs={"index.interval.bytes": interval, "segment.ms": 2000,
                                                      "retention.ms": -1, "retention.bytes": -1})
        records = _records()
        bc.produce(b, _topic(interval), records[:40], flush_every=3)
        bc.produce(b, _topic(interval), records[40:], flush_every=7, codec="gzip")
    b.stop()
    ours = tmp_path_factory.mktemp("ours")
    for interval in INTERVALS:
        folder = b.partition_dir(_topic(interval))
        assert len(list(folder.glob("*.log"))) >= 3, "the data should span several segments"
        shutil.copytree(folder, ours / folder.name)
        for index in folder.glob("*.index"):
            index.unlink()
    b.start()
    assert "Recovering unflushed segment" in b.server_log() or "recover" in b.server_log().lower()
    b.stop()
    return b, ours


@pytest.mark.parametrize("interval", INTERVALS)
def test_reindex_equals_the_brokers_recovery_rebuild(rebuilt, interval):
    broker, ours = rebuilt
    theirs = broker.partition_dir(_topic(interval))
    mine = ours / theirs.name
    for path in list(mine.glob("*.index")) + list(mine.glob("*.timeindex")):
        path.unlink()
    result = reindex_partition(mine, log_dir=ours, index_interval_bytes=interval, include_active=True,
                               verify_only=False)
    assert not [r for r in result.rows if r.get("class") in ("error", "corrupt")], result.rows
    logs = sorted(p.stem for p in theirs.glob("*.log"))
    assert logs == sorted(p.stem for p in mine.glob("*.log"))
    entries = 0
    for base in logs:
        for suffix in (".index", ".timeindex"):
            broker_bytes = (theirs / (base + suffix)).read_bytes()
            our_bytes = (mine / (base + suffix)).read_bytes()
            assert our_bytes == broker_bytes, f"{base}{suffix}: ours {len(our_bytes)} bytes, broker {len(broker_bytes)}"
            entries += len(broker_bytes)
    assert entries > 0
