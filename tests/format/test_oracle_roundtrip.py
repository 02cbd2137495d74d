"""kafka-python writes every magic x codec and we read it back field for field; kafka-python reads
what we write. Both engines."""
from __future__ import annotations

import random

import pytest

from kafkalog.log import records_io as segment
from kafkalog.format import compression
from kafkalog.format.file_records import scan_batches

from engines import engine_param
from oracle import CODECS_BY_MAGIC, build_batch, read_all

CASES = [(m, c) for m, codecs in CODECS_BY_MAGIC.items() for c in codecs]


def _records(rnd: random.Random, n: int, magic: int):
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else b"key-%d" % rnd.randrange(50)
        value = None if i % 11 == 5 else (b"value-%d " % i) * rnd.randrange(1, 20)
        headers = [] if magic < 2 or i % 3 else [("h%d" % j, b"v" * j) for j in range(i % 4)]
        out.append((1_700_000_000_000 + rnd.randrange(-5000, 5000), key, value, headers))
    return out


@engine_param
@pytest.mark.parametrize("magic,codec", CASES, ids=[f"v{m}-{compression.codec_name(c)}" for m, c in CASES])
def test_we_read_what_kafka_python_writes(tmp_path, engine, magic, codec):
    rnd = random.Random(magic * 10 + codec)
    part = tmp_path / "orders.eu-7"
    part.mkdir()
    blobs, expected, base = [], [], 100
    for b in range(4):
        recs = _records(rnd, 5 + 10 * b, magic)
        blobs.append(build_batch(magic, codec, base, recs))
        for i, (ts, k, v, h) in enumerate(recs):
            expected.append({"offset": base + i, "timestamp": ts if magic >= 1 else None, "key": k, "value": v,
                             "headers": list(h)})
        base += len(recs) + 3          # gaps between batches, as after compaction
    log = part / "00000000000000000100.log"
    log.write_bytes(b"".join(blobs))
    # the codec really was applied (kafka-python silently stores uncompressible batches plain)
    scan = scan_batches(log, engine=engine)
    assert set(scan.batches.column("codec").to_pylist()) == {codec}
    assert all(scan.batches.column("crcValid").to_pylist())

    table = segment.read_segment(log, engine=engine)
    rows = table.to_pylist()
    assert len(rows) == len(expected)
    for row, exp in zip(rows, expected):
        assert row["offset"] == exp["offset"]
        assert row["key"] == exp["key"] and row["value"] == exp["value"]
        got_ts = None if row["timestamp"] is None else round(row["timestamp"].timestamp() * 1000)
        assert got_ts == exp["timestamp"]
        assert row["timestampType"] == (-1 if magic == 0 else 0)
        assert [(h["key"], h["value"]) for h in row["headers"]] == exp["headers"]
        assert row["topic"] == "orders.eu" and row["partition"] == 7
        assert row["magic"] == magic and row["codec"] == codec
    # kafka-python's own reading agrees with ours record for record
    theirs = read_all(log.read_bytes())
    assert [(r["offset"], r["key"], r["value"]) for r in theirs] == [(r["offset"], r["key"], r["value"]) for r in rows]


@pytest.mark.parametrize("magic,codec", CASES, ids=[f"v{m}-{compression.codec_name(c)}" for m, c in CASES])
def test_kafka_python_reads_what_we_write(tmp_path, magic, codec):
    rnd = random.Random(99 + magic * 10 + codec)
    import pyarrow as pa
    recs = _records(rnd, 300, magic)
    table = pa.table({
        "offset": pa.array(range(50, 350), pa.int64()),
        "timestamp": pa.array([ts for ts, *_ in recs], pa.timestamp("ms", tz="UTC")),
        "key": pa.array([k for _, k, _, _ in recs], pa.binary()),
        "value": pa.array([v for _, _, v, _ in recs], pa.binary()),
        "headers": pa.array([[{"key": k, "value": v} for k, v in h] for *_, h in recs],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    })
    log = segment.write_segment(tmp_path, table, compression=codec, magic=magic, batch_bytes=2048)
    assert log.name == "00000000000000000050.log"
    theirs = read_all(log.read_bytes())
    assert [r["offset"] for r in theirs] == list(range(50, 350))
    assert [r["key"] for r in theirs] == [k for _, k, _, _ in recs]
    assert [r["value"] for r in theirs] == [v for _, _, v, _ in recs]
    if magic >= 1:
        assert [r["timestamp"] for r in theirs] == [ts for ts, *_ in recs]
    if magic == 2:
        assert [r["headers"] for r in theirs] == [list(h) for *_, h in recs]
    # and we read our own output back identically with both engines
    for engine in ("reference", "compiled"):
        again = segment.read_segment(log, engine=engine)
        assert again.column("offset").to_pylist() == list(range(50, 350))
        assert again.column("value").to_pylist() == [v for _, _, v, _ in recs]
