"""Issue 30, group 1 — reading: every segment a real broker wrote decodes, through ``read_segment``,
``kafkalog dump --json`` and the Spark data source, to what a consumer of that broker received, and the
batch-level fields (producer id, epoch, sequences, leader epoch, codec, control batches) to what Kafka's
own DumpLogSegments prints for the same files.

One partition holds every codec (none, gzip, snappy, lz4, zstd), headers, null keys, null values,
idempotent and plain producers, a committed and an aborted transaction (control batches) and two
leader epochs (a broker restart between the halves bumps the partition's leader epoch).
"""
from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest

from kafkalog.log.records_io import read_segment
from kafkalog.testing import broker_client as bc
from kafkalog.testing.broker import DUMP_LOG_SEGMENTS, run_tool
from kafkalog.tools import cli

TOPIC = "reading"
T0 = 1_700_000_000_000
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _records(tag: str, n: int, start_ts: int):
    out = []
    for i in range(n):
        key = None if i % 5 == 3 else b"%s-k%d" % (tag.encode(), i)
        value = None if i % 7 == 6 else (b"%s-value-%d-" % (tag.encode(), i)) * (1 + i % 4)
        headers = [("h%d" % j, b"%s-%d-%d" % (tag.encode(), i, j)) for j in range(i % 3)]
        if i % 4 == 1:
            headers.append(("empty", b""))
        out.append(bc.Record(key, value, headers=headers, timestamp_ms=start_ts + i))
    return out


@pytest.fixture(scope="module")
def written(module_broker):
    """The broker writes the partition (restarting once between halves), then stops cleanly; returns
    (broker, what a read_uncommitted consumer received)."""
    b = module_broker
    bc.create_topic(b, TOPIC, configs={"retention.ms": -1, "retention.bytes": -1})
    for n, codec in enumerate(bc.CODECS):
        bc.produce(b, TOPIC, _records(codec, 12, T0 + 1000 * n), codec=codec, idempotent=n % 2 == 0, flush_every=5)
    bc.produce_transaction(b, TOPIC, _records("txa", 4, T0 + 9000), transactional_id="r-tx", commit=False,
                           codec="lz4")
    b.restart()                  # controlled shutdown: the leader epoch goes up
    bc.produce_transaction(b, TOPIC, _records("txc", 5, T0 + 10000), transactional_id="r-tx", commit=True,
                           codec="zstd")
    bc.produce(b, TOPIC, _records("tail", 6, T0 + 11000), codec="gzip")
    consumed = bc.consume_all(b, TOPIC)
    b.stop()
    return b, consumed


def _logs(broker):
    return sorted(broker.partition_dir(TOPIC).glob("*.log"))


def _ours(broker) -> pa.Table:
    return pa.concat_tables([read_segment(p) for p in _logs(broker)])


def _consumer_rows(consumed):
    return [(c.offset, c.key, c.value, tuple(c.headers), c.timestamp_ms, c.timestamp_type) for c in consumed]


def _record_rows(rows):
    return [(r["offset"], r["key"], r["value"], tuple((h["key"], h["value"]) for h in r["headers"]),
             int(r["timestamp"].timestamp() * 1000) if hasattr(r["timestamp"], "timestamp") else r["timestamp"],
             r["timestampType"]) for r in rows]


# DumpLogSegments --deep-iteration lines
BATCH_RE = re.compile(r"baseOffset: (-?\d+) lastOffset: (-?\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: (-?\d+) "
                      r"producerId: (-?\d+) producerEpoch: (-?\d+) partitionLeaderEpoch: (-?\d+) isTransactional: "
                      r"(true|false) isControl: (true|false) deleteHorizonMs: \S+ position: (\d+) \S+: (-?\d+) "
                      r"size: (\d+) magic: (\d) compresscodec: (\w+) crc: (\d+) isvalid: (true|false)")
RECORD_RE = re.compile(r"\| offset: (\d+) \S+: (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) sequence: (-?\d+) "
                       r"headerKeys: \[([^\]]*)\](?: endTxnMarker: (\w+) coordinatorEpoch: (\d+))?")


def _kafka_records(broker):
    """Per record, as DumpLogSegments prints it: its batch's fields and the record's own."""
    out = []
    for path in _logs(broker):
        text = run_tool(DUMP_LOG_SEGMENTS, "--deep-iteration", "--files", str(path)).stdout
        batch = None
        for line in text.splitlines():
            m = BATCH_RE.match(line)
            if m:
                batch = m.groups()
                continue
            m = RECORD_RE.match(line)
            if m:
                (base, last, _count, base_seq, _last_seq, pid, epoch, leader_epoch, txn, ctl, pos, _maxts, _size,
                 magic, codec, _crc, valid) = batch
                offset, ts, ksize, vsize, seq, header_keys, marker, _coord = m.groups()
                out.append(dict(offset=int(offset), baseOffset=int(base), lastOffset=int(last), producerId=int(pid),
                                producerEpoch=int(epoch), baseSequence=int(base_seq), sequence=int(seq),
                                partitionLeaderEpoch=int(leader_epoch), isTransactional=txn == "true",
                                isControl=ctl == "true", batchPosition=int(pos), magic=int(magic),
                                codec=CODEC_IDS[codec], timestamp=int(ts), keySize=int(ksize), valueSize=int(vsize),
                                headerKeys=header_keys.split(",") if header_keys else [], marker=marker,
                                crcValid=valid == "true"))
    return out


BATCH_FIELDS = ("baseOffset", "lastOffset", "producerId", "producerEpoch", "baseSequence", "partitionLeaderEpoch",
                "isTransactional", "isControl", "batchPosition", "magic", "codec")


def test_read_segment_equals_the_consumer_and_dump_log_segments(written):
    broker, consumed = written
    table = _ours(broker)
    rows = table.to_pylist()
    data = [r for r in rows if not r["isControl"]]
    assert _record_rows(data) == _consumer_rows(consumed)
    # what the data covers: every codec, two leader epochs, plain and idempotent producers, both markers
    assert {r["codec"] for r in rows} == set(CODEC_IDS.values())
    assert len({r["partitionLeaderEpoch"] for r in rows}) == 2
    assert {r["producerId"] == -1 for r in data} == {True, False}
    assert any(r["key"] is None for r in data) and any(r["value"] is None for r in data)

    kafka = _kafka_records(broker)
    assert [k["offset"] for k in kafka] == [r["offset"] for r in rows]
    for ours, theirs in zip(rows, kafka):
        assert {f: ours[f] for f in BATCH_FIELDS} == {f: theirs[f] for f in BATCH_FIELDS}, ours["offset"]
        seq = -1 if ours["baseSequence"] == -1 else ours["baseSequence"] + ours["offset"] - ours["baseOffset"]
        assert seq == theirs["sequence"]
        assert int(ours["timestamp"].timestamp() * 1000) == theirs["timestamp"]
        assert (-1 if ours["key"] is None else len(ours["key"])) == theirs["keySize"]
        assert (-1 if ours["value"] is None else len(ours["value"])) == theirs["valueSize"]
        assert [h["key"] for h in ours["headers"]] == theirs["headerKeys"]
    markers = [(k["offset"], k["marker"]) for k in kafka if k["isControl"]]
    # the abort's marker can be written twice: a coordinator that restarts while the abort is still being
    # completed writes its markers again (at least once), so runs of one kind count once
    kinds = [m for i, (_, m) in enumerate(markers) if i == 0 or markers[i - 1][1] != m]
    assert kinds == ["ABORT", "COMMIT"]
    # the aborted transaction's records are in the log (a read_uncommitted consumer gets them) ...
    aborted = [r for r in data if r["isTransactional"] and r["offset"] < markers[0][0]]
    assert len(aborted) == 4
    # ... and the leader-epoch-checkpoint agrees with the batches' leader epochs
    text = (broker.partition_dir(TOPIC) / "leader-epoch-checkpoint").read_text().split("\n")
    entries = [tuple(map(int, line.split())) for line in text[2:] if line.strip()]
    firsts = {}
    for r in rows:
        firsts.setdefault(r["partitionLeaderEpoch"], r["baseOffset"])
    assert [e for e in entries if e[0] in firsts] == sorted(firsts.items())


def test_dump_json_equals_the_consumer(written, capsys):
    broker, consumed = written
    paths = ",".join(str(p) for p in _logs(broker))
    assert cli.main(["dump", "--print-data-log", "--json", "--files", paths]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    records = [o for o in objs if o["type"] == "record"]
    data = [o for o in records if not o["isControl"]]
    import base64

    def unb64(s):
        return None if s is None else base64.b64decode(s)
    got = [(o["offset"], unb64(o["key_b64"]), unb64(o["value_b64"]),
            tuple((h["key"], base64.b64decode(h["value_b64"])) for h in o["headers"]), o["timestamp"],
            {"CreateTime": 0, "LogAppendTime": 1}[o["timestampType"]]) for o in data]
    assert got == _consumer_rows(consumed)
    batches = {(o["file"], o["position"]): o for o in objs if o["type"] == "batch"}
    kafka = {k["offset"]: k for k in _kafka_records(broker)}
    for o in records:
        b = batches[(o["file"], o["batchPosition"])]
        k = kafka[o["offset"]]
        assert (b["baseOffset"], b["producerId"], b["producerEpoch"], b["baseSequence"], b["partitionLeaderEpoch"],
                b["isTransactional"], b["isControl"], o["sequence"]) == (
                k["baseOffset"], k["producerId"], k["producerEpoch"], k["baseSequence"], k["partitionLeaderEpoch"],
                k["isTransactional"], k["isControl"], k["sequence"])
        assert CODEC_IDS[b["compresscodec"]] == k["codec"]


def test_spark_source_equals_the_consumer(written, spark):
    broker, consumed = written
    df = spark.read.format("kafkalog").option("subscribe", TOPIC).option("includeHeaders", "true").load(str(broker.data_dir))
    rows = df.select("offset", "key", "value", "headers", "timestamp", "timestampType").orderBy("offset").collect()
    # headers are null for a record without any, as Spark's Kafka source gives them (issue 32)
    got = [(r.offset, None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
            tuple((h.key, bytes(h.value)) for h in (r.headers or ())), int(r.timestamp.timestamp() * 1000),
            r.timestampType)
           for r in rows]
    assert got == _consumer_rows(consumed)
